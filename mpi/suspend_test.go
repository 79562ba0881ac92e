package mpi_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// protocols are the ways a suspension makes the channels quiet, chosen by
// the coordination protocol the job selects: every suspension test runs
// under each.
var protocols = []struct {
	crcp string
	way  crcp.Quiesce
}{{"bkmrk", crcp.QuiesceCounts}, {"flag", crcp.QuiesceFlags}}

// withCRCP is cfg with C/R on and the coordination protocol name, for
// every rank (as gompirun passes the job's parameters to all).
func withCRCP(cfg mpitest.Config, name string) mpitest.Config {
	cfg.Settings = append(slices.Clone(cfg.Settings),
		mca.Setting{Name: mca.ParamCREnabled, Value: "1"}, mca.Setting{Name: crcp.Name, Value: name})
	return cfg
}

// traffic is a randomized program with no C/R code: point-to-point
// (blocking and not, random sizes and tags, AnySource), blocking and
// non-blocking collectives, and a goroutine per rank blocked in Recv for
// long stretches. Every rank draws the same choices (the seed is shared),
// every message's content is known to its receiver and checked, and each
// rank returns a checksum of everything it received, in program order.
type traffic struct {
	seed   uint64
	rounds int
}

// trafficData is the content rank src sends to dst as the k-th message of
// round: deterministic, so the receiver checks it.
func trafficData(round, src, dst, k, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(round)<<32|uint64(src)<<16|uint64(dst), uint64(k)))
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := size &^ 7; i < size; i++ {
		b[i] = byte(round + src + dst + k + i)
	}
	return b
}

func randSize(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return r.IntN(64)
	case 1:
		return r.IntN(4 << 10)
	case 2:
		return 60<<10 + r.IntN(10<<10) // around inlineMax (64 KiB)
	default:
		return r.IntN(maxSize)
	}
}

// maxSize bounds the traffic's messages: above the size read straight
// into a posted receive (32 KiB) and the largest Isend written inline.
const maxSize = 128 << 10

// run is the program of one rank; progress is told the rounds done.
func (tr traffic) run(p *mpi.Proc, progress func(int)) (uint64, error) {
	w := p.World()
	n, me := w.Size(), w.Rank()
	h := fnv.New64a()
	side, err := w.Dup()
	if err != nil {
		return 0, err
	}
	sideDone := make(chan error, 1)
	sideSum := fnv.New64a()
	nSide := tr.rounds / 8
	go func() { sideDone <- sideRecv(side, nSide, sideSum) }()
	sent := 0
	for round := 0; round < tr.rounds; round++ {
		r := rand.New(rand.NewPCG(tr.seed, uint64(round)))
		if round%8 == 3 && sent < nSide {
			msg := binary.LittleEndian.AppendUint64(nil, uint64(sent))
			if err := side.Send(msg, (me+1)%n, 5); err != nil {
				return 0, err
			}
			sent++
		}
		if err := tr.step(w, r, round, h); err != nil {
			return 0, fmt.Errorf("round %d: %w", round, err)
		}
		progress(round + 1)
	}
	if err := <-sideDone; err != nil {
		return 0, err
	}
	h.Write(sideSum.Sum(nil))
	return h.Sum64(), side.Free()
}

// sideRecv receives n messages from the left neighbour, blocked in Recv
// between them for many rounds, and checks they come in order.
func sideRecv(c *mpi.Comm, n int, h interface{ Write([]byte) (int, error) }) error {
	left := (c.Rank() - 1 + c.Size()) % c.Size()
	buf := make([]byte, 8)
	for k := 0; k < n; k++ {
		if _, err := c.Recv(buf, left, 5); err != nil {
			return fmt.Errorf("side receive %d: %w", k, err)
		}
		if got := binary.LittleEndian.Uint64(buf); got != uint64(k) {
			return fmt.Errorf("side message %d arrived as %d (lost, duplicated or reordered)", k, got)
		}
		h.Write(buf)
	}
	return nil
}

