package mpi

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// The fault-tolerant agreement behind Agree and Shrink, as a state
// machine with no I/O: events in (start, a message, a failure found),
// messages out. agree.go drives it over the control context; tests drive
// it over an in-memory network too (the same code), to count rounds and
// messages at sizes a machine cannot run as processes.
//
// Failure-free path (4·⌊log2 n⌋ rounds, 4(n-1) messages): a binomial
// tree rooted at rank 0, swept twice. Up: each rank merges its children's
// values (AND of the flags, OR of the failed sets, MAX of the next
// context ids) into its own and sends the result to its parent. Down: the
// root proposes the result; every rank accepts the proposal and passes it
// on. Up: acks, a rank's once its whole subtree accepted. Down: the root,
// with every ack, decides and the decision goes down the tree; a rank
// decides when it arrives. The second sweep is what makes the agreement
// uniform: when anyone decides, every rank alive has accepted the value,
// so even a decider that dies at once cannot take it with it.
//
// Recovery (anything else: a tree neighbor found failed, or a query
// received). A rank enters it once, and then never decides from the tree:
//
//	R1. It sends a query carrying its estimate to every member it does not
//	    know failed, and waits until every other member answered or was
//	    found failed. An answer is the member's own query (it entered
//	    recovery too: a query pulls every rank still in the tree into
//	    recovery) or, from a member that had decided, decided(v). An
//	    estimate is locked when it is the tree's proposal: a rank that
//	    accepted the proposal locks its estimate to it on entering
//	    recovery; a locked answer replaces an unlocked estimate and locks
//	    it; unlocked answers are merged into an unlocked estimate, and
//	    members found failed join its failed set. After R1 an unlocked
//	    estimate covers every rank: its contribution is in it, or the
//	    rank is in the failed set (a proposal covers all ranks).
//	R2. Rounds 0..n-1 (rotating coordinator): in round r, rank r sends
//	    its estimate to every member it does not know failed; the others
//	    adopt the estimate r sent (an estimate, or the decided(v) r
//	    answered in R1) or skip the round once r is known failed. After
//	    round n-1 the estimate is the decision.
//
// A rank that decided keeps its decision (per communicator and call, in
// the Proc's agreeTable) and answers every later query with decided(v),
// from the reader path, after its call returned.
//
// Why no two ranks decide differently, even one that failed after
// deciding (failures are fail-stop, and a rank is found failed only once
// it has failed):
//   - The tree proposes at most one value v (one root, one attempt).
//   - If any rank decided from the tree, the root had every ack, so every
//     rank alive then had accepted v. Every rank in recovery locks to v:
//     its own accepted proposal, or the locked answer or decided(v) of
//     each member it hears from (and it hears from each live one). So
//     every R2 estimate is v, and recovery decides v.
//   - No rank leaves R1 before every live rank entered recovery or had
//     decided (R1 waits for an answer from each), so R2's participants
//     are every live undecided rank, and a coordinator that is alive has
//     sent its estimate to all of them before it can decide. R2 is the
//     classic rotating-coordinator consensus: the round of the first
//     coordinator that finished its sends exists (a rank that decides
//     finished its own), after it every participant holds that
//     coordinator's estimate, and later coordinators only repeat it.
//     Estimates change in R2 only by adoption.
//
// Termination: R1 waits only for live ranks, each of which answers once
// it takes part in the call (or at once from the table when it decided);
// each round of R2 ends when its coordinator's estimate arrives or the
// coordinator is found failed.

// Message kinds.
const (
	agreeUp       byte = 1 // a subtree's merged value, child to parent
	agreeDown     byte = 2 // the decision, parent to child
	agreeQuery    byte = 3 // R1: the sender is in recovery; its estimate
	agreeDecided  byte = 4 // the sender's decision, the answer to a query
	agreeEstimate byte = 5 // R2: the coordinator's estimate
	agreePing     byte = 6 // opens a connection to a tree neighbor (agree.go)
	agreePropose  byte = 7 // the root's proposal, parent to child
	agreeAck      byte = 8 // the subtree accepted the proposal, child to parent
)

