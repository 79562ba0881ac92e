package mpi_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"gompi/frameworks/snapc"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// halves makes the intercommunicator between world ranks [0, n/2) and
// [n/2, n), created over the world with tag 7; low tells the caller's
// half.
func halves(p *mpi.Proc) (ic *mpi.Comm, low bool, err error) {
	w := p.World()
	h := w.Size() / 2
	low = w.Rank() < h
	color, remoteLeader := 1, 0
	if low {
		color, remoteLeader = 0, h
	}
	local, err := w.Split(color, w.Rank())
	if err != nil {
		return nil, false, err
	}
	ic, err = local.IntercommCreate(0, w, remoteLeader, 7)
	if err != nil {
		return nil, false, err
	}
	return ic, low, local.Free()
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestIntercomm checks an intercommunicator between the halves of worlds
// of 2 to 8 ranks: its groups, point-to-point naming remote ranks (with
// AnySource and statuses), Barrier, Bcast from either side, Merge in
// every order, Dup, Compare, Free, and that other collectives fail with
// ErrInter.
func TestIntercomm(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error { return checkIntercomm(p, n) })
		})
	}
}

func checkIntercomm(p *mpi.Proc, n int) error {
	ic, low, err := halves(p)
	if err != nil {
		return err
	}
	h, me := n/2, p.Rank()
	mine, theirs := span(0, h), span(h, n)
	if !low {
		mine, theirs = theirs, mine
	}
	rg, err := ic.RemoteGroup()
	if err != nil || !ic.IsInter() || ic.Size() != len(mine) || ic.RemoteSize() != len(theirs) ||
		!slices.Equal(ic.Group().Members(), mine) || !slices.Equal(rg.Members(), theirs) || ic.Rank() != slices.Index(mine, me) {
		return fmt.Errorf("groups: size %d remote %d rank %d group %v remote %v, %v", ic.Size(), ic.RemoteSize(), ic.Rank(), ic.Group().Members(), rg.Members(), err)
	}
	if err := intercommP2P(ic, theirs); err != nil {
		return err
	}
	if err := ic.Barrier(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := intercommBcast(ic, low); err != nil {
		return err
	}
	if err := intercommMerges(ic, low, n); err != nil {
		return err
	}
	d, err := ic.Dup()
	if err != nil {
		return fmt.Errorf("dup: %w", err)
	}
	if ic.Compare(d) != mpi.Congruent || d.Compare(ic) != mpi.Congruent || ic.Compare(p.World()) != mpi.Unequal || ic.Compare(ic) != mpi.Ident {
		return fmt.Errorf("compare: %d %d %d", ic.Compare(d), ic.Compare(p.World()), ic.Compare(ic))
	}
	if err := intercommP2P(d, theirs); err != nil {
		return fmt.Errorf("on the dup: %w", err)
	}
	if err := intercommSplit(ic, mine, theirs); err != nil {
		return err
	}
	cr, err := ic.Create(ic.Group())
	if err != nil || cr.Compare(ic) != mpi.Congruent {
		return fmt.Errorf("create of both whole groups: %v", err)
	}
	if err := cr.Free(); err != nil {
		return err
	}
	if err := intercommRefusals(ic); err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	return ic.Free()
}

// intercommP2P: every rank sends its world rank to every remote rank
// (tag: its local rank) and receives from AnySource, checking each
// status names the sender's remote rank; then a Sendrecv with remote rank
// local%remoteSize, checked by its payload.
func intercommP2P(ic *mpi.Comm, theirs []int) error {
	me := ic.Proc().Rank()
	var reqs []*mpi.Request
	for r := range ic.RemoteSize() {
		q, err := ic.Isend(binary.LittleEndian.AppendUint32(nil, uint32(me)), r, ic.Rank())
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	seen := map[int]bool{}
	for range ic.RemoteSize() {
		buf := make([]byte, 4)
		st, err := ic.Recv(buf, mpi.AnySource, mpi.AnyTag)
		if err != nil {
			return err
		}
		w := int(binary.LittleEndian.Uint32(buf))
		if st.Source < 0 || st.Source >= len(theirs) || theirs[st.Source] != w || seen[w] || st.Tag != st.Source {
			return fmt.Errorf("p2p: status source %d tag %d for a message of world rank %d (remote group %v)", st.Source, st.Tag, w, theirs)
		}
		seen[w] = true
	}
	_, err := mpi.Waitall(reqs)
	return err
}

// intercommBcast broadcasts from low group's rank 0 and then from the
// high group's last rank, with Root, ProcNull and the remote rank.
func intercommBcast(ic *mpi.Comm, low bool) error {
	for _, fromLow := range []bool{true, false} {
		rootRank := 0
		if !fromLow {
			rootRank = map[bool]int{true: ic.RemoteSize(), false: ic.Size()}[low] - 1
		}
		buf := make([]byte, 3)
		root := rootRank
		if low == fromLow {
			root = mpi.ProcNull
			if ic.Rank() == rootRank {
				root, buf = mpi.Root, []byte{1, 2, byte(rootRank)}
			}
		}
		if err := ic.Bcast(buf, root); err != nil {
			return fmt.Errorf("bcast: %w", err)
		}
		if low != fromLow && !slices.Equal(buf, []byte{1, 2, byte(rootRank)}) {
			return fmt.Errorf("bcast from the other group's rank %d: got %v", rootRank, buf)
		}
	}
	return nil
}

// intercommMerges merges with the low group passing high false, true
// with the high group false, and both the same.
func intercommMerges(ic *mpi.Comm, low bool, n int) error {
	h := n / 2
	lowFirst, highFirst := span(0, n), slices.Concat(span(h, n), span(0, h))
	cases := []struct {
		lowHigh, highHigh bool
		want              []int
	}{
		{false, true, lowFirst},
		{true, false, highFirst},
		{true, true, lowFirst}, // ties: the lower leader first
		{false, false, lowFirst},
	}
	for _, c := range cases {
		high := c.highHigh
		if low {
			high = c.lowHigh
		}
		m, err := ic.Merge(high)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		if m.IsInter() || !slices.Equal(m.Group().Members(), c.want) || m.Rank() != slices.Index(c.want, ic.Proc().Rank()) {
			return fmt.Errorf("merge %v/%v: members %v rank %d, want %v", c.lowHigh, c.highHigh, m.Group().Members(), m.Rank(), c.want)
		}
		x := []int64{int64(ic.Proc().Rank())}
		if err := mpi.Allreduce(m, x, x, mpi.Sum); err != nil || x[0] != int64(n*(n-1)/2) {
			return fmt.Errorf("allreduce on the merged communicator: %v %v", x, err)
		}
		if err := m.Free(); err != nil {
			return err
		}
	}
	return nil
}

// intercommRefusals: what gompi does not run on an intercommunicator
// fails with ErrInter (an errors.ErrUnsupported); Merge and RemoteGroup
// on an intracommunicator fail with ErrArg.
func intercommRefusals(ic *mpi.Comm) error {
	x := []int32{1}
	calls := map[string]func() error{
		"allreduce": func() error { return mpi.Allreduce(ic, x, x, mpi.Sum) },
		"gather":    func() error { return ic.Gather(make([]byte, 1), make([]byte, 8), 0) },
		"cart":      func() error { _, err := ic.CartCreate([]int{ic.Size()}, []bool{false}); return err },
		"scan":      func() error { return ic.Scan(make([]byte, 4), make([]byte, 4), mustRed(mpi.Sum, mpi.TypeInt32)) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, mpi.ErrInter) || !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("%s on an intercommunicator: %v", name, err)
		}
	}
	w := ic.Proc().World()
	if _, err := w.Merge(false); !errors.Is(err, mpi.ErrArg) {
		return fmt.Errorf("merge of the world: %v", err)
	}
	if _, err := w.RemoteGroup(); !errors.Is(err, mpi.ErrArg) || w.IsInter() || w.RemoteSize() != 0 {
		return fmt.Errorf("remote group of the world: %v", err)
	}
	return nil
}

func mustRed(op mpi.Op, dt *mpi.Datatype) mpi.Reduction {
	r, err := mpi.OpReduction(op, dt)
	must0(err)
	return r
}

// TestIntercommRanks: a receive from a rank outside the remote group
// fails with ErrArg, as does a local leader outside the communicator.
func TestIntercommRanks(t *testing.T) {
	mpitest.Run(t, 3, "tcp", func(p *mpi.Proc) error {
		ic, low, err := halves(p)
		if err != nil {
			return err
		}
		if _, err := ic.Recv(nil, ic.RemoteSize(), 0); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("receive from remote rank %d: %v", ic.RemoteSize(), err)
		}
		if err := ic.Send(nil, -5, 0); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("send to -5: %v", err)
		}
		if _, err := p.World().IntercommCreate(3, p.World(), 0, 1); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("leader 3 of 3: %v", err)
		}
		_ = low
		return ic.Free()
	})
}

