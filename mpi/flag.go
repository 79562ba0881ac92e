package mpi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gompi/frameworks/crcp"
)

// Quiescing by flags (crcp flag, MVAPICH2-CR's way): Suspend tells the
// ranks over the control tree which of them it will flag, queues a flag
// frame (kindFlag, tagged with the suspension's tag) on every connection
// it opened behind everything queued before, and waits until each is
// written and the flag of every rank that said it would flag this one
// was taken off the connection from it.
// Connections are FIFO and the gate holds back every later send, so when
// a peer's flag has arrived everything it sent before has too: the reader
// goroutines have put it in the unexpected queue or a posted receive. No
// counts are exchanged, and the flags bypass the matching engine. A flag
// that comes late (its suspension was given up) only raises what the
// peer's last flag was: flags of a later suspension carry a larger tag.

// flagState is what the reader goroutines learned of the peers' flags.
type flagState struct {
	mu   sync.Mutex
	seen []int64       // per world rank: the largest flag tag taken off its connection
	wake chan struct{} // closed (and dropped) when a flag arrives or a peer fails
}

// flagged records src's flag of tag (the reader goroutine of src's
// connection calls it).
func (p *Proc) flagged(src int, tag int64) {
	f := &p.flags
	f.mu.Lock()
	if f.seen == nil {
		f.seen = make([]int64, p.size)
	}
	f.seen[src] = max(f.seen[src], tag)
	f.wakeLocked()
	f.mu.Unlock()
}

// wakeFlags wakes a flag wait (a peer failed: it waits no more).
func (p *Proc) wakeFlags() {
	f := &p.flags
	f.mu.Lock()
	f.wakeLocked()
	f.mu.Unlock()
}

func (f *flagState) wakeLocked() {
	if f.wake != nil {
		close(f.wake)
		f.wake = nil
	}
}

// flagAll sends this rank's flag of tag down every connection it opened
// and waits until the flag of tag of every rank that opened one to it
// arrived. Which ranks send a flag to which is exchanged over the control
// tree first: a rank that only receives cannot know otherwise that a
// peer's messages are still on their way.
func (p *Proc) flagAll(ctx context.Context, tag int) error {
	to := p.outPeers()
	mine := make([]uint64, p.size)
	for _, r := range to {
		mine[r] = 1
	}
	from, err := p.exchange(ctx, p.control.pt, tag, mine, suspendTagBase)
	if err != nil {
		return err
	}
	if err := p.sendFlags(ctx, tag, to); err != nil {
		return err
	}
	var senders []int
	for r, n := range from {
		if n != 0 && r != p.rank {
			senders = append(senders, r)
		}
	}
	return p.awaitFlags(ctx, int64(tag), senders)
}

// outPeers returns the ranks this process has a connection to, or a send
// queued for (which will open one).
func (p *Proc) outPeers() []int {
	var out []int
	for _, pe := range p.peers {
		if pe.rank == p.rank {
			continue
		}
		pe.mu.Lock()
		if pe.out != nil || pe.writing {
			out = append(out, pe.rank)
		}
		pe.mu.Unlock()
	}
	return out
}

// sendFlags writes this rank's flag of tag to each of the ranks to,
// behind everything queued toward it, and waits until all are written.
func (p *Proc) sendFlags(ctx context.Context, tag int, to []int) error {
	var waits []chan error
	for _, r := range to {
		pe := p.peers[r]
		pe.mu.Lock()
		if pe.writing {
			// Behind the sends still queued toward pe.
			op := &sendOp{kind: kindFlag, tag: tag, wake: make(chan error, 1)}
			p.enqueueLocked(pe, op)
			waits = append(waits, op.wake)
			continue
		}
		// Nothing queued: written here, as a send would be, rather than
		// by a writer goroutine of its own.
		pe.writing = true
		pe.mu.Unlock()
		err := p.transmit(pe, kindFlag, 0, tag, 0, nil)
		p.release(pe, err)
		if err != nil {
			return fmt.Errorf("send a flag: %w", err)
		}
	}
	for _, w := range waits {
		select {
		case err := <-w:
			if err != nil {
				return fmt.Errorf("send a flag: %w", err)
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return p.stopErr()
		}
	}
	return nil
}

// awaitFlags waits until the flag of tag (or a later one) of each rank
// of from was taken off its connection.
func (p *Proc) awaitFlags(ctx context.Context, tag int64, from []int) error {
	f := &p.flags
	// Waiting for frames, as a receive does: the readers may poll.
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	for {
		f.mu.Lock()
		missing := -1
		for _, r := range from {
			if f.seen == nil || f.seen[r] < tag {
				missing = r
				break
			}
		}
		if missing < 0 {
			f.mu.Unlock()
			return nil
		}
		if err := p.peers[missing].failure(); err != nil {
			f.mu.Unlock()
			return fmt.Errorf("wait for rank %d's flag: %w", missing, err)
		}
		if f.wake == nil {
			f.wake = make(chan struct{})
		}
		w := f.wake
		f.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return fmt.Errorf("wait for rank %d's flag: %w", missing, ctx.Err())
		case <-p.done:
			return p.stopErr()
		}
	}
}

// quiesceWay says how this rank quiesces its channels for a suspension:
// as the installed protocol says (crcp.Transparent), by counts when none
// is installed (crcp none: the library keeps its totals itself). A
// protocol that cannot say is refused with what to select.
func (p *Proc) quiesceWay() (crcp.Quiesce, error) {
	m := p.CRCP()
	if m == nil {
		return crcp.QuiesceCounts, nil
	}
	if t, ok := m.(crcp.Transparent); ok {
		return t.TransparentQuiesce(), nil
	}
	name := fmt.Sprintf("%T", m)
	if p.modset != nil && p.modset.CRCP != nil {
		name = p.modset.CRCP.Info.Name
	}
	return 0, fmt.Errorf("%w: crcp %s cannot quiesce channels for a transparent checkpoint; select crcp bkmrk or flag", errors.ErrUnsupported, name)
}
