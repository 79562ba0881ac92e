// Package cbuild gives capi's tests the C build they run against:
// $GOMPI_C_PREFIX when set (CI builds once with scripts/build-c.sh and
// exports it), else scripts/build-c.sh into a temporary prefix, once per
// test binary (Main removes it).
package cbuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var (
	once   sync.Once
	prefix string
	err    error
	tmp    string
)

// Main runs the tests and removes a temporary prefix: call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes the temporary prefix Build made, if any: for a TestMain
// that does more than Main.
func Cleanup() {
	if tmp != "" {
		os.RemoveAll(tmp)
	}
}

// Prefix returns the C build's prefix, building it on first use.
func Prefix(t testing.TB) string {
	t.Helper()
	p, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build returns the C build's prefix, building it on first use; the
// error of a build that failed is returned to every caller.
func Build() (string, error) {
	once.Do(func() {
		if prefix = os.Getenv("GOMPI_C_PREFIX"); prefix != "" {
			return
		}
		if tmp, err = os.MkdirTemp("", "gompi-capi-"); err != nil {
			return
		}
		prefix = filepath.Join(tmp, "prefix")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(Root(), "scripts", "build-c.sh"), prefix)
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("scripts/build-c.sh: %w\n%s", e, out)
		}
	})
	return prefix, err
}

// Root returns the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
