package mpi

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestAgreeWire(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 64} {
		f := newBitset(n)
		for r := 0; r < n; r += 3 {
			f.set(r)
		}
		in := agreeMsg{kind: agreeEstimate, hops: 7, val: agreeVal{flag: 5, next: 42, failed: f}}
		b := encodeAgree(in)
		m, err := decodeAgree(b, n, true)
		if err != nil || m.kind != in.kind || m.hops != 7 || m.val.flag != 5 || m.val.next != 42 || !bytes.Equal(m.val.failed, f) {
			t.Fatalf("n=%d: decode(encode) = %+v, %v", n, m, err)
		}
	}
	msg := func(kind byte, next uint64, tail ...byte) []byte {
		b := encodeAgree(agreeMsg{kind: kind, val: agreeVal{next: next, failed: bitset{0}}})
		return append(b[:len(b)-1], tail...)
	}
	bad := []struct {
		name string
		b    []byte
		n    int
	}{
		{"short", msg(1, 4), 3},
		{"long", msg(1, 4, 0, 0), 3},
		{"kind 0", msg(0, 4, 0), 3},
		{"kind 9", msg(9, 4, 0), 3},
		{"rank beyond", msg(1, 4, 8), 3},
		{"odd context", msg(1, 5, 0), 3},
		{"reserved context", msg(2, 2, 0), 3},
	}
	for _, tt := range bad {
		if _, err := decodeAgree(tt.b, tt.n, true); err == nil {
			t.Errorf("%s: decoded % x for %d ranks", tt.name, tt.b, tt.n)
		}
	}
}

func FuzzDecodeAgree(f *testing.F) {
	f.Add(encodeAgree(agreeMsg{kind: agreeQuery, val: agreeVal{next: 4, failed: newBitset(5)}}), 5)
	f.Add(encodeAgree(agreeMsg{kind: agreeEstimate, val: agreeVal{next: 1 << 40, failed: bitset{0xff, 0x01}}}), 9)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 1 || n > 1<<16 {
			return
		}
		m, err := decodeAgree(b, n, true)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes, and names only
		// ranks of the communicator.
		if got := encodeAgree(m); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded % x, read % x", got, b)
		}
		for r := n; r < len(m.val.failed)*8; r++ {
			if m.val.failed.has(r) {
				t.Fatalf("rank %d of %d set", r, n)
			}
		}
	})
}

func TestAgreeTree(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13, 64, 100} {
		seen := map[int]bool{0: true}
		for r := range n {
			m := newAgreeMachine(n, r, agreeVal{failed: newBitset(n)}, newBitset(n))
			for _, ch := range m.children {
				if seen[ch] || newAgreeMachine(n, ch, agreeVal{failed: newBitset(n)}, newBitset(n)).parent != r {
					t.Fatalf("n=%d: child %d of %d seen twice or with another parent", n, ch, r)
				}
				seen[ch] = true
			}
		}
		if len(seen) != n {
			t.Fatalf("n=%d: the tree spans %d ranks", n, len(seen))
		}
	}
}

// simNet drives n agreement machines over an in-memory network: FIFO
// channels between pairs, delivered in a random order, with crashes after
// a rank's k-th send and failure notices at random later times. It runs
// the same machine agree.go drives.
type simNet struct {
	n       int
	rng     *rand.Rand
	ms      []*agreeMachine
	chans   []map[int][]agreeMsg // [src][dst]
	crashAt []int                // a rank's sends before it crashes (-1: never)
	sends   []int
	crashed []bool
	notices [][]bool // [rank][failed]: notice given
	msgs    int
	acked   bool // the ranks dead at the start are acknowledged
}

func newSimNet(n int, rng *rand.Rand, initDead []int, acked bool) *simNet {
	s := &simNet{n: n, rng: rng, crashAt: make([]int, n), sends: make([]int, n), crashed: make([]bool, n), acked: acked}
	s.chans = make([]map[int][]agreeMsg, n)
	s.notices = make([][]bool, n)
	for r := range n {
		s.chans[r] = map[int][]agreeMsg{}
		s.notices[r] = make([]bool, n)
		s.crashAt[r] = -1
	}
	for _, d := range initDead {
		s.crashed[d] = true
	}
	for r := range n {
		dead := newBitset(n)
		for _, d := range initDead {
			if d != r {
				dead.set(d)
				s.notices[r][d] = true
			}
		}
		mine := agreeVal{flag: ^uint64(0) &^ (1 << (r % 64)), next: uint64(4 + 2*r), failed: dead.clone()}
		if acked {
			mine.failed = newBitset(n)
		}
		s.ms = append(s.ms, newAgreeMachine(n, r, mine, dead))
	}
	return s
}

