package proc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// In helper mode the test binary is a parent that starts a child with
// Start from a goroutine that then ends (the case Pdeathsig gets wrong
// without the locked launcher thread), prints the child's pid, and waits
// to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("PROC_TEST_HELPER") == "parent" {
		done := make(chan int)
		go func() {
			cmd := exec.Command("sleep", "600")
			if err := Start(cmd, syscall.SIGKILL); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			done <- cmd.Process.Pid
		}()
		pid := <-done
		// Churn threads so that an unlocked forking thread would be reused or ended.
		for range 50 {
			go func() { time.Sleep(time.Millisecond) }()
		}
		fmt.Println(pid)
		select {}
	}
	os.Exit(m.Run())
}

// waitGone blocks until pid has exited (a zombie counts), at most bound.
// It waits on a pidfd: an event, not a poll.
func waitGone(t *testing.T, pid int, bound time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(bound)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("process %d still alive after %v", pid, bound)
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pidfd: %v", err)
		}
		if n > 0 {
			return
		}
	}
}

func TestChildDiesWithParent(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(self, "-test.run=^$")
	parent.Env = append(os.Environ(), "PROC_TEST_HELPER=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	if !Alive(child) {
		t.Fatalf("child %d not running", child)
	}
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != child {
		t.Errorf("child's process group %d (%v), want its own (%d)", pgid, err, child)
	}
	parent.Process.Kill()
	parent.Wait()
	waitGone(t, child, time.Minute)
}

func TestWaitExitedThenSignalGroup(t *testing.T) {
	// sh starts a grandchild in its group and exits; the group is still
	// signallable after WaitExited and before the reap.
	cmd := exec.Command("sh", "-c", "sleep 600 & echo $!")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	grandchild, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("sh said %q", line)
	}
	if err := WaitExited(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := SignalGroup(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, grandchild, time.Minute)
	if err := SignalGroup(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Errorf("signalling a vanished group: %v, want nil", err)
	}
	if err := SignalGroup(0, syscall.SIGKILL); err == nil {
		t.Error("SignalGroup(0) succeeded")
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		script   string
		code     int
		sig      syscall.Signal
		shellish int
	}{
		{"exit 0", 0, 0, 0},
		{"exit 7", 7, 0, 7},
		{"kill -KILL $$", 0, syscall.SIGKILL, 137},
		{"kill -TERM $$", 0, syscall.SIGTERM, 143},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "-c", tt.script)
		if err := Start(cmd, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		code, sig := Status(cmd.ProcessState)
		if code != tt.code || sig != tt.sig || ShellStatus(code, sig) != tt.shellish {
			t.Errorf("%q: status %d, signal %v, shell %d; want %d, %v, %d", tt.script, code, sig, ShellStatus(code, sig), tt.code, tt.sig, tt.shellish)
		}
	}
	if c, s := Status(nil); c != -1 || s != 0 {
		t.Errorf("Status(nil) = %d, %v", c, s)
	}
}
