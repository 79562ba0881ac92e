package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"time"

	"gompi/mpi"
)

// The streams a message travels on: each has its own communicator, so
// that the order of one pair's messages on it is MPI's to keep.
const (
	streamWorld = iota // the rounds' point-to-point traffic
	streamSide         // one message every sideEvery rounds to the right neighbour, received by a goroutine
	streamLazy         // non-blocking sends and receives completed rounds later
	nStreams
)

var streamNames = [nStreams]string{"world", "side", "lazy"}

// sideEvery is how many rounds apart the side messages go: the side
// goroutine sits in Recv between them.
const sideEvery = 7

// maxSize bounds a message's content: above the size read straight into
// a posted receive (32 KiB) and the largest send written inline.
const maxSize = 96 << 10

// header is a message's sequence number on its stream, pair and the
// content's length, before the content.
const header = 16

// pairLog is what one rank sent another (or received from it) on one
// stream: how many messages, and a running hash of them in order.
type pairLog struct {
	n uint64
	h hash.Hash64
}

// traffic is one rank's program and its books.
type traffic struct {
	o             options
	w, side, lazy *mpi.Comm
	me, n         int
	sent, recvd   [nStreams][]pairLog
	coll          hash.Hash64 // the collectives' results, in order
	pending       []pendingRecv
	pendingSends  []*mpi.Request
	sideDone      chan error
	messages      uint64 // every rank's messages, known after finish
	nSides        int
	stalls        [nParts]int // the rounds' parts that took stallBound or more
}

// pendingRecv is a lazy receive posted and not yet completed.
type pendingRecv struct {
	req *mpi.Request
	buf []byte
	src int
}

func newTraffic(w *mpi.Comm, o options) (*traffic, error) {
	t := &traffic{o: o, w: w, me: w.Rank(), n: w.Size()}
	t.initBooks()
	var err error
	if t.side, err = w.Dup(); err != nil {
		return nil, err
	}
	if t.lazy, err = w.Dup(); err != nil {
		return nil, err
	}
	for r := sideEvery - 1; r < o.rounds; r += sideEvery {
		t.nSides++
	}
	t.sideDone = make(chan error, 1)
	// The side receiver is the program's: it ends after its nSides
	// messages, which the loop sends; finish waits for it.
	go func() { t.sideDone <- t.sideRecv() }()
	return t, nil
}

// initBooks makes the empty books.
func (t *traffic) initBooks() {
	t.coll = fnv.New64a()
	for s := range nStreams {
		t.sent[s], t.recvd[s] = make([]pairLog, t.n), make([]pairLog, t.n)
		for q := range t.n {
			t.sent[s][q].h, t.recvd[s][q].h = fnv.New64a(), fnv.New64a()
		}
	}
}

// content is what src sends dst as message k of stream s: drawn from the
// seed, so the receiver knows it.
func (t *traffic) content(s, src, dst int, k uint64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(t.o.seed^uint64(s)<<56^uint64(src)<<40^uint64(dst)<<24, k))
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := size &^ 7; i < size; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// message makes the next message of stream s to dst and enters it in the
// books as sent.
func (t *traffic) message(s, dst, size int) []byte {
	l := &t.sent[s][dst]
	b := binary.LittleEndian.AppendUint64(nil, l.n)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = append(b, t.content(s, t.me, dst, l.n, size)...)
	l.h.Write(b)
	l.n++
	return b
}

// received checks a message of stream s from src (b, as received) is the
// one due next, with the right content, and enters it in the books.
func (t *traffic) received(s, src int, b []byte) error {
	l := &t.recvd[s][src]
	if len(b) < header {
		return fmt.Errorf("stream %s: a %d-byte message from %d, shorter than its header", streamNames[s], len(b), src)
	}
	k, size := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if k != l.n {
		return fmt.Errorf("stream %s: message %d from %d arrived when %d was due (lost, duplicated or reordered)", streamNames[s], k, src, l.n)
	}
	if size != uint64(len(b)-header) || !bytes.Equal(b[header:], t.content(s, src, t.me, k, int(size))) {
		return fmt.Errorf("stream %s: message %d from %d has the wrong content (%d bytes)", streamNames[s], k, src, len(b)-header)
	}
	l.h.Write(b)
	l.n++
	return nil
}

// recvdWorld is how many messages of the world stream arrived.
func (t *traffic) recvdWorld() uint64 {
	var n uint64
	for _, l := range t.recvd[streamWorld] {
		n += l.n
	}
	return n
}

