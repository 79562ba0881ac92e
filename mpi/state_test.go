package mpi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestSaveRestoreRoundTrip saves a job's library state with messages
// still unreceived, restarts it from the saved bytes (over another
// transport), and checks that the same messages are received in the same
// order, ahead of new ones, on the same communicator handles.
func TestSaveRestoreRoundTrip(t *testing.T) {
	states := make([][]byte, 2)
	logs := make([][]mpi.LogEntry, 2)
	var dupHandle uint64
	big := bytes.Repeat([]byte("B"), 100<<10)
	worldTags := []int{1, 2, 1, 3, 1, 1}
	worldMsgs := [][]byte{[]byte("m0"), []byte("m1"), []byte("m2"), []byte("m3"), []byte("m4"), big}
	hold := holdAll(2)

	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		d, err := w.Dup()
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			dupHandle = d.Handle()
		}
		if w.Rank() == 1 {
			for i, m := range worldMsgs {
				if err := w.Send(m, 0, worldTags[i]); err != nil {
					return err
				}
			}
			if err := d.Send([]byte("d0"), 0, 1); err != nil {
				return err
			}
		}
		// The bookmark exchange and drain a protocol does at a checkpoint.
		ch := p.Channels()
		sentTo, _ := p.Counts()
		got, err := ch.Exchange(context.Background(), sentTo)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			if got[1] != 7+1 { // 7 messages and the Dup's agreement
				return fmt.Errorf("rank 1 says it sent %d messages, want 8", got[1])
			}
			if err := ch.Drain(context.Background(), 1, got[1]); err != nil {
				return err
			}
			// A posted receive cannot be saved.
			rq, err := w.Irecv(nil, 0, 77)
			if err != nil {
				return err
			}
			if _, err := p.SaveState(); !errors.Is(err, mpi.ErrBusy) {
				return fmt.Errorf("save with a posted receive: %v, want ErrBusy", err)
			}
			if err := w.Send(nil, 0, 77); err != nil {
				return err
			}
			if _, err := rq.Wait(); err != nil {
				return err
			}
		}
		st, err := p.SaveState()
		if err != nil {
			return err
		}
		states[w.Rank()] = st
		logs[w.Rank()] = p.CreationLog()
		hold()
		return nil
	})
	if t.Failed() {
		return
	}

	mpitest.RunWith(t, mpitest.Config{N: 2, BTL: "uds", States: states}, func(p *mpi.Proc) error {
		w := p.World()
		d, ok := p.Comm(dupHandle)
		if !ok {
			return fmt.Errorf("communicator %d not restored", dupHandle)
		}
		if log := p.CreationLog(); !reflect.DeepEqual(log, logs[w.Rank()]) {
			return fmt.Errorf("creation log %+v, saved %+v", log, logs[w.Rank()])
		}
		if w.Rank() == 1 {
			if err := w.Send([]byte("n0"), 0, 1); err != nil {
				return err
			}
		} else {
			steps := []struct {
				src, tag int
				want     []byte
			}{
				{1, 1, []byte("m0")}, {1, 1, []byte("m2")}, {1, mpi.AnyTag, []byte("m1")},
				{1, 1, []byte("m4")}, {1, 1, big}, {1, 1, []byte("n0")}, {mpi.AnySource, mpi.AnyTag, []byte("m3")},
			}
			for i, s := range steps {
				b := make([]byte, len(big))
				st, err := w.Recv(b, s.src, s.tag)
				if err != nil {
					return err
				}
				if !bytes.Equal(b[:st.Count], s.want) || st.Source != 1 {
					return fmt.Errorf("receive %d: got %.8q from %d, want %.8q", i, b[:st.Count], st.Source, s.want)
				}
			}
			b := make([]byte, 2)
			if _, err := d.Recv(b, 1, mpi.AnyTag); err != nil || string(b) != "d0" {
				return fmt.Errorf("dup receive %q, %v", b, err)
			}
		}
		// Collectives line up after the restart, and new communicators
		// get fresh handles.
		x := []int32{int32(w.Rank() + 1)}
		if err := mpi.Allreduce(d, x, x, mpi.Sum); err != nil || x[0] != 3 {
			return fmt.Errorf("allreduce on the restored dup: %v %v", x, err)
		}
		d2, err := w.Dup()
		if err != nil {
			return err
		}
		if d2.Handle() <= dupHandle {
			return fmt.Errorf("new handle %d reuses the restored range (<= %d)", d2.Handle(), dupHandle)
		}
		return nil
	})
}

