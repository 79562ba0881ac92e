package plm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gompi/mca"
)

func TestDaemonArgs(t *testing.T) {
	spec := Spec{Job: "j1", Contact: []string{"tcp:a:1", "tcp:b:1"}}
	if got := DaemonArgs(spec, "n1"); !slices.Equal(got, []string{"--job", "j1", "--node", "n1", "--hnp", "tcp:a:1,tcp:b:1"}) {
		t.Errorf("DaemonArgs = %q", got)
	}
	spec.SessionDir, spec.Verbose = "/s", 5
	if got := strings.Join(DaemonArgs(spec, "n1"), " "); !strings.HasSuffix(got, "--session-dir /s --verbose 5") {
		t.Errorf("DaemonArgs = %q", got)
	}
}

func TestNewFrameworkParams(t *testing.T) {
	p := mca.NewParams()
	NewFramework(p)
	for name, owner := range map[string]string{
		ParamSessionDir: "plm", ParamLaunchTimeout: "plm", ParamKillGrace: "plm", ParamHNPAddress: "plm",
		ParamHBPeriod: "errmgr", ParamHBTimeout: "errmgr", "plm": "plm", "plm_base_verbose": "plm",
	} {
		q, ok := p.Lookup(name)
		if !ok || q.Owner != owner {
			t.Errorf("parameter %s: registered %v by %q, want by %q", name, ok, q.Owner, owner)
		}
	}
}

// StartProcess hands the handshake on stdin and reports how the process ended.
func TestStartProcess(t *testing.T) {
	tests := []struct {
		name   string
		script string
		err    string // "" = success
	}{
		{"reads handshake", `read l; [ "$l" = "secret-line" ] || exit 9; echo ok >&2; exec cat >/dev/null`, ""},
		{"fails", `read l; echo "ssh: connect to host n1: refused" >&2; exit 255`,
			"sh (pid %d) for node n1 exited with status 255; it said: ssh: connect to host n1: refused"},
		{"killed", `kill -KILL $$`, "sh (pid %d) for node n1 was killed by signal 9 (killed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &signalWriter{ok: make(chan struct{})}
			p, err := StartProcess("n1", "sh", exec.Command("sh", "-c", tt.script), []byte("secret-line"), w)
			if err != nil {
				t.Fatal(err)
			}
			if tt.err == "" {
				// It read the right line, then waits on its stdin, which
				// stays open: it ends when killed.
				select {
				case <-w.ok:
				case <-p.Done():
					t.Fatalf("ended early: %v", p.Wait())
				}
				if err := p.Kill(); err != nil {
					t.Fatal(err)
				}
				err := p.Wait()
				var ee *ExitError
				if !errors.As(err, &ee) || ee.Signal.String() != "terminated" {
					t.Fatalf("after Kill: %v, want killed by SIGTERM", err)
				}
				return
			}
			err = p.Wait()
			want := strings.Replace(tt.err, "%d", itoa(p.PID()), 1)
			if err == nil || err.Error() != want || !errors.Is(err, ErrLaunch) {
				t.Errorf("Wait() = %v, want %q matching ErrLaunch", err, want)
			}
			if p.Kill() != nil {
				t.Error("Kill after the end failed")
			}
		})
	}
}

// signalWriter closes ok when "ok" is written.
type signalWriter struct {
	ok   chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "ok") {
		w.once.Do(func() { close(w.ok) })
	}
	return len(p), nil
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	tb.Write([]byte("abc"))
	tb.Write([]byte("defg"))
	if got := tb.String(); got != "cdefg" {
		t.Errorf("tail %q, want cdefg", got)
	}
}

func TestFindDaemon(t *testing.T) {
	dir := t.TempDir()
	d := filepath.Join(dir, "gompid")
	os.WriteFile(d, []byte("#!/bin/sh\n"), 0o755)
	if got, err := FindDaemon(d); err != nil || got != d {
		t.Errorf("FindDaemon(%q) = %q, %v", d, got, err)
	}
	if _, err := FindDaemon(filepath.Join(dir, "nope")); err == nil {
		t.Error("FindDaemon of a missing path succeeded")
	}
	t.Setenv("PATH", dir)
	if got, err := FindDaemon(""); err != nil || got != d {
		t.Errorf("FindDaemon on $PATH = %q, %v", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := FindDaemon(""); err == nil || !strings.Contains(err.Error(), "plm_local_daemon_path") {
		t.Errorf("FindDaemon without gompid: %v, want advice", err)
	}
}
