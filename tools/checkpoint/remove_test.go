package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// isolate keeps the developer's parameters and index out of a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, mca.EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
}

// reference writes a reference of a 2-rank job, one sequence per letter
// of picture, oldest first (C committed, F failed: begun, half written,
// never committed), each rank's snapshot verifiable, as a job writes it.
func reference(t *testing.T, picture string) snapshot.Ref {
	t.Helper()
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("1a2b3c4d")}
	t0 := time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC)
	g := &snapshot.GlobalMeta{Job: "1a2b3c4d", Ranks: 2}
	for seq, c := range picture {
		rec := snapshot.SeqRecord{Seq: seq, Started: t0.Add(time.Duration(seq) * time.Minute)}
		for rank := 0; rank < 2; rank++ {
			dir := ref.LocalPath(seq, rank)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			w, err := snapshot.CreateFile(dir, "app.state")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(fmt.Sprintf("seq %d rank %d", seq, rank)))
			app, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: rank, PID: 7, Node: "n1", CRS: "self", Created: t0, Files: []snapshot.FileRecord{app}}); err != nil {
				t.Fatal(err)
			}
			rec.Procs = append(rec.Procs, snapshot.ProcRecord{Rank: rank, Node: "n1", CRS: "self"})
		}
		if c == 'C' {
			rec.Committed, rec.Finished = true, rec.Started.Add(time.Second)
		} else {
			rec.Procs = nil
		}
		g.Seqs = append(g.Seqs, rec)
	}
	if err := snapshot.WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	return ref
}

// seqsLeft are the sequences ref records and the sequence folders it holds.
func seqsLeft(t *testing.T, ref snapshot.Ref) (recorded, folders []int) {
	t.Helper()
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Seqs {
		recorded = append(recorded, s.Seq)
	}
	for seq := 0; seq < 10; seq++ {
		if _, err := os.Lstat(ref.SeqDir(seq)); err == nil {
			folders = append(folders, seq)
		}
	}
	return recorded, folders
}

func TestRemoveOnReference(t *testing.T) {
	isolate(t)
	tests := []struct {
		name    string
		picture string
		args    []string
		env     string // sstore_base_keep from the environment
		code    int
		out     string // in stdout, or stderr when code != 0
		left    []int
	}{
		{"prune keep 1", "CFCC", []string{"--prune", "--keep", "1"}, "", 0, "Removed from $REF: sequences 0, 1, 2", []int{3}},
		{"prune keep 2", "CFCC", []string{"--prune", "--keep", "2"}, "", 0, "sequences 0, 1", []int{2, 3}},
		{"prune takes sstore_base_keep", "CCCC", []string{"--prune"}, "3", 0, "sequences 0", []int{1, 2, 3}},
		{"--keep overrides sstore_base_keep", "CCCC", []string{"--prune", "--keep", "0"}, "1", 0, "Nothing to remove from $REF", []int{0, 1, 2, 3}},
		{"prune keeps all but failures by default", "FCFC", []string{"--prune"}, "", 0, "sequences 0, 2", []int{1, 3}},
		{"dry run removes nothing", "CFCC", []string{"--prune", "--keep", "1", "--dry-run"}, "", 0, "Would remove from $REF: sequences 0, 1, 2", []int{0, 1, 2, 3}},
		{"remove one", "CCC", []string{"--remove", "1"}, "", 0, "Removed from $REF: sequences 1", []int{0, 2}},
		{"remove a failed one", "CF", []string{"--remove", "1"}, "", 0, "sequences 1", []int{0}},
		{"never the only restart point", "FCF", []string{"--remove", "1"}, "", 1, "sequence 1 is the only restart point", []int{0, 1, 2}},
		{"prune keeps the only restart point", "C", []string{"--prune", "--keep", "1"}, "", 0, "Nothing to remove", []int{0}},
		{"missing sequence", "CC", []string{"--remove", "7"}, "", 1, "no sequence 7 in this reference; its sequences: 0, 1", []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(mca.EnvPrefix+"sstore_base_keep", tt.env)
			if tt.env == "" {
				os.Unsetenv(mca.EnvPrefix + "sstore_base_keep")
			}
			ref := reference(t, tt.picture)
			code, out, errs := run(append(tt.args, ref.Path())...)
			if code != 0 {
				out = errs
			}
			out = strings.ReplaceAll(out, ref.String(), "$REF")
			if code != tt.code || !strings.Contains(out, tt.out) {
				t.Errorf("%v: status %d, output:\n%s\nwant %d and %q", tt.args, code, out, tt.code, tt.out)
			}
			recorded, folders := seqsLeft(t, ref)
			if !slices.Equal(recorded, tt.left) || !slices.Equal(folders, tt.left) {
				t.Errorf("%v: left records %v, folders %v; want %v", tt.args, recorded, folders, tt.left)
			}
		})
	}
}