func (tr traffic) step(w *mpi.Comm, r *rand.Rand, round int, h interface{ Write([]byte) (int, error) }) error {
	n, me := w.Size(), w.Rank()
	switch r.IntN(5) {
	case 0: // blocking ring exchange
		k := 1 + r.IntN(n-1)
		size, tag := randSize(r), roundTag(round, r)
		dst, src := (me+k)%n, (me-k+n)%n
		buf := make([]byte, size)
		if _, err := w.Sendrecv(trafficData(round, me, dst, 0, size), dst, tag, buf, src, tag); err != nil {
			return err
		}
		if !bytes.Equal(buf, trafficData(round, src, me, 0, size)) {
			return fmt.Errorf("ring message from %d is wrong", src)
		}
		h.Write(buf)
	case 1: // non-blocking, several messages per pair, AnySource
		return tr.anySource(w, r, round, h)
	case 2: // blocking collectives
		m := 1 + r.IntN(3000)
		send, got := make([]int64, m), make([]int64, m)
		for i := range send {
			send[i] = int64(round*1000 + me*7 + i)
		}
		if err := mpi.Allreduce(w, send, got, mpi.Sum); err != nil {
			return err
		}
		for i := range got {
			if want := int64(n*(round*1000+i) + 7*n*(n-1)/2); got[i] != want {
				return fmt.Errorf("allreduce[%d] = %d, want %d", i, got[i], want)
			}
		}
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(got[m-1])))
		root, size := r.IntN(n), randSize(r)
		buf := make([]byte, size)
		if me == root {
			copy(buf, trafficData(round, root, -1, 1, size))
		}
		if err := w.Bcast(buf, root); err != nil {
			return err
		}
		if !bytes.Equal(buf, trafficData(round, root, -1, 1, size)) {
			return errors.New("bcast content is wrong")
		}
		h.Write(buf)
	case 3: // overlapping non-blocking collectives
		return nonBlockingColls(w, r, round, h)
	default: // alltoall
		b := 1 + r.IntN(2000)
		send, recv := make([]byte, b*n), make([]byte, b*n)
		for d := 0; d < n; d++ {
			copy(send[d*b:], trafficData(round, me, d, 2, b))
		}
		if err := w.Alltoall(send, recv); err != nil {
			return err
		}
		for s := 0; s < n; s++ {
			if !bytes.Equal(recv[s*b:(s+1)*b], trafficData(round, s, me, 2, b)) {
				return fmt.Errorf("alltoall block from %d is wrong", s)
			}
		}
		h.Write(recv)
	}
	return nil
}

// roundTag is a tag of round alone: a rank a round ahead of another
// (possible between collectives) never sends what an AnySource receive
// of the other's round could match, as a correct MPI program must not.
func roundTag(round int, r *rand.Rand) int { return round*1000 + r.IntN(1000) }

// anySource: every rank sends m messages to every other with one tag;
// receives from AnySource must give each sender's in order.
func (tr traffic) anySource(w *mpi.Comm, r *rand.Rand, round int, h interface{ Write([]byte) (int, error) }) error {
	n, me := w.Size(), w.Rank()
	m, tag := 1+r.IntN(4), roundTag(round, r)
	sizes := make([]int, m)
	for k := range sizes {
		sizes[k] = 8 + randSize(r)
	}
	var reqs []*mpi.Request
	bufs := make([][]byte, 0, m*(n-1))
	for i := 0; i < m*(n-1); i++ {
		b := make([]byte, 8+maxSize)
		rq, err := w.Irecv(b, mpi.AnySource, tag)
		if err != nil {
			return err
		}
		reqs, bufs = append(reqs, rq), append(bufs, b)
	}
	var sends []*mpi.Request
	for d := 0; d < n; d++ {
		if d == me {
			continue
		}
		for k := 0; k < m; k++ {
			msg := append(binary.LittleEndian.AppendUint64(nil, uint64(k)), trafficData(round, me, d, k, sizes[k]-8)...)
			rq, err := w.Isend(msg, d, tag)
			if err != nil {
				return err
			}
			sends = append(sends, rq)
		}
	}
	sts, err := mpi.Waitall(reqs)
	if err != nil {
		return err
	}
	next := make([]int, n)
	per := make([][]byte, n)
	for i, st := range sts {
		k := int(binary.LittleEndian.Uint64(bufs[i]))
		if k != next[st.Source] {
			return fmt.Errorf("message %d from %d arrived when %d was due", k, st.Source, next[st.Source])
		}
		next[st.Source]++
		if st.Count != sizes[k] || !bytes.Equal(bufs[i][8:st.Count], trafficData(round, st.Source, me, k, sizes[k]-8)) {
			return fmt.Errorf("message %d from %d is wrong", k, st.Source)
		}
		per[st.Source] = append(per[st.Source], bufs[i][:st.Count]...)
	}
	for _, b := range per {
		h.Write(b) // by source: the arrival order across sources is free
	}
	_, err = mpi.Waitall(sends)
	return err
}

