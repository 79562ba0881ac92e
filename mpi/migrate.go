package mpi

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gompi/frameworks/btl"
)

// A migration (errmgr crmig) moves some ranks to other nodes while the
// others wait at a safe point: every rank has drained its channels, the
// moving ranks save themselves and end, new processes start from their
// snapshots elsewhere, and the waiting ranks reach them at their new
// endpoints. The waiting ranks' library state stays as it is: sequence
// numbers, counts and communicators go on, and the moved ranks restore
// theirs from the same consistent point.

// PeersMoving marks ranks about to move: from now on their connections
// may close without that meaning they failed (their processes end after
// saving themselves). Call it at the safe point, once the channels are
// drained, before the moving ranks may end. When this rank is among them,
// this process is the one leaving: the others drop their connections to
// it once released (PeersMoved), which is no failure of theirs either.
func (p *Proc) PeersMoving(ranks []int) error {
	for _, r := range ranks {
		if r < 0 || r >= p.size {
			return fmt.Errorf("mpi: peers moving: %w: rank %d of %d", ErrArg, r, p.size)
		}
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	for _, r := range ranks {
		if r == p.rank {
			p.leaving.Store(true)
		} else {
			// The old process's connection, to drop once the new one is
			// known (its new connection may be accepted before that).
			p.peers[r].oldIn = p.inFrom[r]
			p.peers[r].moving.Store(true)
		}
	}
	return nil
}

// PeersStayed unmarks ranks whose move was abandoned: they never left,
// and their connections are whole.
func (p *Proc) PeersStayed(ranks []int) {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	for _, r := range ranks {
		if r == p.rank {
			p.leaving.Store(false)
		} else if r >= 0 && r < p.size {
			p.peers[r].oldIn = nil
			p.peers[r].moving.Store(false)
		}
	}
}

// PeersMoved points the moved ranks at their new processes: entries are
// their modex maps, by rank. The old connections are dropped; the next
// send dials the new endpoint, and the new process's connection is
// accepted in place of the old one.
func (p *Proc) PeersMoved(entries map[int]map[string]string) error {
	var errs []error
	for r, info := range entries {
		if r < 0 || r >= p.size {
			errs = append(errs, fmt.Errorf("mpi: peers moved: %w: rank %d of %d", ErrArg, r, p.size))
			continue
		}
		if r == p.rank {
			continue
		}
		pe := p.peers[r]
		if err := p.choosePath(pe, info); err != nil {
			errs = append(errs, err)
			continue
		}
		pe.dropOut()
		p.inMu.Lock()
		in := pe.oldIn
		pe.oldIn = nil
		if in != nil && p.inFrom[r] == in {
			p.inFrom[r] = nil
		}
		p.inMu.Unlock()
		if in != nil {
			in.Close()
		}
		p.restartControl(r)
		pe.moving.Store(false)
	}
	return errors.Join(errs...)
}

// restartControl starts the library's own traffic with rank afresh, as
// the moved rank's new process does: the control context is never saved
// (state.go), and what the old process exchanged after its save is gone
// with it.
func (p *Proc) restartControl(rank int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ctx, cs := range p.ctxs {
		if ctx>>1 != ctxControl>>1 {
			continue
		}
		cs.recvSeq[rank] = 0
		cs.unexp = slices.DeleteFunc(cs.unexp, func(m *message) bool {
			if m.src == rank {
				putMsg(m)
				return true
			}
			return false
		})
	}
	pe := p.peers[rank]
	pe.mu.Lock()
	for ctx, cs := range p.ctxs {
		if ctx>>1 == ctxControl>>1 {
			cs.sendSeq[rank] = 0
		}
	}
	pe.mu.Unlock()
}

// choosePath picks the first transport of this process that reaches the
// peer published as info, and records its endpoint.
func (p *Proc) choosePath(pe *peer, info map[string]string) error {
	for i, m := range p.mods {
		ep := btl.Endpoint{Job: p.job, Rank: pe.rank, Node: info["node"], Addr: info["btl_"+p.modName[i]]}
		if m.Reachable(p.selfEP[i], ep) {
			pe.mu.Lock()
			pe.mod, pe.self, pe.ep = m, p.selfEP[i], ep
			pe.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("mpi: no transport reaches rank %d on node %q from node %q (usable here: %s); allow tcp with --mca btl tcp,uds",
		pe.rank, info["node"], p.Node(), strings.Join(p.modName, ", "))
}

// retired reports whether a broken connection from src is no failure: it
// was replaced by the peer's new process, the peer is moving, or this
// process is (its peers, released, turn to this rank's new process). A
// moving peer's slot is freed for its new process's connection.
func (p *Proc) retired(src int, c btl.Conn) bool {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.inFrom[src] != c {
		return true
	}
	if p.link(src).moving.Load() || p.leaving.Load() {
		p.inFrom[src] = nil
		return true
	}
	return false
}
