package restart

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gompi/cli"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var t0 = time.Date(2026, 11, 21, 3, 0, 0, 123_000_000, time.UTC)

// isolate keeps the developer's parameters out of a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, mca.EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "") // the snapshot index in HOME
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
}

// reference writes a reference of a 2-rank job with sequences 0 and 2
// committed, 1 not, and returns it.
func reference(t *testing.T) snapshot.Ref {
	t.Helper()
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("1a2b3c4d")}
	g := &snapshot.GlobalMeta{
		Job: "1a2b3c4d", Ranks: 2, AMCA: []string{"ft-enable-cr"},
		Params: []mca.Setting{
			{Name: "ft_cr_enabled", Value: "1", Origin: mca.Origin{Source: mca.SourceAMCA, Where: "ft-enable-cr (built-in):5"}},
			{Name: "btl", Value: "tcp", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}},
			{Name: "plm_base_kill_grace", Value: "3s", Origin: mca.Origin{Source: mca.SourceEnv, Where: "GOMPI_MCA_plm_base_kill_grace"}},
			{Name: "mca_base_param_file_prefix", Value: "ft-enable-cr", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}},
			{Name: "crs_gone_param", Value: "x", Origin: mca.Origin{Source: mca.SourceUserFile, Where: "/h/.gompi/mca-params.conf:2"}},
		},
		Launch: crs.Launch{Argv: []string{"/opt/app/heat", "-size", "64", "two words"}, Dir: "/work", Env: []string{"OMP_NUM_THREADS=1"}},
	}
	for _, s := range []struct {
		seq       int
		committed bool
	}{{0, true}, {1, false}, {2, true}} {
		rec := snapshot.SeqRecord{Seq: s.seq, Started: t0.Add(time.Duration(s.seq) * time.Minute)}
		if s.committed {
			rec.Committed, rec.Finished = true, rec.Started.Add(1500*time.Millisecond)
			for rank := 0; rank < 2; rank++ {
				rec.Procs = append(rec.Procs, snapshot.ProcRecord{Rank: rank, Node: []string{"n1", "n2"}[rank], CRS: "self"})
				dir := ref.LocalPath(s.seq, rank)
				if err := os.MkdirAll(dir, 0o700); err != nil { // owner-only, as gompi writes them
					t.Fatal(err)
				}
				w, err := snapshot.CreateFile(dir, "app.state")
				if err != nil {
					t.Fatal(err)
				}
				w.Write(bytes.Repeat([]byte{byte('a' + rank)}, 100*(s.seq+1)+rank))
				app, err := w.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: rank, PID: 7, Node: "n1", CRS: "self", Created: t0, Files: []snapshot.FileRecord{app}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		g.Seqs = append(g.Seqs, rec)
	}
	if err := snapshot.WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	return ref
}

// run runs gompi-restart with args and returns its status and output, the
// reference's folder written as $DIR.
func run(t *testing.T, ref snapshot.Ref, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	code := cli.Execute(context.Background(), cmd, args, false)
	clean := func(s string) string { return strings.ReplaceAll(s, ref.Dir, "$DIR") }
	return code, clean(out.String()), clean(errb.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./tools/restart -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test ./tools/restart -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// fakeGompirun puts a gompirun on $PATH, for --showme.
func fakeGompirun(t *testing.T, ref snapshot.Ref) {
	t.Helper()
	dir := filepath.Join(ref.Dir, "bin")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "gompirun"), []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
}

func TestGolden(t *testing.T) {
	isolate(t)
	ref := reference(t)
	fakeGompirun(t, ref)
	os.WriteFile(filepath.Join(ref.Dir, "my-set"), []byte("btl = tcp\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"info", []string{"-i", ref.Path()}, 0},
		{"info-verbose-seq", []string{"-i", "-v", "-s", "2", ref.Path()}, 0},
		{"showme", []string{"--showme", "--hostfile", "/h/hosts", "--mca", "btl", "uds", "--mpirun_opts", "--tag-output --map-by node", ref.Path()}, 0},
		{"showme-seq", []string{"--showme", "-s", "0", "-am", filepath.Join(ref.Dir, "my-set"), ref.Path()}, 0},
		{"uncommitted", []string{"-s", "1", ref.Path()}, 1},
		{"missing-seq", []string{"-i", "-s", "7", ref.Path()}, 1},
		{"help", []string{"--help"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := run(t, ref, tt.args...)
			if code != tt.code {
				t.Errorf("status %d, want %d; stderr:\n%s", code, tt.code, errs)
			}
			golden(t, tt.name, out+errs+"[exit "+string(rune('0'+code))+"]\n")
		})
	}
}

func TestInfoJSON(t *testing.T) {
	isolate(t)
	ref := reference(t)
	code, out, errs := run(t, ref, "-i", "--json", ref.Path())
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	var in Info
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	if in.Job != "1a2b3c4d" || in.Ranks != 2 || in.Restart != 2 || len(in.Seqs) != 3 || in.Seqs[1].Committed || in.Seqs[1].Finished != nil ||
		len(in.Seqs[2].Procs) != 2 || in.Seqs[2].Procs[1].Files[0].Size != 301 || in.Launch.Program != "/opt/app/heat" {
		t.Errorf("info %+v", in)
	}
}

// A bare name is looked up in the current folder, then in
// snapc_base_global_snapshot_dir.
func TestBareName(t *testing.T) {
	isolate(t)
	ref := reference(t)
	code, out, errs := run(t, ref, "-i", "--mca", "snapc_base_global_snapshot_dir", ref.Dir, ref.Name)
	if code != 0 || !strings.Contains(out, "Job          : 1a2b3c4d") {
		t.Errorf("status %d\n%s%s", code, out, errs)
	}
	t.Setenv("HOME", ref.Dir) // the default folder
	if code, out, errs = run(t, ref, "-i", ref.Name); code != 0 {
		t.Errorf("in $HOME: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs = run(t, ref, "-i", "gompi_global_snapshot_none.ckpt"); code != 1 || !strings.Contains(errs, "no snapshot reference $DIR/gompi_global_snapshot_none.ckpt") {
		t.Errorf("missing reference: status %d: %s", code, errs)
	}
	// Inside the folder that holds it, it is found there first, whatever
	// the global folder is; a name in neither is refused naming both.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(ref.Dir)
	if code, out, errs = run(t, ref, "-i", ref.Name); code != 0 || !strings.Contains(out, "Location     : $DIR\n") {
		t.Errorf("in the current folder: status %d\n%s%s", code, out, errs)
	}
	code, _, errs = run(t, ref, "-i", "gompi_global_snapshot_none.ckpt")
	for _, want := range []string{"current folder ($DIR)", "snapc_base_global_snapshot_dir (" + home + ")"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("missing reference: status %d, error lacks %q: %s", code, want, errs)
		}
	}
}

// Damaged snapshots are refused, naming the file and the sequence to use.
func TestRefusesDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(ref snapshot.Ref)
		want   []string
	}{
		{"truncated", func(ref snapshot.Ref) {
			os.Truncate(filepath.Join(ref.LocalPath(2, 1), "app.state"), 10)
		}, []string{"$DIR/gompi_global_snapshot_1a2b3c4d.ckpt/2/gompi_snapshot_1.ckpt/app.state is 10 bytes, 301 were recorded", "restart with -s 0"}},
		{"flipped byte", func(ref snapshot.Ref) {
			p := filepath.Join(ref.LocalPath(2, 0), "app.state")
			b, _ := os.ReadFile(p)
			b[50] ^= 1
			os.WriteFile(p, b, 0o644)
		}, []string{"gompi_snapshot_0.ckpt/app.state has checksum", "restart with -s 0"}},
		{"deleted file", func(ref snapshot.Ref) {
			os.Remove(filepath.Join(ref.LocalPath(2, 0), "app.state"))
		}, []string{"gompi_snapshot_0.ckpt/app.state: no such file", "restart with -s 0"}},
		{"deleted metadata", func(ref snapshot.Ref) {
			os.Remove(filepath.Join(ref.LocalPath(2, 1), snapshot.LocalMetaFile))
		}, []string{"gompi_snapshot_1.ckpt/snapshot_meta: no such file", "restart with -s 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			ref := reference(t)
			fakeGompirun(t, ref)
			tt.damage(ref)
			code, out, errs := run(t, ref, "--showme", ref.Path())
			if code != 1 || out != "" {
				t.Errorf("status %d, output %q", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			// The previous sequence is intact and restarts.
			if code, out, errs := run(t, ref, "--showme", "-s", "0", ref.Path()); code != 0 || !strings.Contains(out, "--restart-seq 0") {
				t.Errorf("-s 0: status %d\n%s%s", code, out, errs)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	ref := snapshot.Ref{Dir: "/g", Name: "r.ckpt"}
	meta := &snapshot.GlobalMeta{Ranks: 3, AMCA: []string{"ft-enable-cr"},
		Params: []mca.Setting{
			{Name: "ft_cr_enabled", Value: "1", Origin: mca.Origin{Source: mca.SourceAMCA}},
			{Name: "btl", Value: "uds", Origin: mca.Origin{Source: mca.SourceCommandLine}},
			{Name: "plm", Value: "local", Origin: mca.Origin{Source: mca.SourceUserFile}},
			{Name: "nobody_knows_me", Value: "1", Origin: mca.Origin{Source: mca.SourceEnv}},
		},
		Launch: crs.Launch{Argv: []string{"/bin/p", "-np", "--"}, Dir: "/w", Env: []string{"A=1"}}}
	point := snapshot.RestartPoint{Ref: ref, Meta: meta, Seq: snapshot.SeqRecord{Seq: 4}}
	params := mca.NewParams()
	frameworks.New(params)
	tests := []struct {
		name string
		ov   Overrides
		want string
		warn int
	}{
		{"stored", Overrides{}, "-np 3 -am ft-enable-cr --mca btl uds --mca plm local --wdir /w -x A=1 --restart-ref /g/r.ckpt --restart-seq 4 -- /bin/p -np --", 1},
		{"overrides", Overrides{MCA: []string{"btl=tcp"}, AMCA: []string{"mine"}, Hostfile: "/h", Extra: []string{"--tag-output"}},
			"-np 3 --hostfile /h -am mine --mca plm local --mca btl tcp --tag-output --wdir /w -x A=1 --restart-ref /g/r.ckpt --restart-seq 4 -- /bin/p -np --", 1},
	}
	for _, tt := range tests {
		args, warns := Command(point, tt.ov, params)
		if got := strings.Join(args, " "); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
		if len(warns) != tt.warn || !strings.Contains(warns[0], "nobody_knows_me") {
			t.Errorf("%s: warnings %v", tt.name, warns)
		}
	}
	if got := quoteArgs([]string{"a b", "it's", "", "x=y"}); !reflect.DeepEqual(got, []string{"'a b'", `'it'\''s'`, "''", "x=y"}) {
		t.Errorf("quoteArgs = %q", got)
	}
}

// A migration's sequences are shown as such: a committed one with the
// ranks it moved (only those were saved), one that did not finish as not
// committed; neither is a restart point.
func TestInfoMigration(t *testing.T) {
	isolate(t)
	ref := reference(t)
	fakeGompirun(t, ref)
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	dir := ref.LocalPath(3, 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := snapshot.CreateFile(dir, "app.state")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("moved"))
	app, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 1, PID: 7, Node: "n2", CRS: "self", Created: t0, Files: []snapshot.FileRecord{app}}); err != nil {
		t.Fatal(err)
	}
	g.Seqs = append(g.Seqs,
		snapshot.SeqRecord{Seq: 3, Migrate: true, Started: t0.Add(3 * time.Minute), Finished: t0.Add(3*time.Minute + time.Second), Committed: true,
			Procs: []snapshot.ProcRecord{{Rank: 1, Node: "n2", CRS: "self"}}},
		snapshot.SeqRecord{Seq: 4, Migrate: true, Started: t0.Add(4 * time.Minute)})
	if err := snapshot.WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, ref, "-i", "-s", "3", ref.Path())
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	code, all, errs := run(t, ref, "-i", ref.Path())
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	golden(t, "info-migrate", out+"---\n"+all)
	if code, out, errs := run(t, ref, "--showme", ref.Path()); code != 0 || !strings.Contains(out, "--restart-seq 2") {
		t.Errorf("restart after migrations: status %d\n%s%s", code, out, errs)
	}
	if code, _, errs := run(t, ref, "--showme", "-s", "3", ref.Path()); code != 1 || !strings.Contains(errs, "was taken for a migration and is not a restart point") {
		t.Errorf("restart from a migration: status %d: %s", code, errs)
	}
}

// gompi-restart -i runs the checks gompi-restart runs on every restart
// point (sizes always, checksums with -v), marks each refused one with
// why, and names as the one to restart from the newest that passes: the
// one gompi-restart accepts (without -s when it is the newest committed).
func TestInfoVerifies(t *testing.T) {
	truncate := func(seq, rank int) func(snapshot.Ref) {
		return func(ref snapshot.Ref) { os.Truncate(filepath.Join(ref.LocalPath(seq, rank), "app.state"), 10) }
	}
	flip := func(ref snapshot.Ref) {
		p := filepath.Join(ref.LocalPath(2, 0), "app.state")
		b, _ := os.ReadFile(p)
		b[50] ^= 1
		os.WriteFile(p, b, 0o600)
	}
	tests := []struct {
		name    string
		damage  func(snapshot.Ref)
		verbose bool
		// inexact: the damage is one only -v finds (-i did not check what
		// gompi-restart checks).
		inexact bool
		restart int                // the sequence -i names (-1: none)
		refused map[int]string     // sequence → what its refusal says
		also    func(snapshot.Ref) // more damage
	}{
		{name: "intact", restart: 2},
		{name: "truncated", damage: truncate(2, 1), restart: 0,
			refused: map[int]string{2: "gompi_snapshot_1.ckpt/app.state is 10 bytes, 301 were recorded"}},
		{name: "checksum unchecked", damage: flip, inexact: true, restart: 2},
		{name: "checksum with -v", damage: flip, verbose: true, restart: 0,
			refused: map[int]string{2: "gompi_snapshot_0.ckpt/app.state has checksum"}},
		{name: "missing file", damage: func(ref snapshot.Ref) { os.Remove(filepath.Join(ref.LocalPath(2, 0), "app.state")) }, restart: 0,
			refused: map[int]string{2: "gompi_snapshot_0.ckpt/app.state: no such file"}},
		{name: "missing metadata", damage: func(ref snapshot.Ref) { os.Remove(filepath.Join(ref.LocalPath(2, 1), snapshot.LocalMetaFile)) }, restart: 0,
			refused: map[int]string{2: "rank 1: "}},
		{name: "all damaged", damage: truncate(2, 1), also: truncate(0, 0), restart: -1,
			refused: map[int]string{0: "gompi_snapshot_0.ckpt/app.state is 10 bytes, 100 were recorded", 2: "gompi_snapshot_1.ckpt/app.state is 10 bytes"}},
		{name: "older damaged", damage: truncate(0, 1), restart: 2,
			refused: map[int]string{0: "gompi_snapshot_1.ckpt/app.state is 10 bytes, 101 were recorded"}},
		{name: "others may write", damage: func(ref snapshot.Ref) { os.Chmod(ref.SeqDir(2), 0o777) }, restart: 0,
			refused: map[int]string{2: "is writable by its group and others"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			ref := reference(t)
			fakeGompirun(t, ref)
			for _, d := range []func(snapshot.Ref){tt.damage, tt.also} {
				if d != nil {
					d(ref)
				}
			}
			args := []string{"-i", ref.Path()}
			if tt.verbose {
				args = append([]string{"-v"}, args...)
			}
			in := infoJSON(t, ref, args...)
			if in.Restart != tt.restart || in.Newest != 2 {
				t.Errorf("restart %d, newest %d; want %d, 2", in.Restart, in.Newest, tt.restart)
			}
			for _, s := range in.Seqs {
				want, refused := tt.refused[s.Seq]
				if s.Seq == 1 { // never committed
					want, refused = "was never committed", true
				}
				if refused != (s.Status == StatusRefused) || !strings.Contains(s.Refused, want) || (!refused && s.Status != StatusOK) {
					t.Errorf("seq %d: status %q, refused %q; want refused %v saying %q", s.Seq, s.Status, s.Refused, refused, want)
				}
			}
			code, out, errs := run(t, ref, args...)
			if code != 0 {
				t.Fatalf("-i: status %d: %s", code, errs)
			}
			for seq, want := range tt.refused {
				if line := fmt.Sprintf("Seq: %d\tcommitted, refused: ", seq); !strings.Contains(out, line) || !strings.Contains(out, want) {
					t.Errorf("-i does not say %q ... %q:\n%s", line, want, out)
				}
			}
			summary := map[bool]string{true: "gompi-restart uses 2 unless", false: fmt.Sprintf("the newest it accepts is %d: gompi-restart -s %d", tt.restart, tt.restart)}[tt.restart == 2]
			if tt.restart < 0 {
				summary = "each refused: this reference cannot be restarted"
			}
			if !strings.Contains(out, summary) {
				t.Errorf("-i does not say %q:\n%s", summary, out)
			}
			if !tt.inexact {
				agrees(t, ref, tt.restart)
			}
		})
	}
}

// agrees checks that gompi-restart restarts from restart, the sequence -i
// named: without -s when it is the newest committed (2), else only with
// -s; and when -i named none, refuses the only other committed one (0).
func agrees(t *testing.T, ref snapshot.Ref, restart int) {
	t.Helper()
	if restart >= 0 {
		if code, out, errs := run(t, ref, "--showme", "-s", fmt.Sprint(restart), ref.Path()); code != 0 || !strings.Contains(out, fmt.Sprintf("--restart-seq %d", restart)) {
			t.Errorf("-s %d: status %d\n%s%s", restart, code, out, errs)
		}
	}
	code, out, errs := run(t, ref, "--showme", ref.Path())
	switch {
	case restart == 2 && (code != 0 || !strings.Contains(out, "--restart-seq 2")):
		t.Errorf("without -s: status %d\n%s%s", code, out, errs)
	case restart != 2 && code == 0:
		t.Errorf("without -s gompi-restart accepted the sequence -i refused:\n%s", out)
	}
	if restart < 0 {
		if code, out, _ := run(t, ref, "--showme", "-s", "0", ref.Path()); code == 0 {
			t.Errorf("-s 0 accepted the sequence -i refused:\n%s", out)
		}
	}
}

// infoJSON is gompi-restart args --json, read back.
func infoJSON(t *testing.T, ref snapshot.Ref, args ...string) Info {
	t.Helper()
	code, out, errs := run(t, ref, append([]string{"--json"}, args...)...)
	if code != 0 {
		t.Fatalf("status %d: %s", code, errs)
	}
	var in Info
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatal(err)
	}
	return in
}

// A stored parameter of an installed plugin's component reaches the
// restarted job: gompi-restart, which starts no plugins for a snapshot
// it fully knows, loads them when one of its parameters is not a
// built-in's (crs_criu_binary is gompi-plugin-criu's). One nobody knows
// is still left out with a warning.
func TestPluginParamRestarted(t *testing.T) {
	// The build keeps go's caches, which live in the HOME isolate replaces.
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	dir := filepath.Join(os.Getenv("HOME"), ".gompi", "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "gompi-plugin-kit"), "gompi/testdata/plugins/gompi-plugin-kit")
	if c := strings.Fields(string(caches)); len(c) == 2 {
		build.Env = append(os.Environ(), "GOCACHE="+c[0], "GOMODCACHE="+c[1])
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	ref := reference(t)
	fakeGompirun(t, ref)
	g, err := snapshot.ReadGlobal(ref)
	if err != nil {
		t.Fatal(err)
	}
	g.Params = append(g.Params, mca.Setting{Name: "crs_context_priority", Value: "7", Origin: mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}})
	if err := snapshot.WriteGlobal(ref, g); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, ref, "--showme", ref.Path())
	if code != 0 || !strings.Contains(out, "--mca crs_context_priority 7") || strings.Contains(errs, "crs_context_priority") ||
		!strings.Contains(errs, "crs_gone_param") {
		t.Fatalf("status %d\nstdout %s\nstderr %s", code, out, errs)
	}
}

// The CRS that saved a sequence restores it unless the user or the stored
// parameters name one; mixed or unrecorded CRSs pin nothing.
func TestRestartPinsTheSnapshotsCRS(t *testing.T) {
	meta := &snapshot.GlobalMeta{Ranks: 2, AMCA: []string{"ft-enable-cr"}, Launch: crs.Launch{Argv: []string{"/bin/p"}}}
	procs := func(names ...string) []snapshot.ProcRecord {
		var ps []snapshot.ProcRecord
		for i, n := range names {
			ps = append(ps, snapshot.ProcRecord{Rank: i, CRS: n})
		}
		return ps
	}
	for _, tt := range []struct {
		name   string
		procs  []snapshot.ProcRecord
		stored []mca.Setting
		ov     Overrides
		want   string // the crs settings of the command, in order
	}{
		{"criu", procs("criu", "criu"), nil, Overrides{}, "crs criu"},
		{"user names one", procs("criu", "criu"), nil, Overrides{MCA: []string{"crs=self"}}, "crs self"},
		{"stored explicit", procs("criu", "criu"), []mca.Setting{{Name: "crs", Value: "criu", Origin: mca.Origin{Source: mca.SourceCommandLine}}}, Overrides{}, "crs criu"},
		{"mixed", procs("criu", "self"), nil, Overrides{}, ""},
		{"none recorded", nil, nil, Overrides{}, ""},
	} {
		m := *meta
		m.Params = tt.stored
		args, _ := Command(snapshot.RestartPoint{Ref: snapshot.Ref{Dir: "/g", Name: "r.ckpt"}, Meta: &m, Seq: snapshot.SeqRecord{Procs: tt.procs}}, tt.ov, nil)
		var got []string
		for i := 0; i+2 < len(args); i++ {
			if args[i] == "--mca" && args[i+1] == "crs" {
				got = append(got, "crs "+args[i+2])
			}
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("%s: crs settings %q, want %q (%v)", tt.name, got, tt.want, args)
		}
	}
}