// sideRecv receives the side stream's messages from the left neighbour,
// blocked in Recv for sideEvery rounds between them.
func (t *traffic) sideRecv() error {
	left := (t.me - 1 + t.n) % t.n
	buf := make([]byte, header+8)
	for range t.nSides {
		st, err := t.side.Recv(buf, left, 5)
		if err != nil {
			return fmt.Errorf("side receive: %w", err)
		}
		if err := t.received(streamSide, left, buf[:st.Count]); err != nil {
			return err
		}
	}
	return nil
}

// size draws a message's size: small, a few KiB, or up to maxSize.
func size(r *rand.Rand) int {
	switch r.IntN(3) {
	case 0:
		return r.IntN(64)
	case 1:
		return r.IntN(4 << 10)
	default:
		return r.IntN(maxSize)
	}
}

// Where a round's time goes, for the stall counts: the laggard's hold,
// completing the lazy stream, and the round's operation.
const (
	partHold = iota
	partLazy
	partFanIn
	partRing
	partExchange
	partColl
	partIColl
	nParts
)

var partNames = [nParts]string{"hold", "lazy", "fan-in", "ring", "exchange", "collective", "icollective"}

// stallBound is how long a part of a round takes only when something
// stopped the rank meanwhile (a checkpoint freezes it for about a second;
// a round's part takes milliseconds).
const stallBound = 250 * time.Millisecond

// timed runs f as part p of a round, counting it as stalled when it took
// stallBound or more.
func (t *traffic) timed(p int, f func() error) error {
	start := time.Now()
	err := f()
	if time.Since(start) >= stallBound {
		t.stalls[p]++
	}
	return err
}

// round runs one round: every rank draws the same operation, and the
// laggard waits before joining it.
func (t *traffic) round(round int) error {
	r := rand.New(rand.NewPCG(t.o.seed, uint64(round)))
	// One Float64 draw whatever the pace: the pattern is the seed's alone.
	laggard, hold := r.IntN(t.n), time.Duration(2*r.Float64()*float64(t.o.pace))
	if t.me == laggard && hold > 0 && t.pacing() {
		// The others wait for it inside the operation.
		t.timed(partHold, func() error { time.Sleep(hold); return nil })
	}
	if round%sideEvery == sideEvery-1 {
		if err := t.side.Send(t.message(streamSide, (t.me+1)%t.n, 8), (t.me+1)%t.n, 5); err != nil {
			return err
		}
	}
	if err := t.timed(partLazy, func() error { return t.lazyRound(r) }); err != nil {
		return err
	}
	tag := round % 30000 // a round's own tag: AnySource never takes another round's
	switch op := r.IntN(10); {
	case op < 2:
		return t.timed(partFanIn, func() error { return t.fanIn(r, tag) })
	case op < 3:
		return t.timed(partRing, func() error { return t.ring(r, tag) })
	case op < 5:
		return t.timed(partExchange, func() error { return t.exchange(r, tag) })
	case op < 7:
		return t.timed(partColl, func() error { return t.blockingColl(r, round) })
	default:
		return t.timed(partIColl, func() error { return t.nonBlockingColl(r, round) })
	}
}

// pacing reports whether the laggard is to be held: -pace-while's file
// exists (or none is named).
func (t *traffic) pacing() bool {
	if t.o.paceWhile == "" {
		return true
	}
	_, err := os.Stat(t.o.paceWhile)
	return err == nil
}