func nonBlockingColls(w *mpi.Comm, r *rand.Rand, round int, h interface{ Write([]byte) (int, error) }) error {
	n, me := w.Size(), w.Rank()
	m := 1 + r.IntN(20000)
	send, got := make([]float64, m), make([]float64, m)
	for i := range send {
		send[i] = float64(me + i)
	}
	r1, err := mpi.Iallreduce(w, send, got, mpi.Sum)
	if err != nil {
		return err
	}
	r2, err := w.Ibarrier()
	if err != nil {
		return err
	}
	root, size := r.IntN(n), randSize(r)
	buf := make([]byte, size)
	if me == root {
		copy(buf, trafficData(round, root, -2, 3, size))
	}
	r3, err := w.Ibcast(buf, root)
	if err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{r3, r2, r1}); err != nil {
		return err
	}
	for i := range got {
		if want := float64(n*i + n*(n-1)/2); got[i] != want {
			return fmt.Errorf("iallreduce[%d] = %v, want %v", i, got[i], want)
		}
	}
	if !bytes.Equal(buf, trafficData(round, root, -2, 3, size)) {
		return errors.New("ibcast content is wrong")
	}
	h.Write(buf)
	return nil
}

// job runs the traffic on n ranks; with driver set, it is given the Procs
// once all started and runs beside the program, which waits for it before
// finalizing. It returns each rank's checksum.
func (tr traffic) job(t *testing.T, cfg mpitest.Config, driver func(ps []*mpi.Proc, rounds func() int)) []uint64 {
	t.Helper()
	n := cfg.N
	sums := make([]uint64, n)
	ps := make([]*mpi.Proc, n)
	var mu sync.Mutex
	started := holdAll(n)
	done := make(chan struct{})
	var once sync.Once
	minRound := make([]int, n)
	rounds := func() int {
		mu.Lock()
		defer mu.Unlock()
		m := minRound[0]
		for _, v := range minRound {
			m = min(m, v)
		}
		return m
	}
	mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
		mu.Lock()
		ps[p.Rank()] = p
		mu.Unlock()
		started()
		if driver != nil && p.Rank() == 0 {
			go func() {
				defer once.Do(func() { close(done) })
				driver(ps, rounds)
			}()
		}
		sum, err := tr.run(p, func(k int) {
			mu.Lock()
			minRound[p.Rank()] = k
			mu.Unlock()
		})
		sums[p.Rank()] = sum
		if driver != nil {
			<-done
		}
		return err
	})
	return sums
}

// allRanks runs f on every rank at once, as the runtime's link of each
// would, and returns each rank's error.
func allRanks(ps []*mpi.Proc, timeout time.Duration, f func(ctx context.Context, p *mpi.Proc) error) []error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(ctx, p) }()
	}
	wg.Wait()
	return errs
}

// suspendAll suspends every rank at once and checks each owns no socket
// and no listener once its Suspend returned, and that it made its
// channels quiet the way given. When every rank of the job is quiet, it
// checks each took off its connections exactly what every peer says it
// sent it (claim 1 of the protocol: for every ordered pair, the frames
// written before the flag or count are the frames read before it).
func suspendAll(ps []*mpi.Proc, epoch uint64, way crcp.Quiesce, timeout time.Duration) ([]mpi.Quiet, []error) {
	qs := make([]mpi.Quiet, len(ps))
	errs := allRanks(ps, timeout, func(ctx context.Context, p *mpi.Proc) error {
		addrs := mpi.Listening(p)
		q, err := p.Suspend(ctx, epoch)
		if err != nil {
			return err
		}
		qs[p.Rank()] = q
		if q.Way != way {
			return fmt.Errorf("rank %d made its channels quiet by %v, want %v", p.Rank(), q.Way, way)
		}
		return checkClosed(p, addrs)
	})
	if errors.Join(errs...) != nil || len(ps) != ps[0].Size() {
		return qs, errs
	}
	for j, q := range qs {
		for i := range qs {
			if i != j && q.RecvdFrom[i] != qs[i].SentTo[j] {
				errs[j] = errors.Join(errs[j], fmt.Errorf("rank %d took %d messages of rank %d off its connection, which sent %d", j, q.RecvdFrom[i], i, qs[i].SentTo[j]))
			}
		}
	}
	return qs, errs
}

