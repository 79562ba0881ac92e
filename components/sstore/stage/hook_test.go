package stage

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseHoldFetch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *fetchHold
	}{
		{"n2:3:/tmp/hold", &fetchHold{node: "n2", rank: 3, fifo: "/tmp/hold"}},
		{"n2:3:/tmp/a:b", &fetchHold{node: "n2", rank: 3, fifo: "/tmp/a:b"}},
		{"n2:3", nil},
		{":3:/tmp/hold", nil},
		{"n2:-1:/tmp/hold", nil},
		{"n2:x:/tmp/hold", nil},
		{"n2:3:", nil},
	} {
		got, err := parseHoldFetch(tc.in)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%q: parsed as %+v, want an error", tc.in, got)
		case tc.want != nil && (err != nil || *got != *tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// The hook holds only its node's fetch of its rank, until the pipe's
// writer closes it, and nothing once the pipe is gone.
func TestHoldFetchWaits(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "hold")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &fetchHold{node: "n2", rank: 3, fifo: fifo}
	h.wait("n1", 3) // another node: not held
	h.wait("n2", 2) // another rank: not held
	done := make(chan struct{})
	go func() { h.wait("n2", 3); close(done) }()
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once wait opened it
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("anything"))
	select {
	case <-done:
		t.Fatal("the fetch went on while the pipe was open")
	case <-time.After(50 * time.Millisecond): // a check that it is still held, not a synchronization
	}
	w.Close()
	<-done
	os.Remove(fifo)
	h.wait("n2", 3) // the pipe is gone: not held
}