// agreeVal is what an agreement estimates and decides.
type agreeVal struct {
	flag   uint64 // AND of the flags
	next   uint64 // largest next free context id
	failed bitset // ranks found failed (Agree: not acknowledged)
}

func (v *agreeVal) merge(o agreeVal) {
	v.flag &= o.flag
	v.next = max(v.next, o.next)
	for i := range v.failed {
		v.failed[i] |= o.failed[i]
	}
}

func (v agreeVal) clone() agreeVal {
	v.failed = v.failed.clone()
	return v
}

// agreeMsg is one message of the protocol. hops counts the messages on
// the longest causal chain that ends with it: the rounds of the critical
// path.
type agreeMsg struct {
	kind   byte
	locked bool // a query's estimate is the tree's proposal
	hops   uint32
	val    agreeVal
}

// agreeOut is a message to send to rank dst.
type agreeOut struct {
	dst int
	msg agreeMsg
}

// Machine phases.
const (
	phaseTree = iota
	phaseR1
	phaseR2
	phaseDone
)

type agreeMachine struct {
	n, me    int
	parent   int // -1 at the root
	children []int
	phase    int
	est      agreeVal
	locked   bool   // est is the tree's proposal (see R1)
	dead     bitset // ranks known failed here
	heard    bitset // children whose up arrived
	acks     bitset // children whose ack arrived
	upSent   bool
	accepted *agreeVal // the tree's proposal
	ackSent  bool
	answered bitset      // R1: ranks whose query or decided arrived
	coord    []*agreeMsg // R2: the first estimate or decided of each rank
	round    int
	hops     uint32
	decision *agreeVal
	out      []agreeOut
}

// newAgreeMachine starts rank me of n with its contribution and the ranks
// it knows failed (dead ⊇ the contribution's failed set in Shrink; in
// Agree dead also holds acknowledged failures, which the contribution
// leaves out).
func newAgreeMachine(n, me int, mine agreeVal, dead bitset) *agreeMachine {
	m := &agreeMachine{n: n, me: me, parent: -1, est: mine.clone(), dead: dead,
		heard: newBitset(n), acks: newBitset(n), answered: newBitset(n), coord: make([]*agreeMsg, n)}
	if me > 0 {
		m.parent = me & (me - 1)
	}
	for k := 1; me+k < n && (me == 0 || k < me&-me); k <<= 1 {
		m.children = append(m.children, me+k)
	}
	return m
}

// treeRounds is the failure-free critical path at n ranks.
func treeRounds(n int) int {
	if n <= 1 {
		return 0
	}
	return 4 * (bits.Len(uint(n)) - 1) // the tree's depth: floor(log2 n)
}

// start takes the first step.
func (m *agreeMachine) start() {
	if m.parent >= 0 && m.dead.has(m.parent) {
		m.recover()
	}
	for _, ch := range m.children {
		if m.dead.has(ch) {
			m.recover()
		}
	}
	m.progress()
}

func (m *agreeMachine) send(dst int, kind byte, v agreeVal) {
	m.out = append(m.out, agreeOut{dst: dst, msg: agreeMsg{kind: kind, locked: m.locked, hops: m.hops + 1, val: v.clone()}})
}

// sendChildren sends v to every child not known failed.
func (m *agreeMachine) sendChildren(kind byte, v agreeVal) {
	for _, ch := range m.children {
		if !m.dead.has(ch) {
			m.send(ch, kind, v)
		}
	}
}

// sendAll sends to every rank not known failed.
func (m *agreeMachine) sendAll(kind byte) {
	for r := range m.n {
		if r != m.me && !m.dead.has(r) {
			m.send(r, kind, m.est)
		}
	}
}

