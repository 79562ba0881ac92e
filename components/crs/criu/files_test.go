package crscriu

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/frameworks/sstore/snapshot"
)

// writerScript appends 1, 2, 3, ... to the file named by $F through one
// descriptor it keeps open (3, for appending), and echoes each number
// to its standard output once written, every 10 ms.
const writerScript = `exec 3>>"$F"; i=0; while :; do i=$((i+1)); echo $i >&3; echo $i; sleep 0.01; done`

// startWriter starts writerScript on file as crstest's counter runs (init
// of its own PID namespace, standard output a pipe) and returns it with
// its output, once it wrote its first number.
func startWriter(t *testing.T, file string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	out := crstest.Pipe(t)
	cmd := exec.Command("/bin/sh", "-c", writerScript)
	cmd.Env = append(os.Environ(), "F="+file)
	cmd.Stdout = out[1]
	crstest.StartIsolated(t, cmd)
	out[1].Close()
	lines := bufio.NewReader(out[0])
	if n := crstest.Count(t, lines); n != 1 {
		t.Fatalf("the writer started at %d, want 1", n)
	}
	return cmd, lines
}

// numbers checks file holds 1, 2, ..., n, one a line, and returns n.
func numbers(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d of %s is %q, want %d (the file is not what one uninterrupted writer makes):\n%s", i+1, file, l, i+1, b)
		}
	}
	return len(lines)
}

// TestFileOpenForWriting: a tree appending to a file through a
// descriptor it keeps open is checkpointed and left running; the
// snapshot holds the file as it was at the dump (its path and permissions
// in Meta, owner-only like the images). The writer goes on, then is
// killed; whether the file grew since or was cut short, the restore puts
// it back, CRIU accepts it, and the restored writer appends from where
// the dump caught it: the file is 1, 2, 3, ... as one uninterrupted
// writer makes it.
func TestFileOpenForWriting(t *testing.T) {
	m := newModule(t)
	for _, after := range []string{"grown", "truncated", "removed"} {
		t.Run(after, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "out.txt")
			cmd, lines := startWriter(t, file)
			if err := os.Chmod(file, 0o640); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: cmd.Process.Pid, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(res.Files, savedPrefix+"0") || res.Meta[metaFilePrefix+"0"] != file || res.Meta[metaModePrefix+"0"] != "640" || res.Meta[metaFilePrefix+"1"] != "" {
				t.Fatalf("files %v, meta %v: want %s saved as %s0 with mode 640", res.Files, res.Meta, file, savedPrefix)
			}
			saved := filepath.Join(dir, savedPrefix+"0")
			if fi, err := os.Stat(saved); err != nil || fi.Mode().Perm() != snapshot.OwnerFileMode {
				t.Fatalf("the saved copy: %v, %v; want it owner-only", fi, err)
			}
			atDump := numbers(t, saved)
			// Two more numbers written after the dump: the file outgrew it.
			for n := crstest.Count(t, lines); n <= atDump+1; n = crstest.Count(t, lines) {
			}
			cmd.Process.Kill()
			cmd.Wait()
			switch after {
			case "truncated":
				if err := os.Truncate(file, 1); err != nil {
					t.Fatal(err)
				}
			case "removed":
				if err := os.Remove(file); err != nil {
					t.Fatal(err)
				}
			}
			out := crstest.Pipe(t)
			p, err := m.(crs.Restorer).Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: res.Meta, Stdout: out[1]})
			if err != nil {
				t.Fatalf("restore with the file %s since the dump: %v", after, err)
			}
			out[1].Close()
			restored := bufio.NewReader(out[0])
			first := crstest.Count(t, restored)
			// The dump may have come between its writing a number to the
			// file and echoing it.
			if first != atDump+1 && first != atDump {
				t.Errorf("the restored writer echoed %d first, want %d or %d (the file held %d at the dump)", first, atDump, atDump+1, atDump)
			}
			for n := first; n < first+3; n = crstest.Count(t, restored) {
			}
			syscall.Kill(p.PID(), syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			p.Wait(ctx)
			if n := numbers(t, file); n < first+3 {
				t.Errorf("the file ends at %d, the restored writer wrote %d", n, first+3)
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("the file put back: %v, %v; want mode 640", fi, err)
			}
		})
	}
}