// What --prune --json prints, and the leftovers of a crash between the
// metadata's rewrite and the folders' removal going with the next prune.
func TestPruneJSONAndOrphans(t *testing.T) {
	isolate(t)
	ref := reference(t, "CCCC")
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	g.Seqs = g.Seqs[1:] // as if a crash came after the rewrite dropping 0
	if err := snapshot.WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("--prune", "--keep", "2", "--json", ref.Path())
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	var r Removed
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Ref != ref.Name || r.Dir != ref.Dir || !slices.Equal(r.Removed, []int{0, 1}) || r.DryRun {
		t.Errorf("--json: %+v", r)
	}
	if recorded, folders := seqsLeft(t, ref); !slices.Equal(recorded, []int{2, 3}) || !slices.Equal(folders, []int{2, 3}) {
		t.Errorf("left records %v, folders %v; want [2 3]", recorded, folders)
	}
}

// Hostile references: another user's, one others may write, a link in
// place of the reference's folder, a sequence folder that is a link out
// of the reference. Nothing outside the reference is ever touched.
func TestRemoveHostileReference(t *testing.T) {
	isolate(t)
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious")
	if err := os.WriteFile(precious, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		spoil  func(t *testing.T, ref snapshot.Ref) string // returns the argument
		want   string
		unsafe bool // refused, nothing removed
	}{
		{"writable by others", func(t *testing.T, ref snapshot.Ref) string {
			os.Chmod(ref.Path(), 0o777)
			return ref.Path()
		}, "is writable by its group and others", true},
		{"a link in place of the reference", func(t *testing.T, ref snapshot.Ref) string {
			link := filepath.Join(t.TempDir(), ref.Name)
			if err := os.Symlink(ref.Path(), link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is not a folder (a symbolic link?)", true},
		{"another user's", func(t *testing.T, ref snapshot.Ref) string {
			if os.Getuid() != 0 {
				t.Skip("only root can give a folder to another user")
			}
			if err := os.Chown(ref.Path(), 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return ref.Path()
		}, "is owned by user 4242", true},
		{"a sequence folder linked out", func(t *testing.T, ref snapshot.Ref) string {
			os.RemoveAll(ref.SeqDir(0))
			if err := os.Symlink(outside, ref.SeqDir(0)); err != nil {
				t.Fatal(err)
			}
			return ref.Path()
		}, "Removed from", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := reference(t, "CCC")
			arg := tt.spoil(t, ref)
			code, out, errs := run("--prune", "--keep", "1", arg)
			if tt.unsafe {
				if code != 1 || !strings.Contains(errs, "unsafe snapshot reference") || !strings.Contains(errs, tt.want) {
					t.Errorf("status %d, stderr:\n%s\nwant it refused: %q", code, errs, tt.want)
				}
				if recorded, _ := seqsLeft(t, ref); len(recorded) != 3 {
					t.Errorf("refused, yet records left: %v", recorded)
				}
			} else if code != 0 || !strings.Contains(out, tt.want) {
				t.Errorf("status %d: %s%s", code, out, errs)
			}
			if _, err := os.Stat(precious); err != nil {
				t.Fatalf("the file outside the reference: %v", err)
			}
		})
	}
}

// A PID that is no gompirun's: the removal says so and touches nothing.
func TestRemoveDeadPID(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run("--prune", fmt.Sprint(dead.Process.Pid))
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("no process with pid %d", dead.Process.Pid)) {
		t.Errorf("dead pid: status %d: %s", code, errs)
	}
}

// With differential checkpoints: a removed sequence whose blocks a kept
// one references loses its record, keeps its folder, and the output (text
// and --json, dry run too) says which and why.
func TestRemoveKeepsReferencedBlocks(t *testing.T) {
	isolate(t)
	for _, dry := range []bool{false, true} {
		ref := reference(t, "CCC")
		for rank := range 2 { // sequence 2's file references sequence 1's pack
			dir := ref.LocalPath(2, rank)
			l, err := snapshot.ReadLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			l.Files[0].Blocks, l.Files[0].From = "app.state.blocks", "1"
			if err := snapshot.WriteLocal(dir, l); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"--remove", "1"}
		if dry {
			args = append(args, "--dry-run")
		}
		code, out, errs := run(append(args, ref.Path())...)
		verb := map[bool]string{false: "Removed", true: "Would remove"}[dry]
		want := verb + " from " + ref.String() + ": sequences 1\nKept sequence 1's folder (sequences 2 store blocks in it)\n"
		if code != 0 || out != want {
			t.Errorf("%v: status %d\n%s%s\nwant %q", args, code, out, errs, want)
		}
		recorded, folders := seqsLeft(t, ref)
		if wantRec := map[bool][]int{false: {0, 2}, true: {0, 1, 2}}[dry]; !slices.Equal(recorded, wantRec) || !slices.Equal(folders, []int{0, 1, 2}) {
			t.Errorf("%v: left records %v, folders %v", args, recorded, folders)
		}
		code, out, _ = run(append(args, "--json", ref.Path())...)
		var r Removed
		if err := json.Unmarshal([]byte(out), &r); dry && (code != 0 || err != nil || len(r.Kept) != 1 || r.Kept[0].Seq != 1 || !slices.Equal(r.Kept[0].By, []int{2})) {
			t.Errorf("--json: status %d, %+v, %v", code, r, err)
		}
	}
}
