package restart

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/cli"
	"gompi/frameworks/sstore/snapshot"
)

// signalled is stdout for the waiting gompirun: it closes started when the
// child says it runs.
type signalled struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{}
	once    sync.Once
}

func (s *signalled) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), "started\n") {
		s.once.Do(func() { close(s.started) })
	}
	return len(p), nil
}

func (s *signalled) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// In the launch phase, gompi-restart --fork waits for gompirun; the signal
// that cancels its context (cli.Main) is passed on as SIGTERM and
// gompi-restart ends with gompirun's status.
func TestForkPassesTheSignalOn(t *testing.T) {
	isolate(t)
	ref := reference(t)
	dir := filepath.Join(ref.Dir, "bin")
	os.MkdirAll(dir, 0o755)
	script := "#!/bin/sh\ntrap 'echo terminated; exit 143' TERM\necho started\nwhile :; do sleep 1; done\n"
	if err := os.WriteFile(filepath.Join(dir, "gompirun"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/bin:/usr/bin")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &signalled{started: make(chan struct{})}
	var errb bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(out)
	cmd.SetErr(&errb)
	done := make(chan int, 1)
	go func() { done <- cli.Execute(ctx, cmd, []string{"--fork", ref.Path()}, false) }()
	select {
	case <-out.started:
	case code := <-done:
		t.Fatalf("ended (%d) before gompirun started: %s%s", code, out, errb.String())
	case <-time.After(time.Minute):
		t.Fatalf("gompirun never started: %s%s", out, errb.String())
	}
	cancel() // what SIGTERM does to cli.Main's context
	select {
	case code := <-done:
		if code != 143 || !strings.Contains(out.String(), "terminated") {
			t.Errorf("status %d, want 143 from a gompirun ended by SIGTERM; output:\n%s%s", code, out, errb.String())
		}
	case <-time.After(launchGrace + time.Minute):
		t.Fatal("gompi-restart --fork did not end after its context was cancelled")
	}
}

// Cancelled before the launch phase (while parsing or verifying), it
// starts no gompirun.
func TestCancelledStartsNothing(t *testing.T) {
	isolate(t)
	ref := reference(t)
	dir := filepath.Join(ref.Dir, "bin")
	os.MkdirAll(dir, 0o755)
	mark := filepath.Join(ref.Dir, "ran")
	if err := os.WriteFile(filepath.Join(dir, "gompirun"), []byte("#!/bin/sh\n: > "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/bin:/usr/bin")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	cmd := NewCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	if code := cli.Execute(ctx, cmd, []string{"--fork", ref.Path()}, false); code == 0 || !strings.Contains(errb.String(), "context canceled") {
		t.Errorf("status %d: %s", code, errb.String())
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("gompirun ran after the context was cancelled")
	}
}

// gompi-restart refuses a reference someone else could have written,
// naming the path and the fix, unless --allow-unsafe-ref; one others may
// only read is restarted with a warning.
func TestUnsafeReference(t *testing.T) {
	tests := []struct {
		name   string
		change func(ref snapshot.Ref)
		args   []string
		code   int
		errs   []string
	}{
		{"owner-only", func(snapshot.Ref) {}, nil, 0, nil},
		{"group-writable folder", func(ref snapshot.Ref) { os.Chmod(ref.Path(), 0o770) }, nil, 1,
			[]string{"$DIR/gompi_global_snapshot_1a2b3c4d.ckpt is writable by its group (mode 0770)", "chmod go-w $DIR/gompi_global_snapshot_1a2b3c4d.ckpt", "--allow-unsafe-ref restarts it anyway"}},
		{"world-writable metadata", func(ref snapshot.Ref) { os.Chmod(ref.MetaPath(), 0o666) }, nil, 1,
			[]string{"global_snapshot_meta is writable by its group and others", "chmod go-w $DIR/gompi_global_snapshot_1a2b3c4d.ckpt/global_snapshot_meta"}},
		{"writable rank folder", func(ref snapshot.Ref) { os.Chmod(ref.LocalPath(2, 1), 0o777) }, nil, 1,
			[]string{"2/gompi_snapshot_1.ckpt is writable"}},
		{"overridden", func(ref snapshot.Ref) { os.Chmod(ref.Path(), 0o777) }, []string{"--allow-unsafe-ref"}, 0,
			[]string{"warning: restarting anyway (--allow-unsafe-ref)", "is writable by its group and others"}},
		{"group-readable", func(ref snapshot.Ref) { os.Chmod(ref.Path(), 0o750); os.Chmod(ref.MetaPath(), 0o640) }, nil, 0,
			[]string{"warning: $DIR/gompi_global_snapshot_1a2b3c4d.ckpt is readable by its group (mode 0750)", "chmod -R go-rwx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolate(t)
			ref := reference(t)
			fakeGompirun(t, ref)
			tt.change(ref)
			code, out, errs := run(t, ref, append(append([]string{"--showme"}, tt.args...), ref.Path())...)
			if code != tt.code || (code == 0) != strings.Contains(out, "--restart-ref") {
				t.Errorf("status %d, want %d\n%s%s", code, tt.code, out, errs)
			}
			for _, want := range tt.errs {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
		})
	}
}
