package sm

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

func newModule(t *testing.T, mode string) btl.Module {
	return btltest.Module(t, New(), mca.Setting{Name: paramSingle, Value: mode})
}

// TestConformance runs the kit with single copy forced, refused, and as
// the kernel allows.
func TestConformance(t *testing.T) {
	for _, mode := range []string{copyCMA, copyNone, copyAuto} {
		t.Run(mode, func(t *testing.T) {
			btltest.Run(t, "sm-conformance-"+filepath.Base(t.TempDir()), func(t *testing.T) btl.Module { return newModule(t, mode) })
			if n := smMappings(t); n != 0 {
				t.Errorf("%d mappings of a segment left after every conn and module closed", n)
			}
		})
	}
}

func TestRelisten(t *testing.T) {
	btltest.Relisten(t, "sm-relisten-"+filepath.Base(t.TempDir()), func(t *testing.T) btl.Module { return newModule(t, copyAuto) })
}

func TestReachableOnlySameNode(t *testing.T) {
	m := newModule(t, copyAuto)
	self := btl.Endpoint{Job: "j", Node: "a", Addr: "@x"}
	tests := []struct {
		peer btl.Endpoint
		want bool
	}{
		{btl.Endpoint{Job: "j", Node: "a", Addr: "@y"}, true},
		{btl.Endpoint{Job: "j", Node: "b", Addr: "@y"}, false},
		{btl.Endpoint{Job: "k", Node: "a", Addr: "@y"}, false},
		{btl.Endpoint{Job: "j", Node: "a"}, false},
	}
	for _, tt := range tests {
		if got := m.Reachable(self, tt.peer); got != tt.want {
			t.Errorf("Reachable(%+v) = %v, want %v", tt.peer, got, tt.want)
		}
	}
}

// smMappings counts this process's mappings of sm segments.
func smMappings(t *testing.T) int {
	t.Helper()
	return mappingsOf(t, "self")
}

func mappingsOf(t *testing.T, pid string) int {
	t.Helper()
	f, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), segMapsTag) {
			n++
		}
	}
	return n
}

// TestCloseLeavesNoMapping closes connections as mpi's Suspend does,
// while a write waits for room and a read for data, and unlistens: both
// operations fail, and no mapping of a segment is left in the process
// (under crs=criu, CRIU must find no shared memory to dump).
func TestCloseLeavesNoMapping(t *testing.T) {
	ctx := t.Context()
	settings := []mca.Setting{{Name: paramSingle, Value: copyNone}, {Name: paramRing, Value: "4KiB"}}
	a, b := btltest.Module(t, New(), settings...), btltest.Module(t, New(), settings...)
	accepted := make(chan btl.Conn, 1)
	epA := btl.Endpoint{Job: "sm-close", Rank: 0, Node: "n"}
	epB := btl.Endpoint{Job: "sm-close", Rank: 1, Node: "n"}
	var err error
	if epB.Addr, err = b.Listen(ctx, epB, func(c btl.Conn) { accepted <- c }); err != nil {
		t.Fatal(err)
	}
	out, err := a.Dial(ctx, epA, epB)
	if err != nil {
		t.Fatal(err)
	}
	in := <-accepted
	if n := smMappings(t); n != 2 {
		t.Fatalf("%d mappings of the one segment, want 2 (one per end)", n)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- out.WriteFrame([]byte("h"), make([]byte, 1<<20)) }()
	hdr := make([]byte, btl.MaxHeader)
	if _, pn, err := in.ReadHeader(hdr); err != nil || pn != 1<<20 {
		t.Fatalf("read header: %d, %v", pn, err)
	}
	read := make(chan error, 1)
	go func() { _, _, err := out.ReadHeader(hdr[:0:0]); read <- err }()
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"write": wrote, "read": read} {
		select {
		case err := <-ch:
			if !errors.Is(err, btl.ErrClosed) {
				t.Errorf("%s pending at close: %v, want btl.ErrClosed", name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s pending at close never returned", name)
		}
	}
	// The other end sees its peer gone in the middle of the frame.
	if err := in.ReadPayload(make([]byte, 1<<20)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("payload cut by the writer's close: %v, want io.ErrUnexpectedEOF", err)
	}
	in.Close()
	if err := b.(btl.Relistener).Unlisten(); err != nil {
		t.Fatal(err)
	}
	if n := smMappings(t); n != 0 {
		t.Errorf("%d mappings of a segment after close and unlisten", n)
	}
}
