package crscriu

import (
	"bufio"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A process's shared libraries are recorded once each, apart from its
// program, and a restore is refused, naming the library, once one changed
// size or is gone (a rebuilt libmpi_abi.so.1 under a C rank); unchanged,
// it passes. No CRIU is needed: the records and the check are gompi's.
func TestLibsRecordedAndChecked(t *testing.T) {
	// cat echoing a line has its libraries mapped: recorded right after
	// exec, a process may not have them yet (the dynamic loader is still
	// at work).
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal("no cat to map libraries:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := io.WriteString(in, "mapped?\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	pids := []int{cmd.Process.Pid}
	if err := recordExes(pids, meta); err != nil {
		t.Fatal(err)
	}
	if err := recordLibs(pids, meta); err != nil {
		t.Fatal(err)
	}
	_, exe, _ := strings.Cut(meta[metaExePrefix+"0"], " ")
	var libc, key string
	for k, v := range meta {
		if !strings.HasPrefix(k, metaLibPrefix) {
			continue
		}
		_, path, _ := strings.Cut(v, " ")
		if path == exe {
			t.Errorf("the program %s is recorded as a library too: %v", path, meta)
		}
		if strings.Contains(path, "/libc.so") || strings.Contains(path, "/libc-") {
			libc, key = path, k
		}
	}
	if libc == "" {
		t.Fatalf("cat maps no C library (is it static?): %v", meta)
	}
	if err := checkExes(meta); err != nil {
		t.Fatalf("unchanged libraries refused: %v", err)
	}
	size, _, _ := strings.Cut(meta[key], " ")
	n, _ := strconv.ParseInt(size, 10, 64)
	for _, tc := range []struct {
		name, value, want string
	}{
		{"changed size", strconv.FormatInt(n+1, 10) + " " + libc, "the library " + libc + " changed since the checkpoint"},
		{"gone", size + " " + libc + ".gone", "the library " + libc + ".gone, which the checkpointed process mapped, is not there any more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{key: tc.value}
			if err := checkExes(m); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkExes(%v) = %v, want an error saying %q", m, err, tc.want)
			}
		})
	}
}