// onMsg takes a message from rank src.
func (m *agreeMachine) onMsg(src int, msg agreeMsg) {
	if msg.kind == agreePing {
		return
	}
	m.hops = max(m.hops, msg.hops)
	switch msg.kind {
	case agreeUp:
		if slices.Contains(m.children, src) && !m.heard.has(src) {
			m.heard.set(src)
			if m.phase == phaseTree {
				m.est.merge(msg.val)
			}
		}
	case agreePropose:
		if m.phase == phaseTree && src == m.parent && m.upSent && m.accepted == nil {
			v := msg.val.clone()
			m.accepted = &v
			m.sendChildren(agreePropose, v)
		}
	case agreeAck:
		if slices.Contains(m.children, src) {
			m.acks.set(src)
		}
	case agreeDown:
		if m.phase == phaseTree && src == m.parent && m.ackSent {
			m.decide(msg.val)
			m.sendChildren(agreeDown, msg.val)
		}
	case agreeQuery:
		switch m.phase {
		case phaseDone:
			m.send(src, agreeDecided, *m.decision)
			return
		case phaseTree, phaseR1:
			m.recover()
			m.answered.set(src)
			m.mergeR1(msg.val, msg.locked)
		}
	case agreeDecided:
		if m.phase == phaseR1 || m.phase == phaseR2 {
			m.answered.set(src)
			if m.phase == phaseR1 {
				m.mergeR1(msg.val, true)
			}
			if m.coord[src] == nil {
				m.coord[src] = &msg
			}
		}
	case agreeEstimate:
		if m.coord[src] == nil {
			m.coord[src] = &msg
		}
	}
	m.progress()
}

// mergeR1 takes an answer in R1: a locked one replaces an unlocked
// estimate (all locked values are the one proposal).
func (m *agreeMachine) mergeR1(v agreeVal, locked bool) {
	switch {
	case m.locked:
	case locked:
		m.est, m.locked = v.clone(), true
	default:
		m.est.merge(v)
	}
}

// onFailure takes the news that rank r failed.
func (m *agreeMachine) onFailure(r int) {
	if r == m.me || m.dead.has(r) {
		return
	}
	m.dead.set(r)
	if m.phase == phaseDone {
		return
	}
	if m.phase <= phaseR1 && !m.locked {
		m.est.failed.set(r)
	}
	if m.phase == phaseTree && (r == m.parent || slices.Contains(m.children, r)) {
		m.recover()
	}
	m.progress()
}

// recover enters recovery (R1).
func (m *agreeMachine) recover() {
	if m.phase != phaseTree {
		return
	}
	m.phase = phaseR1
	if m.accepted != nil {
		m.est, m.locked = m.accepted.clone(), true
	}
	m.sendAll(agreeQuery)
}

func (m *agreeMachine) decide(v agreeVal) {
	d := v.clone()
	m.decision, m.phase = &d, phaseDone
}

func (m *agreeMachine) progress() {
	switch m.phase {
	case phaseTree:
		m.progressTree()
	case phaseR1:
		for r := range m.n {
			if r != m.me && !m.answered.has(r) && !m.dead.has(r) {
				return
			}
		}
		m.phase = phaseR2
		m.progressR2()
	case phaseR2:
		m.progressR2()
	}
}

func (m *agreeMachine) progressTree() {
	all := func(set bitset) bool {
		for _, ch := range m.children {
			if !set.has(ch) {
				return false
			}
		}
		return true
	}
	if !m.upSent && all(m.heard) {
		m.upSent = true
		if m.parent >= 0 {
			m.send(m.parent, agreeUp, m.est)
			return
		}
		v := m.est.clone()
		m.accepted = &v
		m.sendChildren(agreePropose, v)
	}
	if m.accepted == nil || m.ackSent || !all(m.acks) {
		return
	}
	m.ackSent = true
	if m.parent >= 0 {
		m.send(m.parent, agreeAck, agreeVal{next: m.accepted.next, failed: make(bitset, len(m.est.failed))})
		return
	}
	m.decide(*m.accepted)
	m.sendChildren(agreeDown, *m.accepted)
}