func TestRestoreRefusesWrongRank(t *testing.T) {
	var state []byte
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		if p.Rank() == 1 {
			st, err := p.SaveState()
			state = st
			return err
		}
		return nil
	})
	errs := mpitest.Start(mpitest.Config{N: 2, BTL: "tcp", States: [][]byte{state, nil}}, func(p *mpi.Proc) error { return nil })
	if len(errs) == 0 || !errors.Is(errs[0], mpi.ErrState) {
		t.Fatalf("restoring rank 1's state into rank 0: %v, want ErrState", errs)
	}
}

// countingCRCP records what the message path tells a protocol.
type countingCRCP struct {
	mu        sync.Mutex
	sent, got []crcp.Envelope
}

func (c *countingCRCP) Sent(e crcp.Envelope) {
	c.mu.Lock()
	c.sent = append(c.sent, e)
	c.mu.Unlock()
}

func (c *countingCRCP) Received(e crcp.Envelope) {
	c.mu.Lock()
	c.got = append(c.got, e)
	c.mu.Unlock()
}

func (c *countingCRCP) FTEvent(context.Context, crs.State, crcp.Channels) error { return nil }

// countingComponent offers a countingCRCP to selection, above none.
type countingComponent struct{ m *countingCRCP }

func (c countingComponent) Info() mca.ComponentInfo {
	return mca.ComponentInfo{Framework: crcp.Name, Name: "counting", Priority: 50, Origin: "test"}
}

func (c countingComponent) Query(context.Context, mca.Query) (crcp.Module, int, error) {
	return c.m, 50, nil
}

func TestCRCPSeesEveryMessage(t *testing.T) {
	hooks := []*countingCRCP{{}, {}, {}}
	seen := make([]*countingCRCP, 3)
	counts := make([][]uint64, 3)
	hold := holdAll(3)
	// The protocol is selected at Init, so it is installed before any
	// message moves (SetCRCP in the rank's function would race with the
	// first message from a faster peer).
	register := func(rank int, set *frameworks.Set) { set.CRCP.Register(countingComponent{hooks[rank]}) }
	mpitest.RunWith(t, mpitest.Config{N: 3, BTL: "tcp", Register: register}, func(p *mpi.Proc) error {
		h := hooks[p.Rank()]
		if p.CRCP() != crcp.Module(h) {
			return fmt.Errorf("protocol %T installed at Init, want the counting one", p.CRCP())
		}
		w := p.World()
		r, n := w.Rank(), w.Size()
		for i := 0; i < 5; i++ {
			if _, err := w.Sendrecv([]byte{1}, (r+1)%n, i, make([]byte, 1), (r-1+n)%n, i); err != nil {
				return err
			}
		}
		if err := w.Send(make([]byte, 70<<10), r, 9); err != nil { // to itself
			return err
		}
		if _, err := w.Recv(make([]byte, 70<<10), r, 9); err != nil {
			return err
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		x := []float64{1}
		if err := mpi.Allreduce(w, x, x, mpi.Sum); err != nil {
			return err
		}
		// A final barrier so every message to us has been taken off
		// the transport before we look; hold() keeps what Finalize sends
		// out of every copy.
		if err := w.Barrier(); err != nil {
			return err
		}
		counts[r], _ = p.Counts()
		h.mu.Lock()
		seen[r] = &countingCRCP{sent: slices.Clone(h.sent), got: slices.Clone(h.got)}
		h.mu.Unlock()
		hold()
		return nil
	})
	type key struct {
		ctx      uint64
		src, dst int
	}
	sentSeq, gotSeq := map[key][]uint64{}, map[key][]uint64{}
	for r, h := range seen {
		for _, e := range h.sent {
			if e.Src != r {
				t.Fatalf("rank %d: Sent envelope from %d", r, e.Src)
			}
			k := key{e.Context, e.Src, e.Dst}
			sentSeq[k] = append(sentSeq[k], e.Seq)
		}
		for _, e := range h.got {
			if e.Dst != r {
				t.Fatalf("rank %d: Received envelope to %d", r, e.Dst)
			}
			k := key{e.Context, e.Src, e.Dst}
			gotSeq[k] = append(gotSeq[k], e.Seq)
		}
		var ns uint64
		for _, c := range counts[r] {
			ns += c
		}
		if ns != uint64(len(h.sent)) {
			t.Errorf("rank %d: %d messages counted sent, protocol saw %d", r, ns, len(h.sent))
		}
	}
	for k, seqs := range sentSeq {
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("%+v: sequence numbers %v are not 1, 2, ...", k, seqs)
			}
		}
		if !reflect.DeepEqual(gotSeq[k], seqs) {
			t.Fatalf("%+v: sent %v, received %v", k, seqs, gotSeq[k])
		}
	}
	if len(gotSeq) != len(sentSeq) {
		t.Fatalf("%d channels sent on, %d received on", len(sentSeq), len(gotSeq))
	}
}
