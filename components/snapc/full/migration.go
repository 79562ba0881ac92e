package full

import (
	"errors"
	"fmt"
	"slices"

	"gompi/frameworks/snapc"
)

// A migration's checkpoint saves only the ranks that move and holds every
// rank at the same safe point until gompirun releases them (Release), once
// the moved ranks run again elsewhere. It runs through the same steps as a
// checkpoint of the whole job (checkpoint.go) along its own path.

// migrationPath is a migration's checkpoint of ranks (ascending).
type migrationPath struct{ ranks []int }

func (m migrationPath) requested(id uint64) string {
	return fmt.Sprintf("request %d: a migration of ranks %v", id, m.ranks)
}

func (m migrationPath) queried(ranks int, target uint64) string {
	return fmt.Sprintf("%d ranks can be checkpointed; target safe point %d; saving ranks %v for a migration, the others are held", ranks, target, m.ranks)
}

func (m migrationPath) targeted(seq int, refName string, target uint64) string {
	return fmt.Sprintf("sequence %d recorded in %s for a migration (not a restart point); ranks %v save at safe point %d, the others hold there",
		seq, refName, m.ranks, target)
}

// written counts the node's saved ranks and those it holds unsaved.
func (m migrationPath) written(rep snapc.LocalReply) string {
	saved := 0
	for _, rr := range rep.Ranks {
		if _, ok := slices.BinarySearch(m.ranks, rr.Rank); ok {
			saved++
		}
	}
	return fmt.Sprintf("%d local snapshots written, %d ranks held unsaved", saved, len(rep.Ranks)-saved)
}

// saved is the nodes of the migrated ranks only.
func (m migrationPath) saved(p *placement) map[string][]int { return p.only(m.ranks) }

// committed starts the hold before anyone can see the result, so the
// release that follows it always finds it; a node lost or the job's end
// meanwhile already said there is nothing to hold.
func (m migrationPath) committed(c *ckpt, res snapc.Result) {
	g := c.g
	g.mu.Lock()
	if g.closed == nil && c.r.stopped() == nil {
		g.held = &hold{id: c.r.id, seq: c.seq, place: c.place, saved: m.ranks, over: make(chan struct{})}
	}
	g.mu.Unlock()
	g.event(c.r, snapc.PhaseCommit, "", c.seq, fmt.Sprintf("sequence %d committed for a migration (not a restart point): %s; ranks %v saved, every rank holds until the release",
		c.seq, c.ref, m.ranks))
	g.log.Info("migration checkpoint committed; ranks held", "ref", c.ref.String(), "seq", c.seq, "saved", m.ranks, "took", res.Duration)
}

// end leaves the ranks held: Release ends the request on the nodes.
func (migrationPath) end(*ckpt) {}

var _ path = migrationPath{}

// hold is a committed migration checkpoint whose ranks are held.
type hold struct {
	id        uint64
	seq       int
	place     *placement    // as it was for the request: its nodes hold the ranks
	saved     []int         // the ranks saved (Request.Ranks), ascending
	releasing bool          // Release is sending it to the nodes
	over      chan struct{} // closed when the hold ends (endHoldLocked)
}

// checkMigration checks the ranks of a migration's request and returns
// them ascending (nil for a checkpoint of the whole job).
func (g *global) checkMigration(req snapc.Request) ([]int, error) {
	if len(req.Ranks) == 0 {
		return nil, nil
	}
	switch {
	case req.Options.Term:
		return nil, fmt.Errorf("snapc/full: %w: a migration of ranks %v cannot end the job (term): its saved ranks end at its release, the others resume; checkpoint the whole job to end it", snapc.ErrRefused, req.Ranks)
	case req.Options.Stop:
		return nil, fmt.Errorf("snapc/full: %w: a migration of ranks %v cannot stop the ranks (stop): every rank is held until its release", snapc.ErrRefused, req.Ranks)
	}
	ranks := slices.Clone(req.Ranks)
	slices.Sort(ranks)
	for i, r := range ranks {
		if r < 0 || r >= g.ranks {
			return nil, fmt.Errorf("snapc/full: %w: migration of rank %d: the job has ranks 0 to %d", snapc.ErrRefused, r, g.ranks-1)
		}
		if i > 0 && ranks[i-1] == r {
			return nil, fmt.Errorf("snapc/full: %w: migration of ranks %v names rank %d twice", snapc.ErrRefused, req.Ranks, r)
		}
	}
	return ranks, nil
}

// only is the placement's nodes restricted to ranks (ascending): the
// nodes that run some of them, each with its ranks among them.
func (p *placement) only(ranks []int) map[string][]int {
	out := map[string][]int{}
	for _, n := range p.nodes {
		for _, r := range p.nodeRanks[n] {
			if _, ok := slices.BinarySearch(ranks, r); ok {
				out[n] = append(out[n], r)
			}
		}
	}
	return out
}

// Release ends the held migration checkpoint: every node that held ranks
// gets a LocalRelease, then the hold is cleared and queued requests may
// run. Leave must name only ranks the migration saved (the others have no
// local snapshot to run again from); a refused release keeps the hold.
// The nodes are told on a goroutine of their own: gompirun calls Release
// from its event loop, which is also what delivers NodeLink.Send.
func (g *global) Release(rel snapc.Release) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.held
	switch {
	case h == nil:
		return errors.New("snapc/full: release: no migration checkpoint holds the job's ranks (none was committed, it was released already, or a lost node or the job's end ended it)")
	case h.releasing:
		return fmt.Errorf("snapc/full: release: migration sequence %d is being released already", h.seq)
	}
	leave := slices.Clone(rel.Leave)
	slices.Sort(leave)
	for i, r := range leave {
		if _, ok := slices.BinarySearch(h.saved, r); !ok {
			return fmt.Errorf("snapc/full: release of migration sequence %d: rank %d cannot leave: the migration saved only ranks %v; the ranks stay held", h.seq, r, h.saved)
		}
		if i > 0 && leave[i-1] == r {
			return fmt.Errorf("snapc/full: release of migration sequence %d: rank %d leaves twice; the ranks stay held", h.seq, r)
		}
	}
	// The hold stays set while the nodes are told, so no queued request
	// reaches a node before the release does.
	h.releasing = true
	go g.release(h, snapc.LocalRequest{ID: h.id, Kind: snapc.LocalRelease, Seq: h.seq, Ref: g.spec.Ref, Leave: leave, Peers: rel.Peers})
	return nil
}

// release sends req to every node of hold h, then ends h.
func (g *global) release(h *hold, req snapc.LocalRequest) {
	for _, n := range h.place.nodes {
		g.mu.Lock()
		_, lost := g.lost[n]
		g.mu.Unlock()
		if lost {
			continue
		}
		if err := g.link.Send(n, req); err != nil {
			g.log.Error("migration release not sent: the node's held ranks stay held", "node", n, "seq", h.seq, "err", err)
		}
	}
	g.mu.Lock()
	if g.held == h {
		g.endHoldLocked()
	}
	g.mu.Unlock()
	g.log.Info("migration released", "seq", h.seq, "leave", req.Leave)
}
