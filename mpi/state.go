package mpi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// The library's own state, saved with each local snapshot and restored
// when a rank restarts: what the application cannot rebuild by itself.
// Connections, transports and goroutines are never saved; they are made
// afresh, possibly over another transport.
//
// Encoding (version 2): the magic line, then uvarints (varints for signed
// values) in this order: version, rank, size, next context id; the
// creation log (each entry's remote group after its members: new in
// version 2); each communicator's collective count; the per-context
// sequence numbers (non-zero ones only); per-peer message totals; the
// unexpected messages in arrival order per context; a CRC-32C of all that.

const stateMagic = "gompi mpi state\n"

const stateVersion = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrState is wrapped when saved library state cannot be restored.
var ErrState = errors.New("bad library state")

type savedState struct {
	rank, size int
	nextCtx    uint64
	log        []LogEntry
	collSeq    []handleSeq
	seqs       []ctxSeqs
	sent       []uint64
	recvd      []uint64
	msgs       []savedMsg
}

type handleSeq struct{ handle, seq uint64 }

type peerSeq struct {
	peer int
	seq  uint64
}

type ctxSeqs struct {
	ctx        uint64
	send, recv []peerSeq
}

type savedMsg struct {
	ctx  uint64
	src  int
	tag  int
	seq  uint64
	data []byte
}

// SaveState returns the library's state: unexpected messages (those the
// coordination protocol drained included), per-peer sequence numbers and
// totals, the communicator creation log and collective counts. Call it at
// a safe point: with receives posted, sends queued or non-blocking
// collectives running it fails with ErrBusy, naming them.
func (p *Proc) SaveState() ([]byte, error) {
	if err := p.refuseRevoked(); err != nil {
		return nil, fmt.Errorf("mpi: save state: %w", err)
	}
	if n := p.activeNB.Load(); n > 0 {
		return nil, fmt.Errorf("mpi: save state: %w: %d non-blocking collectives running", ErrBusy, n)
	}
	// Every peer stays locked to the end: no send starts meanwhile. One
	// deferred unlock for all (a defer per peer costs more than the
	// locks in a job of a thousand ranks).
	locked := 0
	defer func() {
		for _, pe := range p.peers[:locked] {
			pe.mu.Unlock()
		}
	}()
	for _, pe := range p.peers {
		pe.mu.Lock()
		locked++
		if pe.writing || len(pe.queue) > 0 {
			return nil, fmt.Errorf("mpi: save state: %w: sends to rank %d in progress", ErrBusy, pe.rank)
		}
	}
	p.commMu.Lock()
	defer p.commMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()

	st := savedState{rank: p.rank, size: p.size, nextCtx: p.nextCtx, log: p.clog}
	comms := []*Comm{p.world, p.control}
	for _, h := range sortedHandles(p.comms) {
		if h != ctxWorld {
			comms = append(comms, p.comms[h])
		}
	}
	for _, c := range comms {
		c.collMu.Lock()
		st.collSeq = append(st.collSeq, handleSeq{c.handle, c.collSeq})
		c.collMu.Unlock()
	}
	for _, ctx := range sortedHandles(p.ctxs) {
		cs := p.ctxs[ctx]
		if ctx>>1 == ctxControl>>1 {
			// The library's own traffic is not saved: a checkpoint's
			// last exchange crosses the ranks' saves (a rank may receive
			// it before saving, its sender sent it after), and after a
			// restart every rank starts the control context afresh.
			continue
		}
		if len(cs.posted) > 0 {
			r := cs.posted[0]
			return nil, fmt.Errorf("mpi: save state: %w: %d receives posted on context %d (first: source %d tag %d)", ErrBusy, len(cs.posted), ctx, r.src, r.tag)
		}
		s := ctxSeqs{ctx: ctx}
		for peer, q := range cs.sendSeq {
			if q != 0 {
				s.send = append(s.send, peerSeq{peer, q})
			}
		}
		for peer, q := range cs.recvSeq {
			if q != 0 {
				s.recv = append(s.recv, peerSeq{peer, q})
			}
		}
		if len(s.send)+len(s.recv) > 0 {
			st.seqs = append(st.seqs, s)
		}
		for _, m := range cs.unexp {
			st.msgs = append(st.msgs, savedMsg{ctx: ctx, src: m.src, tag: m.tag, seq: m.seq, data: m.data})
		}
	}
	st.sent, st.recvd = make([]uint64, p.size), make([]uint64, p.size)
	for i, pe := range p.peers {
		st.sent[i], st.recvd[i] = pe.sent.Load(), pe.recvd.Load()
	}
	return st.encode(), nil
}