// TestRefusesUnsavableFiles: a tree holding for writing a FIFO or a file
// of /proc is refused before CRIU runs, naming the file and the
// descriptor; a read-only file, /dev/null and a pipe are not.
func TestRefusesUnsavableFiles(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "input")
	if err := os.WriteFile(readOnly, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, script, want string
	}{
		{"fifo", fmt.Sprintf(`exec 3<>%s; echo ready; exec sleep 1000`, fifo), fifo + " open for writing as descriptor 3"},
		{"proc", `exec 3>/proc/self/comm; echo ready; exec sleep 1000`, "/comm open for writing as descriptor 3"},
		{"harmless", fmt.Sprintf(`exec 3<%s 4>/dev/null; echo ready; exec sleep 1000`, readOnly), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := crstest.Pipe(t)
			cmd := exec.Command("/bin/sh", "-c", tc.script)
			cmd.Stdout = out[1]
			crstest.StartIsolated(t, cmd)
			out[1].Close()
			if l := crstest.ReadLine(t, bufio.NewReader(out[0])); l != "ready" {
				t.Fatalf("the shell wrote %q", l)
			}
			_, _, files, err := inspect(cmd.Process.Pid)
			switch {
			case tc.want == "" && (err != nil || len(files) != 0):
				t.Errorf("inspect: files %v, %v; want nothing to save and no refusal", files, err)
			case tc.want != "" && (!errors.Is(err, crs.ErrNotCheckpointable) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cannot save")):
				t.Errorf("inspect: %v; want crs.ErrNotCheckpointable naming %q", err, tc.want)
			}
		})
	}
}

// TestPutBackRefusal: a saved file whose folder is gone cannot be put
// back, and the restore says which file, before CRIU runs.
func TestPutBackRefusal(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{inventory, savedPrefix + "0"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gone := filepath.Join(t.TempDir(), "gone", "out.txt")
	meta := map[string]string{metaFilePrefix + "0": gone, metaModePrefix + "0": "600"}
	m := NewModule("/nonexistent/criu", "4.2.1")
	_, err := m.Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: meta})
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "put back "+gone) {
		t.Errorf("restore with a saved file whose folder is gone: %v; want a refusal naming it", err)
	}
	meta[metaModePrefix+"0"] = "rw"
	if err := putBack(dir, meta); err == nil || !strings.Contains(err.Error(), `mode "rw"`) {
		t.Errorf("put back with a garbled mode: %v", err)
	}
}

// TestProgramChanged: a tree dumped while running its own copy of the
// shell is refused at the restore, naming the program and its sizes, once
// that copy changed size (a rebuilt program, an upgraded gompid) or is
// gone; CRIU is not asked. Meta records each program once.
func TestProgramChanged(t *testing.T) {
	m := newModule(t)
	for _, change := range []string{"grown", "removed"} {
		t.Run(change, func(t *testing.T) {
			sh := filepath.Join(t.TempDir(), "sh")
			b, err := os.ReadFile("/bin/sh")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sh, b, 0o755); err != nil {
				t.Fatal(err)
			}
			out := crstest.Pipe(t)
			cmd := exec.Command(sh, "-c", `while :; do echo x; read -t 1 line; done`)
			cmd.Stdout = out[1]
			crstest.StartIsolated(t, cmd)
			out[1].Close()
			if _, err := bufio.NewReader(out[0]).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: cmd.Process.Pid, Dir: dir, Options: crs.Options{Term: true}})
			if err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if want := fmt.Sprintf("%d %s", len(b), sh); res.Meta[metaExePrefix+"0"] != want {
				t.Fatalf("meta %v: want %s0 = %q", res.Meta, metaExePrefix, want)
			}
			switch change {
			case "grown":
				err = os.WriteFile(sh, append(b, 0), 0o755)
			case "removed":
				err = os.Remove(sh)
			}
			if err != nil {
				t.Fatal(err)
			}
			out = crstest.Pipe(t)
			_, err = m.(crs.Restorer).Restore(t.Context(), crs.RestoreRequest{Dir: dir, Meta: res.Meta, Stdout: out[1]})
			if err == nil || !strings.Contains(err.Error(), "the program "+sh) || strings.Contains(err.Error(), "CRIU's restore failed") {
				t.Fatalf("restore after the program was %s: %v; want a refusal naming %s before CRIU runs", change, err, sh)
			}
		})
	}
}

// A metadata entry that is not a size and a path is a broken snapshot.
func TestCheckExesMeta(t *testing.T) {
	for _, v := range []string{"", "12", "x /bin/sh", "12 bin/sh"} {
		if err := checkExes(map[string]string{metaExePrefix + "0": v}); !errors.Is(err, crs.ErrNoSnapshot) {
			t.Errorf("%q: %v, want ErrNoSnapshot", v, err)
		}
	}
	if err := checkExes(map[string]string{metaExePrefix + "0": "0 /dev/null"}); err != nil {
		t.Errorf("an unchanged program: %v", err)
	}
}