// checkClosed: no connection, no reader, and the addresses published
// before the suspension no longer listen (a uds socket file is gone).
func checkClosed(p *mpi.Proc, addrs map[string]string) error {
	if conns, readers := mpi.Sockets(p); conns != 0 || readers {
		return fmt.Errorf("rank %d suspended with %d connections (readers running: %v)", p.Rank(), conns, readers)
	}
	for name, a := range addrs {
		switch name {
		case "uds":
			if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rank %d suspended: its socket %s is still there (%v)", p.Rank(), a, err)
			}
		case "sm":
			if c, err := net.Dial("unix", a); err == nil {
				c.Close()
				return fmt.Errorf("rank %d suspended: %s still accepts connections", p.Rank(), a)
			}
		case "tcp":
			if c, err := net.Dial("tcp", a); err == nil {
				c.Close()
				return fmt.Errorf("rank %d suspended: %s still accepts connections", p.Rank(), a)
			}
		}
	}
	return nil
}

// socketFDs returns the sockets this process has open, by their
// /proc/self/fd link ("socket:[inode]").
func socketFDs() map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		// A descriptor closed meanwhile has no link: it is no socket.
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			out[l] = true
		}
	}
	return out
}

func resumeAll(ps []*mpi.Proc, timeout time.Duration) error {
	return errors.Join(allRanks(ps, timeout, func(ctx context.Context, p *mpi.Proc) error { return p.Resume(ctx) })...)
}

// TestSuspendTraffic suspends a randomized program's ranks at 50 random
// moments and resumes them: the results equal a run without suspensions,
// and each message arrives exactly once, in order (checked by the
// program as it runs).
func TestSuspendTraffic(t *testing.T) {
	const n, suspends = 4, 50
	for _, cfg := range []mpitest.Config{
		{N: n, BTL: "tcp"},
		{N: n, BTL: "uds"},
		// two nodes: uds within each, tcp between them
		{N: n, BTL: "tcp,uds", Nodes: []string{"a", "a", "b", "b"}},
		// and shared memory within each
		{N: n, BTL: "tcp,sm", Nodes: []string{"a", "a", "b", "b"}},
		// TLS: its handshakes and close alerts on every new connection
		{N: n, BTL: "tcp", Settings: []mca.Setting{{Name: "btl_tcp_tls", Value: "true"}}},
	} {
		name := cfg.BTL
		if cfg.Settings != nil {
			name += "+tls"
		}
		for _, pr := range protocols {
			t.Run(pr.crcp+"/"+name, func(t *testing.T) { suspendTraffic(t, withCRCP(cfg, pr.crcp), pr.way, suspends) })
		}
	}
}

func suspendTraffic(t *testing.T, cfg mpitest.Config, way crcp.Quiesce, suspends uint64) {
	tr := traffic{seed: rand.Uint64(), rounds: 240}
	if raceOn {
		tr.rounds = 60
	}
	t.Logf("seed %d", tr.seed)
	want := tr.job(t, cfg, nil)
	mid := 0
	base := socketFDs()
	got := tr.job(t, cfg, func(ps []*mpi.Proc, rounds func() int) {
		r := rand.New(rand.NewPCG(tr.seed, 1))
		for e := uint64(1); e <= suspends; e++ {
			// A random moment: up to 3 ms more of the program.
			time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
			if rounds() < tr.rounds {
				mid++
			}
			qs, errs := suspendAll(ps, e, way, time.Minute)
			for i, err := range errs {
				if err != nil {
					t.Errorf("suspend %d, rank %d: %v", e, i, err)
				} else if q, tree := qs[i], uint64(mpi.TreeMessages(i, len(ps))); q.Frames < tree || q.Frames > tree+uint64(len(ps)-1) {
					t.Errorf("suspend %d, rank %d: wrote %d frames of its own, want its %d of the control tree and at most a flag to each of its %d peers", e, i, q.Frames, tree, len(ps)-1)
				}
			}
			// Every rank of this process is quiet: no socket but
			// those open before the job started (the real process's
			// check, for a job that is all in one process).
			for s := range socketFDs() {
				if !base[s] {
					t.Errorf("suspend %d: %s is open while every rank is suspended", e, s)
				}
			}
			// nor a shared segment mapped (CRIU would dump it).
			if maps, err := os.ReadFile("/proc/self/maps"); err != nil || strings.Contains(string(maps), "/memfd:gompi-sm") {
				t.Errorf("suspend %d: a gompi-sm segment is mapped while every rank is suspended (%v)", e, err)
			}
			if err := resumeAll(ps, time.Minute); err != nil {
				t.Errorf("resume %d: %v", e, err)
			}
			if t.Failed() {
				return
			}
		}
	})
	t.Logf("%d of %d suspensions came while the program ran", mid, suspends)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d: checksum %x with suspensions, %x without", i, got[i], want[i])
		}
	}
}

