package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"gompi/mpi"
)

// Tags of the manager/worker protocol.
const (
	tagWork   = 1 // manager -> worker: an item (8 bytes)
	tagResult = 2 // worker -> manager: item and value (16 bytes)
	tagShrink = 3 // manager -> worker: a worker failed, shrink with me
	tagStop   = 4 // manager -> worker: no more work
)

// manager is the world rank of the manager; it stays rank 0 of every
// communicator Shrink makes, since Shrink keeps the order.
const manager = 0

// hooks are how a worker fails on request: main kills the process; a
// test does what its job can survive.
type hooks struct {
	crash func()
	pause func(item int)
}

type config struct {
	items      int
	cost       int
	work       time.Duration
	shrink     bool
	crashRank  int
	crashAt    int
	pauseRank  int
	pauseAt    int
	progressEv int
}

func run(p *mpi.Proc, args []string, out io.Writer, h hooks) error {
	fs := flag.NewFlagSet("mgrwork", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg config
	fs.IntVar(&cfg.items, "items", 100, "work items")
	fs.IntVar(&cfg.cost, "cost", 1000, "hashing rounds per item (how much computing an item takes)")
	fs.DurationVar(&cfg.work, "work", 0, "extra time each item takes (for demos)")
	fs.BoolVar(&cfg.shrink, "shrink", true, "after a failure, shrink the communicator and go on receiving from any source; off, wait on each worker's result separately")
	fs.IntVar(&cfg.crashRank, "crash-rank", -1, "worker that crashes (SIGKILL) at its -crash-at-th item")
	fs.IntVar(&cfg.crashAt, "crash-at", 1, "with -crash-rank: the item count at which it crashes")
	fs.IntVar(&cfg.pauseRank, "pause-rank", -1, "worker that stops at its -pause-at-th item, printing its pid, until killed")
	fs.IntVar(&cfg.pauseAt, "pause-at", 1, "with -pause-rank: the item count at which it stops")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.items < 0 || cfg.cost < 0 || cfg.crashAt < 1 || cfg.pauseAt < 1 {
		return fmt.Errorf("-items and -cost must be >= 0, -crash-at and -pause-at >= 1")
	}
	cfg.progressEv = max(cfg.items/10, 1)
	if p.Rank() == manager {
		return manage(p, cfg, out)
	}
	return work(p, cfg, h)
}

// value is the result of one item: a hash chain, cost rounds long.
func value(item, cost int) uint64 {
	x := uint64(item) + 0x9e3779b97f4a7c15
	for range cost + 1 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		x = z ^ (z >> 31)
	}
	return x
}

// checksum combines the results in item order.
func checksum(results []uint64) uint64 {
	var sum uint64
	for i, v := range results {
		sum = (sum*1099511628211 + v) ^ uint64(i)
	}
	return sum
}

// --- manager ------------------------------------------------------------------

type mgr struct {
	p        *mpi.Proc
	cfg      config
	out      io.Writer
	c        *mpi.Comm
	queue    []int       // items not handed out, next first
	assigned map[int]int // busy worker (world rank) -> its item
	idle     []int       // live workers with nothing to do
	results  []uint64
	got      []bool
	done     int
	by       map[int]int // items done per world rank
	recvs    map[int]*mpi.Request
	bufs     map[int][]byte
}