// TestIntercommRestart: communicators made by IntercommCreate, Dup, Merge
// and Split of an intercommunicator come back with their handles at a restart, without any
// communication, and carry a message sent before the checkpoint.
func TestIntercommRestart(t *testing.T) {
	const n = 4
	states := make([][]byte, n)
	handles := make([][]uint64, n)
	hold := holdAll(n)
	create := func(p *mpi.Proc) ([]*mpi.Comm, error) {
		ic, low, err := halves(p)
		if err != nil {
			return nil, err
		}
		d, err := ic.Dup()
		if err != nil {
			return nil, err
		}
		m, err := ic.Merge(!low)
		if err != nil {
			return nil, err
		}
		s, err := d.Split(0, -p.Rank())
		return []*mpi.Comm{ic, d, m, s}, err
	}
	mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error {
		cs, err := create(p)
		if err != nil {
			return err
		}
		for _, c := range cs {
			handles[p.Rank()] = append(handles[p.Rank()], c.Handle())
		}
		// Each rank sends to its remote peer of the same local rank.
		if err := cs[1].Send([]byte{byte(p.Rank())}, cs[1].Rank(), 3); err != nil {
			return err
		}
		if err := quiesce(p); err != nil {
			return err
		}
		if states[p.Rank()], err = p.SaveState(); err != nil {
			return err
		}
		hold()
		return nil
	})
	if t.Failed() {
		return
	}
	dirs := make([]string, n)
	for r := range n {
		dirs[r] = writeSnapshot(t, states[r])
	}
	cfg := mpitest.Config{N: n, BTL: "uds", Wrap: func(r int, b mpi.Bootstrap) mpi.Bootstrap {
		l := newLink()
		l.restart = snapc.RestartInfo{Seq: 0, Dir: dirs[r]}
		return linked{b, l}
	}}
	mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
		sent, _ := p.Counts()
		cs, err := create(p)
		if err != nil {
			return err
		}
		if s2, _ := p.Counts(); !reflect.DeepEqual(sent, s2) {
			return fmt.Errorf("the replay sent messages: %v then %v", sent, s2)
		}
		var hs []uint64
		for _, c := range cs {
			hs = append(hs, c.Handle())
		}
		if !slices.Equal(hs, handles[p.Rank()]) || !cs[0].IsInter() || !cs[1].IsInter() || cs[2].IsInter() || !cs[3].IsInter() {
			return fmt.Errorf("replayed handles %v, saved %v", hs, handles[p.Rank()])
		}
		p.EndReplay()
		buf := make([]byte, 1)
		st, err := cs[1].Recv(buf, mpi.AnySource, 3)
		rg, _ := cs[1].RemoteGroup()
		if err != nil || st.Source != cs[1].Rank() || int(buf[0]) != rg.Members()[st.Source] {
			return fmt.Errorf("the message in flight: %v from %d, %v", buf, st.Source, err)
		}
		if err := cs[0].Barrier(); err != nil {
			return err
		}
		if err := cs[3].Barrier(); err != nil {
			return err
		}
		x := []int32{1}
		return mpi.Allreduce(cs[2], x, x, mpi.Sum)
	})
}

// intercommSplit splits by local rank parity, keys reversing the order:
// each part joins the other group's part of the same parity, or gets nil
// when that part is empty; messages then go both ways.
func intercommSplit(ic *mpi.Comm, mine, theirs []int) error {
	color := ic.Rank() % 2
	s, err := ic.Split(color, -ic.Rank())
	if err != nil {
		return fmt.Errorf("split: %w", err)
	}
	part := func(g []int) []int {
		var out []int
		for i := len(g) - 1; i >= 0; i-- {
			if i%2 == color {
				out = append(out, g[i])
			}
		}
		return out
	}
	wantL, wantR := part(mine), part(theirs)
	if len(wantR) == 0 {
		if s != nil {
			return fmt.Errorf("split: got a communicator with no remote part")
		}
		return nil
	}
	rg, err := s.RemoteGroup()
	if err != nil || !s.IsInter() || !slices.Equal(s.Group().Members(), wantL) || !slices.Equal(rg.Members(), wantR) {
		return fmt.Errorf("split: local %v remote %v, want %v %v (%v)", s.Group().Members(), rg.Members(), wantL, wantR, err)
	}
	if err := intercommP2P(s, wantR); err != nil {
		return fmt.Errorf("on the split: %w", err)
	}
	return s.Free()
}