func sortedHandles[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (st *savedState) encode() []byte { return st.encodeAs(stateVersion) }

// encodeAs writes version's encoding (tests write version 1 with it).
func (st *savedState) encodeAs(version uint64) []byte {
	b := []byte(stateMagic)
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	s := func(v int64) { b = binary.AppendVarint(b, v) }
	u(version)
	u(uint64(st.rank))
	u(uint64(st.size))
	u(st.nextCtx)
	u(uint64(len(st.log)))
	for _, e := range st.log {
		u(uint64(e.Op))
		u(e.Parent)
		s(int64(e.Color))
		s(int64(e.Key))
		u(e.Handle)
		u(e.NextCtx)
		lists := [][]int{e.Members, e.Remote}
		if version < 2 {
			lists = lists[:1]
		}
		for _, list := range lists {
			u(uint64(len(list)))
			for _, m := range list {
				u(uint64(m))
			}
		}
	}
	u(uint64(len(st.collSeq)))
	for _, c := range st.collSeq {
		u(c.handle)
		u(c.seq)
	}
	u(uint64(len(st.seqs)))
	for _, c := range st.seqs {
		u(c.ctx)
		for _, list := range [][]peerSeq{c.send, c.recv} {
			u(uint64(len(list)))
			for _, q := range list {
				u(uint64(q.peer))
				u(q.seq)
			}
		}
	}
	for i := range st.sent {
		u(st.sent[i])
		u(st.recvd[i])
	}
	u(uint64(len(st.msgs)))
	for _, m := range st.msgs {
		u(m.ctx)
		u(uint64(m.src))
		s(int64(m.tag))
		u(m.seq)
		u(uint64(len(m.data)))
		b = append(b, m.data...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, a...)
	}
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) s() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list length, refusing one the remaining bytes cannot hold
// (each item takes at least one byte), so corrupt input never allocates.
func (d *decoder) count(what string) int {
	v := d.u()
	if v > uint64(len(d.b)) {
		d.fail("%s: %d entries in %d bytes", what, v, len(d.b))
		return 0
	}
	return int(v)
}

// rank reads a rank below size.
func (d *decoder) rank(what string, size int) int {
	v := d.u()
	if v >= uint64(size) {
		d.fail("%s: rank %d of %d", what, v, size)
		return 0
	}
	return int(v)
}

// ranks reads a list of ranks below size; nil when empty.
func (d *decoder) ranks(what string, size int) []int {
	var out []int
	m := d.count(what + "s")
	for j := 0; j < m && d.err == nil; j++ {
		out = append(out, d.rank(what, size))
	}
	return out
}

func (d *decoder) int(what string) int {
	v := d.s()
	if v < -1<<31 || v > 1<<31-1 {
		d.fail("%s: %d out of range", what, v)
		return 0
	}
	return int(v)
}

// decodeState parses and checks saved state; it never panics on any input.
func decodeState(b []byte) (*savedState, error) {
	if !strings.HasPrefix(string(b), stateMagic) {
		return nil, fmt.Errorf("%w: not gompi mpi state (no magic line)", ErrState)
	}
	if len(b) < len(stateMagic)+4 {
		return nil, fmt.Errorf("%w: truncated", ErrState)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", ErrState)
	}
	d := &decoder{b: body[len(stateMagic):]}
	// Version 1 (before intercommunicators) has no remote lists: its
	// snapshots still restart.
	version := d.u()
	if d.err == nil && (version < 1 || version > stateVersion) {
		return nil, fmt.Errorf("%w: version %d, this library reads versions 1 to %d", ErrState, version, stateVersion)
	}
	st := &savedState{}
	rank, size := d.u(), d.u()
	if d.err == nil && (size == 0 || size > 1<<24 || rank >= size) {
		d.fail("rank %d of %d", rank, size)
	}
	st.rank, st.size = int(rank), int(size)
	st.nextCtx = d.u()
	n := d.count("creation log")
	for i := 0; i < n && d.err == nil; i++ {
		e := LogEntry{Op: LogOp(d.u()), Parent: d.u(), Color: d.int("color"), Key: d.int("key"), Handle: d.u(), NextCtx: d.u()}
		if e.Op < OpDup || e.Op > OpInter {
			d.fail("creation log entry %d: unknown operation %d", i, e.Op)
		}
		e.Members = d.ranks("member", st.size)
		if version >= 2 {
			e.Remote = d.ranks("remote member", st.size)
		}
		st.log = append(st.log, e)
	}
	n = d.count("collective counts")
	for i := 0; i < n && d.err == nil; i++ {
		st.collSeq = append(st.collSeq, handleSeq{d.u(), d.u()})
	}
	n = d.count("sequence numbers")
	for i := 0; i < n && d.err == nil; i++ {
		c := ctxSeqs{ctx: d.u()}
		for k := 0; k < 2; k++ {
			m := d.count("peer sequence numbers")
			var list []peerSeq
			for j := 0; j < m && d.err == nil; j++ {
				list = append(list, peerSeq{d.rank("peer", st.size), d.u()})
			}
			if k == 0 {
				c.send = list
			} else {
				c.recv = list
			}
		}
		st.seqs = append(st.seqs, c)
	}
	if d.err == nil && uint64(len(d.b)) < 2*uint64(st.size) {
		d.fail("peer totals: %d bytes for %d ranks", len(d.b), st.size)
	}
	if d.err == nil {
		st.sent, st.recvd = make([]uint64, st.size), make([]uint64, st.size)
		for i := 0; i < st.size && d.err == nil; i++ {
			st.sent[i], st.recvd[i] = d.u(), d.u()
		}
	}
	n = d.count("messages")
	for i := 0; i < n && d.err == nil; i++ {
		m := savedMsg{ctx: d.u(), src: d.rank("message source", st.size), tag: d.int("tag"), seq: d.u()}
		l := d.u()
		if d.err == nil && l > uint64(len(d.b)) {
			d.fail("message %d: %d bytes claimed, %d left", i, l, len(d.b))
		}
		if d.err == nil {
			m.data, d.b = d.b[:l], d.b[l:]
		}
		st.msgs = append(st.msgs, m)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes left over", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, d.err)
	}
	return st, nil
}

// restore installs saved state into a Proc that has not opened its
// transports yet.
func (p *Proc) restore(b []byte) error { return p.restoreState(b, false) }

// restoreState installs saved state. Every communicator of the creation
// log is rebuilt with its handle. With replay, communicators freed before
// the checkpoint stay usable until EndReplay, and the program's own
// creation calls, until then, are matched against the log instead of
// creating (see replayCreate).
func (p *Proc) restoreState(b []byte, replay bool) error {
	st, err := decodeState(b)
	if err != nil {
		return err
	}
	if st.rank != p.rank || st.size != p.size {
		return fmt.Errorf("%w: saved by rank %d of %d, restoring rank %d of %d", ErrState, st.rank, st.size, p.rank, p.size)
	}
	var rp *replayState
	if replay {
		rp = &replayState{comms: make([]*Comm, len(st.log))}
	}
	live := map[uint64]*Comm{}
	for i, e := range st.log {
		switch e.Op {
		case OpDup, OpSplit, OpShrink, OpMerge, OpInter:
			if e.Handle == 0 {
				p.applyCreate(e)
				continue
			}
			if e.Handle < firstUserCtx || e.Handle%2 != 0 || !slices.Contains(e.Members, p.rank) || hasDup(slices.Concat(e.Members, e.Remote)) {
				return fmt.Errorf("%w: creation log entry %d: handle %d with members %v cannot be this rank's", ErrState, i, e.Handle, e.Members)
			}
			if _, taken := p.comms[e.Handle]; taken {
				return fmt.Errorf("%w: creation log entry %d: handle %d created twice", ErrState, i, e.Handle)
			}
			c := p.applyCreate(e)
			live[e.Handle] = c
			if rp != nil {
				rp.comms[i] = c
			}
		case OpFree:
			c, ok := live[e.Parent]
			if !ok || e.Parent == ctxWorld {
				return fmt.Errorf("%w: creation log entry %d frees unknown communicator %d", ErrState, i, e.Parent)
			}
			delete(live, e.Parent)
			p.clog = append(p.clog, e)
			if rp != nil {
				rp.comms[i] = c
				continue // freed when the program frees it again, or at EndReplay
			}
			c.freed.Store(true)
			delete(p.comms, e.Parent)
		}
	}
	if rp != nil {
		rp.entries = slices.Clone(p.clog)
		p.replay = rp
	}
	p.nextCtx = max(p.nextCtx, st.nextCtx)
	for _, hs := range st.collSeq {
		c := p.comms[hs.handle]
		if hs.handle == ctxControl {
			c = p.control
		}
		if c == nil {
			return fmt.Errorf("%w: collective count for unknown communicator %d", ErrState, hs.handle)
		}
		c.collSeq = hs.seq
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range st.seqs {
		cs := p.ctxStateLocked(s.ctx)
		for _, q := range s.send {
			cs.sendSeq[q.peer] = q.seq
		}
		for _, q := range s.recv {
			cs.recvSeq[q.peer] = q.seq
		}
	}
	for i, pe := range p.peers {
		pe.sent.Store(st.sent[i])
		pe.recvd.Store(st.recvd[i])
	}
	for _, m := range st.msgs {
		cs := p.ctxStateLocked(m.ctx)
		msg := getMsg(len(m.data))
		copy(msg.data, m.data)
		msg.src, msg.tag, msg.seq = m.src, m.tag, m.seq
		cs.unexp = append(cs.unexp, msg)
	}
	return nil
}

func hasDup(v []int) bool {
	seen := map[int]bool{}
	for _, x := range v {
		if seen[x] {
			return true
		}
		seen[x] = true
	}
	return false
}