// TestSuspendCancelled: a suspension that cannot complete (one rank is
// never asked) ends with the callers' contexts and leaves the job
// working; a later one, with a larger epoch, completes.
func TestSuspendCancelled(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.crcp, func(t *testing.T) { suspendCancelled(t, pr.crcp, pr.way) })
	}
}

func suspendCancelled(t *testing.T, name string, way crcp.Quiesce) {
	const n = 4
	cfg := withCRCP(mpitest.Config{N: n, BTL: "tcp"}, name)
	tr := traffic{seed: rand.Uint64(), rounds: 120}
	if raceOn {
		tr.rounds = 40
	}
	t.Logf("seed %d", tr.seed)
	want := tr.job(t, cfg, nil)
	got := tr.job(t, cfg, func(ps []*mpi.Proc, rounds func() int) {
		_, errs := suspendAll(ps[:n-1], 1, way, 300*time.Millisecond)
		for i, err := range errs {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("rank %d: suspend without rank %d: %v, want the deadline", i, n-1, err)
			}
			if ps[i].Suspended() {
				t.Errorf("rank %d is suspended after its suspension was given up", i)
			}
		}
		_, errs = suspendAll(ps, 2, way, time.Minute)
		for i, err := range errs {
			if err != nil {
				t.Errorf("rank %d: the next suspension: %v", i, err)
			}
		}
		if err := resumeAll(ps, time.Minute); err != nil {
			t.Error(err)
		}
	})
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d: checksum %x, %x without suspensions", i, got[i], want[i])
		}
	}
}

// noRejoin is a runtime that cannot give new addresses (as the real
// rank client cannot yet).
type noRejoin struct{ mpi.Bootstrap }

// opaqueCRCP is a coordination protocol that cannot say how to quiesce
// for a transparent checkpoint (no crcp.Transparent).
type opaqueCRCP struct{}

func (opaqueCRCP) Sent(crcp.Envelope)     {}
func (opaqueCRCP) Received(crcp.Envelope) {}
func (opaqueCRCP) FTEvent(context.Context, crs.State, crcp.Channels) error {
	return nil
}

