package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The committed generated files are what capi/gen makes of the committed
// function list and C files: run `go run ./capi/gen` after changing them.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	src, dir := "..", t.TempDir()
	copyFile := func(rel string) {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfiles, err := filepath.Glob(filepath.Join(src, "*.c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cfiles {
		copyFile(filepath.Base(f))
	}
	copyFile("gen/functions.txt")
	copyFile("include/mpi.h")
	if err := os.MkdirAll(filepath.Join(dir, "api"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"include/mpi.h", "stubs_gen.c", "aliases_gen.h", "api/list_gen.go"} {
		want, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("capi/%s is not what capi/gen makes of the sources: run go run ./capi/gen", rel)
		}
	}
	if fns, err := parse("Send(const void *buf, int count)\ndouble Wtime()\n"); err != nil || len(fns) != 2 ||
		fns[0].Ret != "int" || fns[1].Ret != "double" || fns[1].Params != "void" {
		t.Errorf("parse: %+v %v", fns, err)
	}
}