func manage(p *mpi.Proc, cfg config, out io.Writer) error {
	m := &mgr{p: p, cfg: cfg, out: out, c: p.World(), assigned: map[int]int{},
		results: make([]uint64, cfg.items), got: make([]bool, cfg.items), by: map[int]int{},
		recvs: map[int]*mpi.Request{}, bufs: map[int][]byte{}}
	for i := range cfg.items {
		m.queue = append(m.queue, i)
	}
	mode := "shrink on failure"
	if !cfg.shrink {
		mode = "one receive per worker"
	}
	fmt.Fprintf(out, "mgrwork: %d ranks, %d workers, %d items, %s\n", p.Size(), p.Size()-1, cfg.items, mode)
	for w := 1; w < p.Size(); w++ {
		if err := m.hand(w); err != nil {
			return err
		}
	}
	for m.done < cfg.items {
		if len(m.assigned) == 0 {
			// No worker left: the manager does the rest itself.
			for len(m.queue) > 0 {
				item := m.queue[0]
				m.queue = m.queue[1:]
				m.record(manager, item, value(item, cfg.cost))
			}
			break
		}
		var err error
		if cfg.shrink {
			err = m.collectAny()
		} else {
			err = m.collectEach()
		}
		if err != nil {
			return err
		}
	}
	for _, w := range m.idle {
		if err := m.c.Send(nil, commRank(m.c, w), tagStop); err != nil && !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("stop worker %d: %w", w, err)
		}
	}
	var per []string
	for _, w := range slices.Sorted(maps.Keys(m.by)) {
		per = append(per, fmt.Sprintf("%d:%d", w, m.by[w]))
	}
	fmt.Fprintf(out, "mgrwork: items per rank: %s\n", strings.Join(per, " "))
	fmt.Fprintf(out, "mgrwork: done: %d items, checksum %016x\n", cfg.items, checksum(m.results))
	return nil
}

// hand gives worker w (a world rank) the next item, or leaves it idle.
// A worker that failed has its item put back.
func (m *mgr) hand(w int) error {
	if len(m.queue) == 0 {
		m.idle = append(m.idle, w)
		return nil
	}
	item := m.queue[0]
	m.queue = m.queue[1:]
	err := m.c.Send(binary.LittleEndian.AppendUint64(nil, uint64(item)), commRank(m.c, w), tagWork)
	if errors.Is(err, mpi.ErrProcFailed) {
		m.queue = append([]int{item}, m.queue...)
		m.lost(w, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("hand item %d to worker %d: %w", item, w, err)
	}
	m.assigned[w] = item
	if !m.cfg.shrink {
		m.bufs[w] = make([]byte, 16)
		rq, err := m.c.Irecv(m.bufs[w], commRank(m.c, w), tagResult)
		if err != nil {
			return err
		}
		m.recvs[w] = rq
	}
	return nil
}

// lost forgets a failed worker and puts its item back at the head of the
// queue.
func (m *mgr) lost(w int, why error) {
	item, busy := m.assigned[w]
	delete(m.assigned, w)
	delete(m.recvs, w)
	m.idle = slices.DeleteFunc(m.idle, func(x int) bool { return x == w })
	if busy {
		m.queue = append([]int{item}, m.queue...)
		fmt.Fprintf(m.out, "mgrwork: worker %d failed (%v); item %d goes back to the queue\n", w, why, item)
	} else {
		fmt.Fprintf(m.out, "mgrwork: worker %d failed (%v)\n", w, why)
	}
}

// result takes a result message from worker w and gives it more work.
func (m *mgr) result(w int, b []byte) error {
	item, v := int(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:])
	if want, ok := m.assigned[w]; !ok || want != item {
		return fmt.Errorf("worker %d sent the result of item %d, it was given %d", w, item, want)
	}
	delete(m.assigned, w)
	m.record(w, item, v)
	return m.hand(w)
}

func (m *mgr) record(w, item int, v uint64) {
	if m.got[item] {
		return
	}
	m.got[item], m.results[item] = true, v
	m.done++
	m.by[w]++
	if m.done%m.cfg.progressEv == 0 {
		fmt.Fprintf(m.out, "mgrwork: %d/%d items done\n", m.done, m.cfg.items)
	}
}