// fanIn: every rank sends a few messages to a root, blocking, which
// receives them source by source (or from AnySource): the root sits in
// Recv while the laggard holds back.
func (t *traffic) fanIn(r *rand.Rand, tag int) error {
	root, m, any := r.IntN(t.n), 1+r.IntN(3), r.IntN(2) == 0
	sizes := make([]int, m)
	for k := range sizes {
		sizes[k] = size(r)
	}
	if t.me != root {
		for k := range m {
			if err := t.w.Send(t.message(streamWorld, root, sizes[k]), root, tag); err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]byte, header+maxSize)
	for src := range t.n {
		if src == root {
			continue
		}
		for range m {
			from := src
			if any {
				from = mpi.AnySource
			}
			st, err := t.w.Recv(buf, from, tag)
			if err != nil {
				return err
			}
			if err := t.received(streamWorld, st.Source, buf[:st.Count]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ring: a blocking Sendrecv with the rank k places on.
func (t *traffic) ring(r *rand.Rand, tag int) error {
	k, sz := 1+r.IntN(t.n-1+boolInt(t.n == 1)), size(r)
	dst, src := (t.me+k)%t.n, (t.me-k%t.n+t.n)%t.n
	buf := make([]byte, header+maxSize)
	st, err := t.w.Sendrecv(t.message(streamWorld, dst, sz), dst, tag, buf, src, tag)
	if err != nil {
		return err
	}
	return t.received(streamWorld, src, buf[:st.Count])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exchange: every rank posts non-blocking receives from every other
// (AnySource), sends them a few messages each without blocking, and waits
// for all: each sender's messages must come in order.
func (t *traffic) exchange(r *rand.Rand, tag int) error {
	m := 1 + r.IntN(3)
	sizes := make([]int, m)
	for k := range sizes {
		sizes[k] = size(r)
	}
	var recvs, sends []*mpi.Request
	bufs := make([][]byte, 0, m*(t.n-1))
	for range m * (t.n - 1) {
		b := make([]byte, header+maxSize)
		rq, err := t.w.Irecv(b, mpi.AnySource, tag)
		if err != nil {
			return err
		}
		recvs, bufs = append(recvs, rq), append(bufs, b)
	}
	for d := range t.n {
		for k := 0; k < m && d != t.me; k++ {
			rq, err := t.w.Isend(t.message(streamWorld, d, sizes[k]), d, tag)
			if err != nil {
				return err
			}
			sends = append(sends, rq)
		}
	}
	sts, err := mpi.Waitall(recvs)
	if err != nil {
		return err
	}
	for i, st := range sts {
		if err := t.received(streamWorld, st.Source, bufs[i][:st.Count]); err != nil {
			return err
		}
	}
	_, err = mpi.Waitall(sends)
	return err
}

// lazyRound posts, in some rounds, a non-blocking receive from the left
// neighbour and a send to the right one on the lazy stream, and in others
// completes what is outstanding: requests stay pending across rounds
// (and so across checkpoints).
func (t *traffic) lazyRound(r *rand.Rand) error {
	switch r.IntN(4) {
	case 0:
		left, right := (t.me-1+t.n)%t.n, (t.me+1)%t.n
		buf := make([]byte, header+maxSize)
		rq, err := t.lazy.Irecv(buf, left, 9)
		if err != nil {
			return err
		}
		t.pending = append(t.pending, pendingRecv{rq, buf, left})
		sq, err := t.lazy.Isend(t.message(streamLazy, right, size(r)), right, 9)
		if err != nil {
			return err
		}
		t.pendingSends = append(t.pendingSends, sq)
	case 1:
		return t.settleLazy()
	}
	return nil
}

// settleLazy completes the lazy stream's outstanding requests, in the
// order they were posted.
func (t *traffic) settleLazy() error {
	for _, p := range t.pending {
		st, err := p.req.Wait()
		if err != nil {
			return err
		}
		if err := t.received(streamLazy, p.src, p.buf[:st.Count]); err != nil {
			return err
		}
	}
	t.pending = t.pending[:0]
	_, err := mpi.Waitall(t.pendingSends)
	t.pendingSends = t.pendingSends[:0]
	return err
}

// blockingColl runs one blocking collective, checks its result and
// enters it in the books.
func (t *traffic) blockingColl(r *rand.Rand, round int) error {
	root := r.IntN(t.n)
	switch r.IntN(4) {
	case 0:
		return t.allreduce(round, 1+r.IntN(4000))
	case 1:
		buf := make([]byte, size(r))
		want := t.content(streamWorld, root, -1, uint64(round), len(buf))
		if t.me == root {
			copy(buf, want)
		}
		if err := t.w.Bcast(buf, root); err != nil {
			return err
		}
		return t.collResult("bcast", buf, want)
	case 2:
		b := 1 + r.IntN(3000)
		send, recv, want := make([]byte, b*t.n), make([]byte, b*t.n), make([]byte, 0, b*t.n)
		for q := range t.n {
			copy(send[q*b:], t.content(streamWorld, t.me, q, uint64(round), b))
			want = append(want, t.content(streamWorld, q, t.me, uint64(round), b)...)
		}
		if err := t.w.Alltoall(send, recv); err != nil {
			return err
		}
		return t.collResult("alltoall", recv, want)
	default:
		if err := t.w.Barrier(); err != nil {
			return err
		}
		return t.collResult("barrier", nil, nil)
	}
}

// allreduce sums m integers every rank derives from the round and its
// rank, checks and books the result.
func (t *traffic) allreduce(round, m int) error {
	send, got := make([]int64, m), make([]int64, m)
	for i := range send {
		send[i] = int64(round*1000 + t.me*7 + i)
	}
	want := make([]byte, 0, 8*m)
	for i := range m {
		want = binary.LittleEndian.AppendUint64(want, uint64(int64(t.n*(round*1000+i)+7*t.n*(t.n-1)/2)))
	}
	if err := mpi.Allreduce(t.w, send, got, mpi.Sum); err != nil {
		return err
	}
	b := make([]byte, 0, 8*m)
	for _, v := range got {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return t.collResult("allreduce", b, want)
}

// collResult checks a collective's result and folds it into the books.
func (t *traffic) collResult(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: wrong result", what)
	}
	t.coll.Write([]byte(what))
	t.coll.Write(got)
	return nil
}

// nonBlockingColl overlaps an Iallreduce, an Ibarrier and an Ibcast and
// waits for them in another order than they started.
func (t *traffic) nonBlockingColl(r *rand.Rand, round int) error {
	m := 1 + r.IntN(8000)
	send, got := make([]float64, m), make([]float64, m)
	for i := range send {
		send[i] = float64(t.me + i)
	}
	r1, err := mpi.Iallreduce(t.w, send, got, mpi.Sum)
	if err != nil {
		return err
	}
	r2, err := t.w.Ibarrier()
	if err != nil {
		return err
	}
	root := r.IntN(t.n)
	buf := make([]byte, size(r))
	want := t.content(streamWorld, root, -2, uint64(round), len(buf))
	if t.me == root {
		copy(buf, want)
	}
	r3, err := t.w.Ibcast(buf, root)
	if err != nil {
		return err
	}
	if _, err := mpi.Waitall([]*mpi.Request{r3, r2, r1}); err != nil {
		return err
	}
	sum := make([]byte, 0, 8*m)
	wantSum := make([]byte, 0, 8*m)
	for i := range got {
		sum = binary.LittleEndian.AppendUint64(sum, uint64(got[i]))
		wantSum = binary.LittleEndian.AppendUint64(wantSum, uint64(float64(t.n*i+t.n*(t.n-1)/2)))
	}
	if err := t.collResult("iallreduce", sum, wantSum); err != nil {
		return err
	}
	return t.collResult("ibcast", buf, want)
}

// finish completes what is outstanding, compares every rank's books of
// what it sent with the receivers' books of what arrived, and returns the
// digest (rank 0; "" elsewhere).
func (t *traffic) finish() (string, error) {
	if err := t.settleLazy(); err != nil {
		return "", err
	}
	if err := <-t.sideDone; err != nil {
		return "", err
	}
	const entry = 16 * nStreams
	send, recv := make([]byte, entry*t.n), make([]byte, entry*t.n)
	for q := range t.n {
		for s := range nStreams {
			b := send[q*entry+16*s:]
			binary.LittleEndian.PutUint64(b, t.sent[s][q].n)
			binary.LittleEndian.PutUint64(b[8:], t.sent[s][q].h.Sum64())
		}
	}
	if err := t.w.Alltoall(send, recv); err != nil {
		return "", err
	}
	mine := fnv.New64a()
	var errs []error
	var n uint64
	for q := range t.n {
		for s := range nStreams {
			b := recv[q*entry+16*s:]
			sentN, sentH := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
			got := t.recvd[s][q]
			if sentN != got.n || sentH != got.h.Sum64() {
				errs = append(errs, fmt.Errorf("stream %s: rank %d sent %d messages (hash %016x), %d arrived (hash %016x)", streamNames[s], q, sentN, sentH, got.n, got.h.Sum64()))
			}
			mine.Write(b[:16])
			n += got.n
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return t.digest(mine.Sum(t.coll.Sum(nil)), n)
}

// digest gathers every rank's books at rank 0 and hashes them.
func (t *traffic) digest(mine []byte, n uint64) (string, error) {
	all := make([]byte, len(mine)*t.n)
	if err := t.w.Gather(mine, all, 0); err != nil {
		return "", err
	}
	total := make([]int64, 1)
	if err := mpi.Allreduce(t.w, []int64{int64(n)}, total, mpi.Sum); err != nil {
		return "", err
	}
	t.messages = uint64(total[0])
	if err := errors.Join(t.side.Free(), t.lazy.Free()); err != nil {
		return "", err
	}
	if t.me != 0 {
		return "", nil
	}
	h := fnv.New64a()
	h.Write(all)
	return fmt.Sprintf("%016x", h.Sum64()), nil
}