// TestSuspendErrors: misuse and states where a suspension cannot be
// made give clear errors, and the rank runs on.
func TestSuspendErrors(t *testing.T) {
	const n = 3
	tests := []struct {
		name string
		wrap func(int, mpi.Bootstrap) mpi.Bootstrap
		run  func(p *mpi.Proc) error
		want error
	}{
		{"resume without suspend", nil, func(p *mpi.Proc) error { return p.Resume(t.Context()) }, mpi.ErrArg},
		{"suspend twice", nil, func(p *mpi.Proc) error {
			if _, err := p.Suspend(t.Context(), 1); err != nil {
				return fmt.Errorf("first: %w", err)
			}
			_, err := p.Suspend(t.Context(), 2)
			if rerr := p.Resume(t.Context()); rerr != nil {
				return rerr
			}
			return err
		}, mpi.ErrArg},
		{"epoch reused", nil, func(p *mpi.Proc) error {
			if _, err := p.Suspend(t.Context(), 5); err != nil {
				return fmt.Errorf("first: %w", err)
			}
			if err := p.Resume(t.Context()); err != nil {
				return err
			}
			_, err := p.Suspend(t.Context(), 5)
			return err
		}, mpi.ErrArg},
		{"runtime without remodex", func(_ int, b mpi.Bootstrap) mpi.Bootstrap { return noRejoin{b} }, func(p *mpi.Proc) error {
			_, err := p.Suspend(t.Context(), 1)
			return err
		}, errors.ErrUnsupported},
		{"after a peer failed", nil, func(p *mpi.Proc) error {
			p.MarkFailed((p.Rank()+1)%n, errors.New("reported by the test"))
			_, err := p.Suspend(t.Context(), 1)
			return err
		}, mpi.ErrProcFailed},
		{"crcp that cannot quiesce", nil, func(p *mpi.Proc) error {
			p.SetCRCP(opaqueCRCP{})
			defer p.SetCRCP(nil)
			_, err := p.Suspend(t.Context(), 1)
			if err != nil && !strings.Contains(err.Error(), "select crcp bkmrk or flag") {
				return fmt.Errorf("%w (the error does not say what to select)", err)
			}
			return err
		}, errors.ErrUnsupported},
		{"after finalize", nil, func(p *mpi.Proc) error {
			if err := p.Finalize(); err != nil {
				return fmt.Errorf("finalize: %w", err)
			}
			_, err := p.Suspend(t.Context(), 1)
			return err
		}, mpi.ErrStopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mpitest.Config{N: n, BTL: "tcp", Wrap: tt.wrap, AllowFailures: true}
			var mu sync.Mutex
			got := make([]error, n)
			mpitest.Start(cfg, func(p *mpi.Proc) error {
				err := tt.run(p)
				mu.Lock()
				got[p.Rank()] = err
				mu.Unlock()
				if p.Finalizing() || errors.Is(tt.want, mpi.ErrProcFailed) {
					return nil
				}
				// The rank still works: a barrier of all.
				return p.World().Barrier()
			})
			for r, err := range got {
				if !errors.Is(err, tt.want) {
					t.Errorf("rank %d: %v, want an error wrapping %v", r, err, tt.want)
				}
			}
		})
	}
}

// BenchmarkSuspend measures a suspension by each protocol side by side:
// from the request to every rank quiet (every socket closed), with every
// rank's application blocked in a receive and connections open between
// every pair; then the resume. ctl-frames is the library's own frames
// every rank together wrote for one suspension (the protocol's extra
// messages).
func BenchmarkSuspend(b *testing.B) {
	for _, n := range []int{4, 8, 16} {
		for _, btl := range []string{"tcp", "uds"} {
			for _, pr := range protocols {
				b.Run(fmt.Sprintf("ranks=%d/%s/%s", n, btl, pr.crcp), func(b *testing.B) {
					benchSuspend(b, withCRCP(mpitest.Config{N: n, BTL: btl}, pr.crcp), pr.way)
				})
			}
		}
	}
}

func benchSuspend(b *testing.B, cfg mpitest.Config, way crcp.Quiesce) {
	n := cfg.N
	ps := make([]*mpi.Proc, n)
	var mu sync.Mutex
	started := holdAll(n)
	var quiet, resume time.Duration
	var frames atomic.Uint64
	mpitest.RunWith(b, cfg, func(p *mpi.Proc) error {
		w := p.World()
		mu.Lock()
		ps[p.Rank()] = p
		mu.Unlock()
		started()
		if p.Rank() == 0 {
			b.ResetTimer()
		}
		for i := 0; i < b.N; i++ {
			// Connections both ways between every pair, as a running
			// job has.
			if err := w.Alltoall(make([]byte, n), make([]byte, n)); err != nil {
				return err
			}
			if p.Rank() != 0 {
				// Blocked in a receive while the runtime suspends.
				if _, err := w.Recv(nil, 0, 1); err != nil {
					return err
				}
				continue
			}
			t0 := time.Now()
			epoch := uint64(i + 1)
			for r, err := range allRanks(ps, time.Minute, func(ctx context.Context, p *mpi.Proc) error {
				q, err := p.Suspend(ctx, epoch)
				if err == nil && q.Way != way {
					err = fmt.Errorf("quiet by %v, want %v", q.Way, way)
				}
				frames.Add(q.Frames)
				return err
			}) {
				if err != nil {
					return fmt.Errorf("suspend, rank %d: %w", r, err)
				}
			}
			t1 := time.Now()
			if err := resumeAll(ps, time.Minute); err != nil {
				return err
			}
			quiet += t1.Sub(t0)
			resume += time.Since(t1)
			for q := 1; q < n; q++ {
				if err := w.Send(nil, q, 1); err != nil {
					return err
				}
			}
		}
		return nil
	})
	b.StopTimer()
	b.ReportMetric(float64(quiet.Microseconds())/1000/float64(b.N), "ms-quiet")
	b.ReportMetric(float64(resume.Microseconds())/1000/float64(b.N), "ms-resume")
	b.ReportMetric(float64(frames.Load())/float64(b.N), "ctl-frames")
}