// collectAny receives the next result from any worker. When a member of
// the communicator has failed, receiving from any source fails until the
// survivors shrink: the manager collects what the busy survivors are
// computing, asks them to shrink, and goes on with the new communicator.
func (m *mgr) collectAny() error {
	buf := make([]byte, 16)
	st, err := m.c.Recv(buf, mpi.AnySource, tagResult)
	if err == nil {
		return m.result(m.c.WorldRank(st.Source), buf)
	}
	if !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("receive a result: %w", err)
	}
	if w, ok := mpi.RankOf(err); ok {
		if _, busy := m.assigned[w]; busy || slices.Contains(m.idle, w) {
			m.lost(w, err)
		}
	}
	// The busy survivors finish their items on the old communicator.
	for _, w := range slices.Sorted(maps.Keys(m.assigned)) {
		st, err := m.c.Recv(buf, commRank(m.c, w), tagResult)
		switch {
		case errors.Is(err, mpi.ErrProcFailed):
			m.lost(w, err)
			continue
		case err != nil:
			return fmt.Errorf("receive the result of worker %d: %w", w, err)
		}
		item := int(binary.LittleEndian.Uint64(buf))
		if want := m.assigned[w]; item != want || st.Count != 16 {
			return fmt.Errorf("worker %d sent the result of item %d, it was given %d", w, item, want)
		}
		delete(m.assigned, w)
		m.record(w, item, binary.LittleEndian.Uint64(buf[8:]))
		m.idle = append(m.idle, w)
	}
	// Every survivor now waits for the manager: shrink together.
	for _, w := range slices.Clone(m.idle) {
		if err := m.c.Send(nil, commRank(m.c, w), tagShrink); errors.Is(err, mpi.ErrProcFailed) {
			m.lost(w, err)
		} else if err != nil {
			return fmt.Errorf("ask worker %d to shrink: %w", w, err)
		}
	}
	nc, err := m.c.Shrink()
	if err != nil {
		return fmt.Errorf("shrink: %w", err)
	}
	m.c = nc
	// The agreement may have found more failed workers than this rank knew.
	var live []int
	for r := range nc.Size() {
		if w := nc.WorldRank(r); w != manager {
			live = append(live, w)
		}
	}
	for _, w := range m.idle {
		if !slices.Contains(live, w) {
			m.lost(w, fmt.Errorf("left out by Shrink: %w", mpi.ErrProcFailed))
		}
	}
	fmt.Fprintf(m.out, "mgrwork: shrank the communicator to %d ranks (workers %v)\n", nc.Size(), live)
	m.idle = nil
	for _, w := range live {
		if err := m.hand(w); err != nil {
			return err
		}
	}
	return nil
}

// collectEach waits for the first result of any busy worker, each with a
// receive of its own: a failed worker fails only its own.
func (m *mgr) collectEach() error {
	ws := slices.Sorted(maps.Keys(m.recvs))
	reqs := make([]*mpi.Request, len(ws))
	for i, w := range ws {
		reqs[i] = m.recvs[w]
	}
	i, _, err := mpi.Waitany(reqs)
	if i < 0 {
		return fmt.Errorf("wait for results: %w", err)
	}
	w := ws[i]
	delete(m.recvs, w)
	if errors.Is(err, mpi.ErrProcFailed) {
		m.lost(w, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("receive the result of worker %d: %w", w, err)
	}
	return m.result(w, m.bufs[w])
}

// --- worker -------------------------------------------------------------------

func work(p *mpi.Proc, cfg config, h hooks) error {
	c := p.World()
	me := p.Rank()
	buf := make([]byte, 8)
	n := 0
	for {
		st, err := c.Recv(buf, commRank(c, manager), mpi.AnyTag)
		if err != nil {
			return fmt.Errorf("worker %d: the manager is gone: %w", me, err)
		}
		switch st.Tag {
		case tagWork:
			n++
			item := int(binary.LittleEndian.Uint64(buf))
			if me == cfg.crashRank && n == cfg.crashAt {
				h.crash()
			}
			if me == cfg.pauseRank && n == cfg.pauseAt {
				h.pause(item)
			}
			if cfg.work > 0 {
				time.Sleep(cfg.work)
			}
			res := binary.LittleEndian.AppendUint64(nil, uint64(item))
			res = binary.LittleEndian.AppendUint64(res, value(item, cfg.cost))
			if err := c.Send(res, commRank(c, manager), tagResult); err != nil {
				return fmt.Errorf("worker %d: send the result of item %d: %w", me, item, err)
			}
		case tagShrink:
			if c, err = c.Shrink(); err != nil {
				return fmt.Errorf("worker %d: shrink: %w", me, err)
			}
		case tagStop:
			return nil
		default:
			return fmt.Errorf("worker %d: unexpected tag %d from the manager", me, st.Tag)
		}
	}
}

// commRank returns the rank in c of world rank w (-1 when not a member).
func commRank(c *mpi.Comm, w int) int {
	for r := range c.Size() {
		if c.WorldRank(r) == w {
			return r
		}
	}
	return -1
}
