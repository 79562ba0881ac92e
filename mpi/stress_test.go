package mpi_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// The stress test runs a random message pattern that every rank derives
// from the same seed: point-to-point traffic with random sources, sizes and
// tags, received in one of four ways (specific blocking, specific
// non-blocking, AnySource non-blocking with Waitany, AnySource/AnyTag
// with Probe), then collectives, blocking and not, on communicators split
// at random, with point-to-point traffic on them in between.

type plannedMsg struct {
	src, dst, tag, size, idx int // idx: position among src->dst messages
}

type roundPlan struct {
	msgs   []plannedMsg
	mode   []int // receive mode of each rank
	color  []int
	key    []int
	dup    bool
	nRanks int
}

var stressSizes = []int{0, 1, 8, 1000, 40 << 10, 70 << 10}

func planRound(seed uint64, round, n int) roundPlan {
	rng := rand.New(rand.NewPCG(seed, uint64(round)))
	pl := roundPlan{nRanks: n, dup: rng.IntN(2) == 0}
	next := make([][]int, n)
	for i := range next {
		next[i] = make([]int, n)
	}
	for src := 0; src < n; src++ {
		for k := rng.IntN(12); k > 0; k-- {
			dst := rng.IntN(n)
			m := plannedMsg{src: src, dst: dst, tag: rng.IntN(4), size: stressSizes[rng.IntN(len(stressSizes))], idx: next[src][dst]}
			next[src][dst]++
			pl.msgs = append(pl.msgs, m)
		}
	}
	for r := 0; r < n; r++ {
		pl.mode = append(pl.mode, rng.IntN(4))
		pl.color = append(pl.color, rng.IntN(2))
		pl.key = append(pl.key, rng.IntN(5))
	}
	return pl
}

// payload carries src and idx in its first 16 bytes (when it has room) and
// a pattern derived from them after.
func payload(m plannedMsg) []byte {
	b := make([]byte, m.size)
	for i := range b {
		b[i] = byte(m.src*31 + m.idx*7 + i)
	}
	if m.size >= 16 {
		binary.LittleEndian.PutUint64(b[0:8], uint64(m.src))
		binary.LittleEndian.PutUint64(b[8:16], uint64(m.idx))
	}
	return b
}

func checkPayload(b []byte, m plannedMsg) error {
	want := payload(m)
	if !slices.Equal(b, want) {
		return fmt.Errorf("message %d from %d (tag %d, %d bytes): payload differs", m.idx, m.src, m.tag, m.size)
	}
	return nil
}

func stressRank(p *mpi.Proc, seed uint64, rounds int) error {
	w := p.World()
	n, me := w.Size(), w.Rank()
	for round := 0; round < rounds; round++ {
		pl := planRound(seed, round, n)
		var sends []*mpi.Request
		var mine []plannedMsg
		for _, m := range pl.msgs {
			if m.src == me {
				rq, err := w.Isend(payload(m), m.dst, m.tag)
				if err != nil {
					return err
				}
				sends = append(sends, rq)
			}
			if m.dst == me {
				mine = append(mine, m)
			}
		}
		if err := receiveRound(w, pl.mode[me], mine); err != nil {
			return fmt.Errorf("round %d mode %d: %w", round, pl.mode[me], err)
		}
		if _, err := mpi.Waitall(sends); err != nil {
			return err
		}
		if err := collectiveRound(w, pl, round); err != nil {
			return fmt.Errorf("round %d collectives: %w", round, err)
		}
	}
	return nil
}

