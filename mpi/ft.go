package mpi

import (
	"fmt"
	"sync"
)

// The fault-tolerance interface's shared ground (ULFM's
// MPIX_Comm_get_failed and MPIX_Comm_ack_failed): the order in which this
// process learned of failures, and what the application acknowledged on
// each communicator. Revoke, Agree and the AnySource rules build on it.

// failLog is the world ranks this process learned failed, in the order it
// learned of them. GetFailed's groups are in this order, so the prefix a
// communicator acknowledged stays the same prefix as more failures
// arrive.
type failLog struct {
	mu    sync.Mutex
	order []int
}

func (f *failLog) add(rank int) {
	f.mu.Lock()
	f.order = append(f.order, rank)
	f.mu.Unlock()
}

// snapshot returns the ranks learned failed so far.
func (f *failLog) snapshot() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.order...)
}

// failedRanks returns c's members this process knows failed, as c's
// ranks, in the order it learned of them.
func (c *Comm) failedRanks() []int {
	var out []int
	for _, w := range c.p.fails.snapshot() {
		if r := c.commRank(w); r >= 0 {
			out = append(out, r)
		}
	}
	return out
}

// GetFailed returns the group of c's members this process knows failed,
// in the order it learned of them (ULFM's MPIX_Comm_get_failed). It is
// local: other members may know of more or fewer failures. On an
// intercommunicator it fails with ErrInter.
//
//	failed := c.GetFailed()
//	fmt.Println("lost world ranks", failed.Members())
func (c *Comm) GetFailed() (Group, error) {
	if err := c.checkFT("get_failed"); err != nil {
		return Group{}, err
	}
	ranks := c.failedRanks()
	members := make([]int, len(ranks))
	for i, r := range ranks {
		members[i] = c.members[r]
	}
	return Group{members: members, self: c.p.rank}, nil
}

// AckFailed acknowledges the first n failures of the group GetFailed
// would return now and returns how many of c's failures are acknowledged
// in all (ULFM's MPIX_Comm_ack_failed: n larger than the failures known
// acknowledges all of them; acknowledging never shrinks). Acknowledged
// failures no longer make AnySource receives on c fail, nor Agree report
// an error. It is local.
//
//	failed, _ := c.GetFailed()
//	acked, _ := c.AckFailed(failed.Size())
func (c *Comm) AckFailed(n int) (int, error) {
	if err := c.checkFT("ack_failed"); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("mpi: ack_failed: %w: %d failures to acknowledge", ErrArg, n)
	}
	known := len(c.failedRanks())
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	c.acked = max(c.acked, min(n, known))
	return c.acked, nil
}

// ackedFailed returns the set of c's ranks whose failure the application
// acknowledged on c: the first c.acked of failedRanks.
func (c *Comm) ackedFailed() bitset {
	n := c.ackedCount()
	ranks := c.failedRanks() // after the count: at least as long as the list it counts in
	return setOf(c.size, ranks[:n])
}

// unackedFailed returns the set of c's ranks this process knows failed and
// the application has not acknowledged on c: failedRanks past the
// acknowledged prefix.
func (c *Comm) unackedFailed() bitset {
	n := c.ackedCount()
	ranks := c.failedRanks() // after the count: at least as long as the list it counts in
	return setOf(c.size, ranks[n:])
}

// ackedCount is how many of failedRanks the application acknowledged; the
// list only grows, so it never exceeds the length of a failedRanks read
// after it.
func (c *Comm) ackedCount() int {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	return c.acked
}

func setOf(size int, ranks []int) bitset {
	set := newBitset(size)
	for _, r := range ranks {
		set.set(r)
	}
	return set
}

func (c *Comm) checkFT(op string) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.inter != nil {
		return fmt.Errorf("mpi: %s: %w", op, ErrInter)
	}
	return nil
}