// movingBoot is the runtime of a rank whose process may be restored on
// another node: Node says where it is now.
type movingBoot struct {
	mpi.Bootstrap
	node *atomic.Pointer[string]
}

func (b movingBoot) Node() string {
	if n := b.node.Load(); n != nil {
		return *n
	}
	return b.Bootstrap.Node()
}

func (b movingBoot) Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error) {
	return b.Bootstrap.(mpi.Rejoiner).Remodex(ctx, epoch, mine)
}

// TestResumeOnAnotherNode: ranks resumed on another node (as a restore
// elsewhere would) reach the others over the transports that fit the new
// placement, uds within a node and tcp between nodes, and the program's
// results are those of a run that never moved.
func TestResumeOnAnotherNode(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.crcp, func(t *testing.T) { resumeOnAnotherNode(t, pr.crcp, pr.way) })
	}
}

func resumeOnAnotherNode(t *testing.T, name string, way crcp.Quiesce) {
	const n = 4
	nodes := make([]atomic.Pointer[string], n)
	cfg := withCRCP(mpitest.Config{N: n, BTL: "tcp,uds", Wrap: func(r int, b mpi.Bootstrap) mpi.Bootstrap {
		return movingBoot{Bootstrap: b, node: &nodes[r]}
	}}, name)
	tr := traffic{seed: rand.Uint64(), rounds: 60}
	t.Logf("seed %d", tr.seed)
	want := tr.job(t, cfg, nil)
	// Ranks 2 and 3 move to node b, then back, then rank 0 moves.
	placements := [][]string{{"a", "a", "b", "b"}, {"a", "a", "a", "a"}, {"c", "a", "a", "a"}}
	got := tr.job(t, cfg, func(ps []*mpi.Proc, rounds func() int) {
		for e, place := range placements {
			_, errs := suspendAll(ps, uint64(e+1), way, time.Minute)
			for i, err := range errs {
				if err != nil {
					t.Errorf("suspend %d, rank %d: %v", e+1, i, err)
				}
			}
			for r := range place {
				nodes[r].Store(&place[r])
			}
			if err := resumeAll(ps, time.Minute); err != nil {
				t.Fatalf("resume %d: %v", e+1, err)
			}
			for i, p := range ps {
				for j := range ps {
					want := "tcp"
					switch {
					case i == j:
						want = "self"
					case place[i] == place[j]:
						want = "uds"
					}
					if got := p.Transport(j); got != want || p.Node() != place[i] {
						t.Errorf("placement %d: rank %d on %s reaches rank %d over %s, want %s on %s", e, i, p.Node(), j, got, want, place[i])
					}
				}
			}
		}
	})
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rank %d: checksum %x, %x without moves", i, got[i], want[i])
		}
	}
}

// TestSuspendSingleton: a rank alone has no socket to close; it suspends
// and resumes without a runtime that can exchange addresses again.
func TestSuspendSingleton(t *testing.T) {
	cfg := mpitest.Config{N: 1, BTL: "tcp", Wrap: func(_ int, b mpi.Bootstrap) mpi.Bootstrap { return noRejoin{b} }}
	mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
		if _, err := p.Suspend(t.Context(), 1); err != nil || !p.Suspended() {
			return fmt.Errorf("suspend: %v (suspended: %v)", err, p.Suspended())
		}
		if err := p.Resume(t.Context()); err != nil || p.Suspended() {
			return fmt.Errorf("resume: %v (suspended: %v)", err, p.Suspended())
		}
		buf := make([]byte, 2)
		if _, err := p.World().Sendrecv([]byte("hi"), 0, 1, buf, 0, 1); err != nil || string(buf) != "hi" {
			return fmt.Errorf("after resume: %q, %v", buf, err)
		}
		return nil
	})
}