func receiveRound(w *mpi.Comm, mode int, mine []plannedMsg) error {
	maxSize := stressSizes[len(stressSizes)-1]
	switch mode {
	case 0: // specific, blocking, in plan order
		for _, m := range mine {
			b := make([]byte, m.size)
			st, err := w.Recv(b, m.src, m.tag)
			if err != nil {
				return err
			}
			if st.Source != m.src || st.Tag != m.tag || st.Count != m.size {
				return fmt.Errorf("status %+v for %+v", st, m)
			}
			if err := checkPayload(b, m); err != nil {
				return err
			}
		}
	case 1: // specific, non-blocking, then Waitall
		reqs := make([]*mpi.Request, len(mine))
		bufs := make([][]byte, len(mine))
		for i, m := range mine {
			bufs[i] = make([]byte, m.size)
			var err error
			if reqs[i], err = w.Irecv(bufs[i], m.src, m.tag); err != nil {
				return err
			}
		}
		if _, err := mpi.Waitall(reqs); err != nil {
			return err
		}
		for i, m := range mine {
			if err := checkPayload(bufs[i], m); err != nil {
				return err
			}
		}
	case 2: // AnySource with a tag, Waitany
		var reqs []*mpi.Request
		var bufs [][]byte
		var tags []int
		for _, m := range mine {
			b := make([]byte, maxSize)
			rq, err := w.Irecv(b, mpi.AnySource, m.tag)
			if err != nil {
				return err
			}
			reqs, bufs, tags = append(reqs, rq), append(bufs, b), append(tags, m.tag)
		}
		got := make([]mpi.Status, len(reqs))
		for left := len(reqs); left > 0; left-- {
			i, st, err := mpi.Waitany(reqs)
			if err != nil {
				return err
			}
			got[i], reqs[i] = st, nil
		}
		// Per (source, tag), earlier posted receives hold earlier messages.
		type key struct{ src, tag int }
		seen := map[key][]plannedMsg{}
		for _, m := range mine {
			seen[key{m.src, m.tag}] = append(seen[key{m.src, m.tag}], m)
		}
		pos := map[key]int{}
		for i, st := range got {
			k := key{st.Source, st.Tag}
			if st.Tag != tags[i] || pos[k] >= len(seen[k]) {
				return fmt.Errorf("unplanned message %+v", st)
			}
			m := seen[k][pos[k]]
			pos[k]++
			if err := checkPayload(bufs[i][:st.Count], m); err != nil {
				return fmt.Errorf("receive %d: %w (overtaken?)", i, err)
			}
		}
	case 3: // Probe AnySource/AnyTag, then receive exactly what was probed
		bySrc := map[int][]plannedMsg{}
		for _, m := range mine {
			bySrc[m.src] = append(bySrc[m.src], m)
		}
		next := map[int]int{}
		for range mine {
			st, err := w.Probe(mpi.AnySource, mpi.AnyTag)
			if err != nil {
				return err
			}
			b := make([]byte, st.Count)
			st2, err := w.Recv(b, st.Source, st.Tag)
			if err != nil {
				return err
			}
			if st2 != st {
				return fmt.Errorf("probed %+v, received %+v", st, st2)
			}
			if next[st.Source] >= len(bySrc[st.Source]) {
				return fmt.Errorf("unplanned message from %d", st.Source)
			}
			m := bySrc[st.Source][next[st.Source]]
			next[st.Source]++
			if st.Tag != m.tag {
				return fmt.Errorf("from %d: tag %d, want %d: overtaken", st.Source, st.Tag, m.tag)
			}
			if err := checkPayload(b, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func collectiveRound(w *mpi.Comm, pl roundPlan, round int) error {
	me := w.Rank()
	c, err := w.Split(pl.color[me], pl.key[me])
	if err != nil {
		return err
	}
	var members []int
	for r := 0; r < pl.nRanks; r++ {
		if pl.color[r] == pl.color[me] {
			members = append(members, r)
		}
	}
	slices.SortStableFunc(members, func(a, b int) int { return pl.key[a] - pl.key[b] })
	if c.Size() != len(members) || c.WorldRank(c.Rank()) != me {
		return fmt.Errorf("split: size %d, want members %v", c.Size(), members)
	}
	size, r := c.Size(), c.Rank()
	root := round % size

	// Three non-blocking collectives in flight with p2p on the same
	// communicator between them.
	sum := []int64{int64(me*10 + round), 1}
	sumOut := make([]int64, 2)
	r1, err := mpi.Iallreduce(c, sum, sumOut, mpi.Sum)
	if err != nil {
		return err
	}
	bc := make([]byte, 3000)
	if r == root {
		for i := range bc {
			bc[i] = byte(i + round)
		}
	}
	r2, err := c.Ibcast(bc, root)
	if err != nil {
		return err
	}
	r3, err := c.Ibarrier()
	if err != nil {
		return err
	}
	in := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{byte(r)}, (r+1)%size, 3, in, (r-1+size)%size, 3); err != nil {
		return err
	}
	if int(in[0]) != (r-1+size)%size {
		return fmt.Errorf("ring on split: got %d", in[0])
	}
	mx := []float64{float64(me) + 0.5}
	if err := mpi.Allreduce(c, mx, mx, mpi.Max); err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{r3, r1, r2}); err != nil {
		return err
	}
	var want int64
	for _, q := range members {
		want += int64(q*10 + round)
	}
	if sumOut[0] != want || sumOut[1] != int64(size) || mx[0] != float64(slices.Max(members))+0.5 {
		return fmt.Errorf("iallreduce %v (want %d), allreduce max %v", sumOut, want, mx)
	}
	for i := range bc {
		if bc[i] != byte(i+round) {
			return fmt.Errorf("ibcast byte %d", i)
		}
	}
	all := make([]int32, size)
	if err := mpi.GatherT(c, []int32{int32(me)}, all, root); err != nil {
		return err
	}
	if r == root && !slices.Equal(all, toInt32(members)) {
		return fmt.Errorf("gather %v, want %v", all, members)
	}
	if pl.dup {
		d, err := c.Dup()
		if err != nil {
			return err
		}
		ag := make([]int32, size)
		if err := mpi.AllgatherT(d, []int32{int32(me)}, ag); err != nil {
			return err
		}
		if !slices.Equal(ag, toInt32(members)) {
			return fmt.Errorf("allgather on dup %v, want %v", ag, members)
		}
		if err := d.Free(); err != nil {
			return err
		}
	}
	return c.Free()
}

func toInt32(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func TestStress(t *testing.T) {
	runs := []struct {
		btl  string
		n    int
		seed uint64
	}{
		{"tcp", 4, 1}, {"tcp", 4, 2}, {"tcp", 3, 3}, {"tcp", 5, 4},
		{"uds", 4, 5}, {"uds", 5, 6}, {"tcp,uds", 4, 7},
	}
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for _, run := range runs {
		t.Run(fmt.Sprintf("%s/n=%d/seed=%d", run.btl, run.n, run.seed), func(t *testing.T) {
			cfg := mpitest.Config{N: run.n, BTL: run.btl}
			if run.btl == "tcp,uds" {
				cfg.Nodes = []string{"a", "a", "b", "b"}
			}
			mpitest.RunWith(t, cfg, func(p *mpi.Proc) error { return stressRank(p, run.seed, rounds) })
		})
	}
}