func (s *simNet) flush(r int) {
	for _, o := range s.ms[r].takeOut() {
		if s.crashed[r] {
			return
		}
		if s.crashAt[r] >= 0 && s.sends[r] >= s.crashAt[r] {
			s.crashed[r] = true
			return
		}
		s.sends[r]++
		s.msgs++
		s.chans[r][o.dst] = append(s.chans[r][o.dst], o.msg)
	}
}

// run runs until no event is left and returns whether every live rank
// decided.
func (s *simNet) run() bool {
	for r := range s.n {
		if !s.crashed[r] {
			s.ms[r].start()
			s.flush(r)
		}
	}
	type ev struct{ kind, a, b int }
	for {
		var evs []ev
		for a := range s.n {
			for b, q := range s.chans[a] {
				if len(q) > 0 && !s.crashed[b] {
					evs = append(evs, ev{0, a, b})
				}
			}
			if !s.crashed[a] {
				continue
			}
			for b := range s.n {
				if !s.crashed[b] && !s.notices[b][a] {
					evs = append(evs, ev{1, a, b})
				}
			}
		}
		if len(evs) == 0 {
			break
		}
		e := evs[s.rng.IntN(len(evs))]
		switch e.kind {
		case 0:
			msg := s.chans[e.a][e.b][0]
			if s.chans[e.a][e.b] = s.chans[e.a][e.b][1:]; len(s.chans[e.a][e.b]) == 0 {
				delete(s.chans[e.a], e.b)
			}
			s.ms[e.b].onMsg(e.a, msg)
			s.flush(e.b)
		case 1:
			// What a crashed rank sent may be lost with it.
			if s.rng.IntN(2) == 0 {
				delete(s.chans[e.a], e.b)
			}
			s.notices[e.b][e.a] = true
			s.ms[e.b].onFailure(e.a)
			s.flush(e.b)
		}
	}
	for r := range s.n {
		if !s.crashed[r] && s.ms[r].decision == nil {
			return false
		}
	}
	return true
}

// check verifies the decisions: one value at every rank that decided
// (uniform: crashed ones too), every live rank's flag in it, every rank
// either in it or in its failed set.
func (s *simNet) check() error {
	var d *agreeVal
	for r := range s.n {
		v := s.ms[r].decision
		if v == nil {
			continue
		}
		if d == nil {
			d = v
			continue
		}
		if v.flag != d.flag || v.next != d.next || !bytes.Equal(v.failed, d.failed) {
			return fmt.Errorf("rank %d decided %+v, another %+v", r, *v, *d)
		}
	}
	if d == nil {
		return nil
	}
	for r := range s.n {
		in := d.flag&(1<<(r%64)) == 0
		switch {
		case !s.crashed[r] && d.failed.has(r):
			return fmt.Errorf("live rank %d decided failed: %+v", r, *d)
		case !s.crashed[r] && !in:
			return fmt.Errorf("live rank %d's flag left out: %+v", r, *d)
		case !in && !d.failed.has(r) && s.n <= 64 && !s.acked:
			return fmt.Errorf("rank %d neither in nor failed: %+v", r, *d)
		}
	}
	return nil
}

// TestAgreeSimFailureFree counts the failure-free rounds and messages and
// holds them to the tree's: 4·⌊log2 n⌋ rounds, 4(n-1) messages.
func TestAgreeSimFailureFree(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8, 16, 64, 256, 1024} {
		s := newSimNet(n, rand.New(rand.NewPCG(1, uint64(n))), nil, false)
		if !s.run() {
			t.Fatalf("n=%d: not every rank decided", n)
		}
		if err := s.check(); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		hops := uint32(0)
		for _, m := range s.ms {
			hops = max(hops, m.hops)
		}
		if s.msgs != 4*(n-1) || int(hops) != treeRounds(n) {
			t.Fatalf("n=%d: %d messages, %d rounds; want %d, %d", n, s.msgs, hops, 4*(n-1), treeRounds(n))
		}
		t.Logf("n=%d: %d rounds, %d messages", n, hops, s.msgs)
	}
}

// TestAgreeSimCrashes crashes ranks at random sends, in random schedules,
// and checks agreement, validity and termination.
func TestAgreeSimCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	runs := 0
	for _, n := range []int{2, 3, 4, 5, 8, 13} {
		for range 400 {
			var initDead []int
			if rng.IntN(4) == 0 {
				initDead = append(initDead, rng.IntN(n))
			}
			s := newSimNet(n, rng, initDead, rng.IntN(2) == 0)
			for k := rng.IntN(3); k > 0; k-- {
				if n-len(initDead) > 1 {
					s.crashAt[rng.IntN(n)] = rng.IntN(2 * n)
				}
			}
			if !s.run() {
				t.Fatalf("n=%d dead %v crashes %v: a live rank did not decide", n, initDead, s.crashAt)
			}
			if err := s.check(); err != nil {
				t.Fatalf("n=%d dead %v crashes %v: %v", n, initDead, s.crashAt, err)
			}
			runs++
		}
	}
	t.Logf("%d runs", runs)
}