func (m *agreeMachine) progressR2() {
	for ; m.round < m.n; m.round++ {
		switch r := m.round; {
		case r == m.me:
			m.sendAll(agreeEstimate)
		case m.coord[r] != nil:
			m.est = m.coord[r].val.clone()
		case m.dead.has(r):
		default:
			return
		}
	}
	m.decide(m.est)
}

// waitingOn returns the ranks whose message or failure this machine
// waits for now.
func (m *agreeMachine) waitingOn() []int {
	var out []int
	add := func(r int) {
		if r >= 0 && r != m.me && !m.dead.has(r) {
			out = append(out, r)
		}
	}
	switch m.phase {
	case phaseTree:
		add(m.parent)
		for _, ch := range m.children {
			add(ch)
		}
	case phaseR1:
		for r := range m.n {
			if !m.answered.has(r) {
				add(r)
			}
		}
	case phaseR2:
		if m.round < m.n {
			add(m.round)
		}
	}
	return out
}

// takeOut returns the messages to send and forgets them.
func (m *agreeMachine) takeOut() []agreeOut {
	out := m.out
	m.out = nil
	return out
}

// --- wire format ---------------------------------------------------------------

// A message: kind (1 byte), locked (1 byte, 0 or 1), hops (4 bytes),
// flag (8), next context id (8), all little endian, then a bitmap of the communicator's ranks (bit
// r%8 of byte r/8 set: rank r failed). Its length follows from the
// communicator's size.

const agreeHead = 1 + 1 + 4 + 8 + 8

func agreeLen(n int) int { return agreeHead + (n+7)/8 }

func encodeAgree(m agreeMsg) []byte {
	b := make([]byte, 0, agreeHead+len(m.val.failed))
	b = append(b, m.kind, 0)
	if m.locked {
		b[1] = 1
	}
	b = binary.LittleEndian.AppendUint32(b, m.hops)
	b = binary.LittleEndian.AppendUint64(b, m.val.flag)
	b = binary.LittleEndian.AppendUint64(b, m.val.next)
	return append(b, m.val.failed...)
}

// decodeAgree parses a message of a communicator of n ranks; checkNext
// says the context id must be a valid one (Shrink's agreement).
func decodeAgree(b []byte, n int, checkNext bool) (agreeMsg, error) {
	if len(b) != agreeLen(n) {
		return agreeMsg{}, fmt.Errorf("agreement message of %d bytes, want %d for %d ranks", len(b), agreeLen(n), n)
	}
	m := agreeMsg{kind: b[0], locked: b[1] == 1, hops: binary.LittleEndian.Uint32(b[2:6]), val: agreeVal{
		flag: binary.LittleEndian.Uint64(b[6:14]), next: binary.LittleEndian.Uint64(b[14:22]),
		failed: bitset(slices.Clone(b[agreeHead:]))}}
	if m.kind < agreeUp || m.kind > agreeAck {
		return agreeMsg{}, fmt.Errorf("agreement message of unknown kind %d", m.kind)
	}
	if b[1] > 1 {
		return agreeMsg{}, fmt.Errorf("agreement message with a locked mark of %d", b[1])
	}
	if n%8 != 0 && m.val.failed[len(m.val.failed)-1]>>(n%8) != 0 {
		return agreeMsg{}, fmt.Errorf("agreement message names ranks beyond %d", n-1)
	}
	if checkNext && (m.val.next < firstUserCtx || m.val.next%2 != 0) {
		return agreeMsg{}, fmt.Errorf("agreement message proposes context %d (want an even id from %d)", m.val.next, firstUserCtx)
	}
	return m, nil
}

// bitset is a set of communicator ranks.
type bitset []byte

func newBitset(n int) bitset    { return make(bitset, (n+7)/8) }
func (b bitset) has(r int) bool { return b[r/8]&(1<<(r%8)) != 0 }
func (b bitset) set(r int)      { b[r/8] |= 1 << (r % 8) }
func (b bitset) clone() bitset  { return slices.Clone(b) }

func (b bitset) empty() bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
