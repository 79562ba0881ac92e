package filemtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSSHD(t *testing.T) {
	s := StartSSHD(t)
	ssh := func(key string, cmd string) (string, error) {
		args := append(strings.Fields(strings.Replace(s.SSHArgs(), s.UserKey, key, 1)), "root@127.0.0.1", cmd)
		out, err := exec.Command("ssh", args...).CombinedOutput()
		return string(out), err
	}
	out, err := ssh(s.UserKey, "echo ok")
	if err != nil || out != "ok\n" {
		t.Fatalf("ssh with the user key: %v: %s", err, out)
	}
	if out, err := ssh(s.StrangerKey(), "echo ok"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh with a stranger's key: %v: %s", err, out)
	}
	// A session in progress is found and killed; the server keeps serving.
	started := make(chan error, 1)
	cmd := exec.Command("ssh", append(strings.Fields(s.SSHArgs()), "root@127.0.0.1", "echo up; exec sleep 600")...)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		b := make([]byte, 3)
		_, err := stdout.Read(b)
		started <- err
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if n := s.KillSessions(); n == 0 {
		t.Fatal("no session to kill")
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the killed session's ssh exited 0")
	}
	if out, err := ssh(s.UserKey, "echo again"); err != nil || out != "again\n" {
		t.Errorf("after killing sessions: %v: %s", err, out)
	}
	s.Stop()
	if _, err := ssh(s.UserKey, "true"); err == nil {
		t.Error("ssh works after Stop")
	}
	s.Restart(t)
	if out, err := ssh(s.UserKey, "echo back"); err != nil || out != "back\n" {
		t.Errorf("after Restart: %v: %s", err, out)
	}
}

func TestTmpfsFills(t *testing.T) {
	dir := Tmpfs(t, 64<<10)
	err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 1<<20), 0o600)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing 1 MiB into a 64 KiB tmpfs: %v, want ENOSPC", err)
	}
}

func TestWaitWrite(t *testing.T) {
	dir := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.Create(filepath.Join(dir, "a.part"))
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for range 8 {
			f.Write(make([]byte, 1<<10))
		}
	}()
	p, err := WaitWrite(t.Context(), dir, ".part", 4<<10)
	if err != nil || filepath.Base(p) != "a.part" {
		t.Errorf("WaitWrite = %q, %v", p, err)
	}
	<-done
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := WaitWrite(ctx, dir, "never", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitWrite with a cancelled context: %v", err)
	}
}
