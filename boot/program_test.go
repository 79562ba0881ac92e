package boot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gompi/mca"
)

// examples are heat (package cr) and plainheat (none), built once for the
// package's tests, plain and stripped.
var examples struct {
	once sync.Once
	dir  string
	err  error
}

// example returns the path of examples/name built plain or stripped.
func example(t *testing.T, name string, stripped bool) string {
	t.Helper()
	examples.once.Do(func() {
		examples.dir, examples.err = os.MkdirTemp("", "gompi-boot-examples")
		for _, flags := range [][]string{{"-o", examples.dir + "/"}, {"-ldflags=-s -w", "-o", examples.dir + "/stripped/"}} {
			if examples.err != nil {
				return
			}
			args := append(append([]string{"build"}, flags...), "gompi/examples/heat", "gompi/examples/plainheat")
			if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				examples.err = fmt.Errorf("go %v: %w\n%s", args, err, b)
			}
		}
	})
	if examples.err != nil {
		t.Fatal(examples.err)
	}
	if stripped {
		return filepath.Join(examples.dir, "stripped", name)
	}
	return filepath.Join(examples.dir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if examples.dir != "" {
		os.RemoveAll(examples.dir)
	}
	os.Exit(code)
}

// The program's function table says whether it links package cr, also
// when the binary is stripped; what is not a Go program has no C/R code
// of gompi's; what cannot be read is not known.
func TestProgramUsesCR(t *testing.T) {
	script := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec ./heat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, _ = filepath.EvalSymlinks(sh)
	for _, tt := range []struct {
		name        string
		path        string
		uses, known bool
	}{
		{"heat (Protect, SafePoint)", example(t, "heat", false), true, true},
		{"heat stripped", example(t, "heat", true), true, true},
		{"plainheat (no cr)", example(t, "plainheat", true), false, true},
		{"a C program", sh, false, true},
		{"a C program calling gompi_cr.h", cProgram(t), true, true},
		{"a script", script, false, true},
		{"missing", filepath.Join(t.TempDir(), "gone"), false, false},
	} {
		uses, err := programUsesCR(tt.path)
		if uses != tt.uses || (err == nil) != tt.known {
			t.Errorf("%s: uses %v (%v), want %v, known %v", tt.name, uses, err, tt.uses, tt.known)
		}
	}
}

// With the choice left to gompi and C/R on, a program without package cr
// where no CRS saves from outside (no plugins here, so no criu) keeps the
// rank's choice and gompirun says why once; a program with package cr, a
// selection naming one component, C/R off or a program that cannot be
// read keep it silently. (A program without package cr getting criu is
// rte/e2e's TestCRIUTerm: criu is a plugin and needs root.)
func TestOutsideForProgram(t *testing.T) {
	heat, plain := example(t, "heat", false), example(t, "plainheat", false)
	for _, tt := range []struct {
		name    string
		args    []string
		program string
		warn    bool
	}{
		{"no cr, no outside CRS", []string{"crs=", "ft_cr_enabled=1"}, plain, true},
		{"no cr, all but none", []string{"crs=^none", "ft_cr_enabled=1"}, plain, true},
		{"cr", []string{"crs=", "ft_cr_enabled=1"}, heat, false},
		{"no cr, named self", []string{"crs=self", "ft_cr_enabled=1"}, plain, false},
		{"C/R off", []string{"crs="}, plain, false},
		{"unknown program", []string{"crs=", "ft_cr_enabled=1"}, "", false},
		{"unreadable program", []string{"crs=", "ft_cr_enabled=1"}, filepath.Join(t.TempDir(), "gone"), false},
	} {
		p := loadWith(t, mca.RoleHNP, tt.args...)
		var logs strings.Builder
		p.LogHandler = NewLogHandler(&logs)
		best, err := p.Frameworks.CRS.SelectOne(t.Context(), p.Values, mca.RoleApp, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, ok := outsideForProgram(t.Context(), p, best, tt.program)
		if ok || got.Info.Name != best.Info.Name {
			t.Errorf("%s: chose %s (%v), want the rank's %s", tt.name, got.Info.Name, ok, best.Info.Name)
		}
		warned := strings.Contains(logs.String(), "level=WARN")
		if warned != tt.warn || (warned && (!strings.Contains(logs.String(), "does not import gompi/cr") || strings.Contains(logs.String(), "self:"))) {
			t.Errorf("%s: warned %v, want %v: %q", tt.name, warned, tt.warn, logs.String())
		}
		mca.Close(best.Module)
	}
}

// cProgram builds a C program that calls a function of gompi_cr.h, linked
// against a stand-in library defining it (the C build is capi's).
func cProgram(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	lib, prog := filepath.Join(dir, "lib.c"), filepath.Join(dir, "prog.c")
	if err := os.WriteFile(lib, []byte("int GOMPI_CR_Safe_point(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, []byte("int GOMPI_CR_Safe_point(void);\nint main(void) { return GOMPI_CR_Safe_point(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", filepath.Join(dir, "libstub.so"), lib},
		{"-o", filepath.Join(dir, "prog"), prog, "-L" + dir, "-lstub"},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "prog")
}
