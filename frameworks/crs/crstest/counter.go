package crstest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/crs"
)

// Counter is a process tree as gompid runs a rank for a transparent CRS:
// a shell, init of its own PID namespace and its session's leader
// (StartIsolated), that writes "alive" once to its descriptor 3 (a
// lifeline pipe) and then 1, 2, 3, ... to its standard output (a pipe),
// one number every 20 ms.
type Counter struct {
	Cmd   *exec.Cmd
	Lines *bufio.Reader // the read end of its standard output
}

const counterScript = `echo alive >&3; i=0; while :; do i=$((i+1)); echo $i; sleep 0.02; done`

// StartCounter starts a Counter and waits for its "alive" and its first
// number (until then the shell may still hold descriptor 3 in place of its
// standard output for the echo); the test kills and reaps it on cleanup.
// It needs root.
func StartCounter(t *testing.T) *Counter {
	t.Helper()
	out, life := Pipe(t), Pipe(t)
	cmd := exec.Command("/bin/sh", "-c", counterScript)
	cmd.Stdout, cmd.ExtraFiles = out[1], []*os.File{life[1]}
	StartIsolated(t, cmd)
	out[1].Close()
	life[1].Close()
	if line := ReadLine(t, bufio.NewReader(life[0])); line != "alive" {
		t.Fatalf("the counter's descriptor 3 carried %q, want alive", line)
	}
	c := &Counter{Cmd: cmd, Lines: bufio.NewReader(out[0])}
	if n := Count(t, c.Lines); n != 1 {
		t.Fatalf("the counter started at %d, want 1", n)
	}
	return c
}

// Pipe returns a pipe's read and write ends, closed at the test's end.
func Pipe(t *testing.T) [2]*os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return [2]*os.File{r, w}
}

// ReadLine reads one line, without its newline, within a minute.
func ReadLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { // ends with the read: the pipe closes at the test's end at the latest
		line, err := r.ReadString('\n')
		if err != nil {
			line = "error: " + err.Error()
		}
		got <- strings.TrimSuffix(line, "\n")
	}()
	select {
	case line := <-got:
		return line
	case <-time.After(time.Minute):
		t.Fatal("no line in a minute")
		return ""
	}
}

// Count reads a counter's next number from r.
func Count(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line := ReadLine(t, r)
	n, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("the counter wrote %q, want a number", line)
	}
	return n
}

// testRestorePipes: a Counter checkpointed (left running), killed and
// restored with new pipes in place of its standard output and descriptor
// 3 counts on from where the checkpoint caught it, into the new pipe; its
// descriptor 3 is the new pipe; killed, its Wait says so.
func testRestorePipes(t *testing.T, m crs.Module, r crs.Restorer) {
	c := StartCounter(t)
	n0 := Count(t, c.Lines)
	dir := t.TempDir()
	res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: c.Cmd.Process.Pid, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if n := Count(t, c.Lines); n != n0+1 {
		t.Errorf("the counter wrote %d after %d across the checkpoint", n, n0)
	}
	_ = c.Cmd.Process.Kill()
	_ = c.Cmd.Wait()
	// The last number the original wrote: the checkpoint caught it before.
	rest, err := io.ReadAll(c.Lines)
	if err != nil {
		t.Fatal(err)
	}
	last := n0 + 1
	if f := strings.Fields(string(rest)); len(f) > 0 {
		if last, err = strconv.Atoi(f[len(f)-1]); err != nil {
			t.Fatalf("the counter wrote %q", rest)
		}
	}

	out, life := Pipe(t), Pipe(t)
	p, err := r.Restore(t.Context(), crs.RestoreRequest{Rank: 2, Dir: dir, Meta: res.Meta,
		Stdout: out[1], Files: []*os.File{life[1]}})
	if err != nil {
		t.Fatal(err)
	}
	out[1].Close()
	life[1].Close()
	t.Cleanup(func() {
		_ = syscall.Kill(p.PID(), syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = p.Wait(ctx)
	})
	lines := bufio.NewReader(out[0])
	first := Count(t, lines)
	if first <= n0 || first > last+1 {
		t.Errorf("the restored counter starts at %d; the checkpoint was taken after it wrote %d and before it wrote %d", first, n0, last)
	}
	if next := Count(t, lines); next != first+1 {
		t.Errorf("the restored counter wrote %d after %d", next, first)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if exit, err := p.Wait(ctx); err != nil || exit.Signal != syscall.SIGKILL {
		t.Errorf("restored counter killed: Wait = %+v, %v; want killed by SIGKILL", exit, err)
	}
	// Descriptor 3 was the new pipe: with the restored tree, its only
	// writer, gone, its read end sees EOF.
	if b, err := io.ReadAll(life[0]); err != nil || len(b) != 0 {
		t.Errorf("descriptor 3's pipe after the restored tree ended: %q, %v; want EOF", b, err)
	}
}
