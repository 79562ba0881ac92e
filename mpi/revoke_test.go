package mpi_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// revokeBound is how long a blocked operation may take to see a
// revocation: generous headroom over the microseconds it takes, for a
// machine at load 15.
const revokeBound = 20 * time.Second

// within runs op and fails when it has not returned within revokeBound.
func within(what string, op func() error) error {
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(revokeBound):
		return fmt.Errorf("%s: not interrupted within %v", what, revokeBound)
	}
}

// untilPending waits until c has a receive or probe pending (the rank
// owning c is blocked on it), bounded by revokeBound.
func untilPending(c *mpi.Comm) error {
	deadline := time.Now().Add(revokeBound)
	for mpi.Pending(c) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d never blocked on communicator %d", c.Rank(), c.Handle())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// untilAllPending waits until the k communicators sent on blocking have
// a receive or probe pending.
func untilAllPending(blocking <-chan *mpi.Comm, k int) error {
	for range k {
		if err := untilPending(<-blocking); err != nil {
			return err
		}
	}
	return nil
}

// blockedOps are the operations a revocation must interrupt: each blocks
// because rank 0 never takes part. The members that were in a collective
// took a collective number rank 0 never took; Shrink must work all the
// same (it numbers itself apart: Comm.nextFTSeq).
var blockedOps = []struct {
	name string
	op   func(c *mpi.Comm) error
}{
	{"Recv", func(c *mpi.Comm) error { _, err := c.Recv(make([]byte, 8), 0, 1); return err }},
	{"Probe", func(c *mpi.Comm) error { _, err := c.Probe(0, 1); return err }},
	{"Irecv+Wait", func(c *mpi.Comm) error {
		r, err := c.Irecv(make([]byte, 8), mpi.AnySource, 1)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}},
	{"RecvInit+Start+Wait", func(c *mpi.Comm) error {
		q, err := c.RecvInit(make([]byte, 8), 0, 1)
		if err != nil {
			return err
		}
		if err := q.Start(); err != nil {
			return err
		}
		_, err = q.Wait()
		return err
	}},
	{"Ssend", func(c *mpi.Comm) error { return c.Ssend([]byte("x"), 0, 1) }},
	{"Barrier", func(c *mpi.Comm) error { return c.Barrier() }},
	{"Allreduce", func(c *mpi.Comm) error { return mpi.Allreduce(c, []int64{1}, make([]int64, 1), mpi.Sum) }},
	{"Ibarrier+Wait", func(c *mpi.Comm) error {
		r, err := c.Ibarrier()
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}},
	{"Iallreduce+Wait", func(c *mpi.Comm) error {
		r, err := mpi.Iallreduce(c, []int64{1}, make([]int64, 1), mpi.Sum)
		if err != nil {
			return err
		}
		_, err = r.Wait()
		return err
	}},
}

func TestRevokeInterrupts(t *testing.T) {
	const n = 4
	for _, btl := range []string{"tcp", "sm"} {
		for _, tc := range blockedOps {
			t.Run(btl+"/"+tc.name, func(t *testing.T) {
				blocking := make(chan *mpi.Comm, n)
				mpitest.Run(t, n, btl, func(p *mpi.Proc) error {
					c, err := p.World().Dup()
					if err != nil {
						return err
					}
					if c.Rank() == 0 {
						if err := untilAllPending(blocking, n-1); err != nil {
							return err
						}
						if err := c.Revoke(); err != nil {
							return err
						}
					} else {
						blocking <- c
						err := within(tc.name, func() error { return tc.op(c) })
						if !errors.Is(err, mpi.ErrRevoked) {
							return fmt.Errorf("%s on a revoked communicator: %v, want ErrRevoked", tc.name, err)
						}
					}
					return afterRevoke(c)
				})
			})
		}
	}
}

// afterRevoke checks that later calls on the revoked c fail at once, that
// the queries work, and that Shrink gives a working communicator.
func afterRevoke(c *mpi.Comm) error {
	if !c.IsRevoked() {
		return fmt.Errorf("IsRevoked false after the revocation")
	}
	later := map[string]error{
		"Send":  c.Send(nil, (c.Rank()+1)%c.Size(), 2),
		"Isend": func() error { _, err := c.Isend(nil, (c.Rank()+1)%c.Size(), 2); return err }(),
		"Recv":  func() error { _, err := c.Recv(nil, mpi.AnySource, 2); return err }(),
		"Iprobe": func() error {
			_, _, err := c.Iprobe(mpi.AnySource, mpi.AnyTag)
			return err
		}(),
		"Barrier":      c.Barrier(),
		"Bcast":        c.Bcast(make([]byte, 1), 0),
		"Dup":          func() error { _, err := c.Dup(); return err }(),
		"Split":        func() error { _, err := c.Split(0, 0); return err }(),
		"SendProcNull": c.Send(nil, mpi.ProcNull, 2),
	}
	for name, err := range later {
		if !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("%s after the revocation: %v, want ErrRevoked", name, err)
		}
	}
	if _, err := c.GetFailed(); err != nil {
		return fmt.Errorf("GetFailed on a revoked communicator: %w", err)
	}
	if _, err := c.AckFailed(0); err != nil {
		return fmt.Errorf("AckFailed on a revoked communicator: %w", err)
	}
	nc, err := c.Shrink()
	if err != nil {
		return fmt.Errorf("shrink a revoked communicator: %w", err)
	}
	if err := c.Free(); err != nil {
		return fmt.Errorf("free a revoked communicator: %w", err)
	}
	sum := []int64{0}
	if err := mpi.Allreduce(nc, []int64{1}, sum, mpi.Sum); err != nil || sum[0] != int64(nc.Size()) {
		return fmt.Errorf("allreduce on the shrunk communicator: %v (sum %d of %d)", err, sum[0], nc.Size())
	}
	return nc.Free()
}

func TestRevokeForwarded(t *testing.T) {
	// Rank 0 revokes, reaches rank 1 alone and dies: rank 1's forward
	// must reach every other survivor, each blocked on a live peer.
	const n = 5
	blocking := make(chan *mpi.Comm, n)
	cfg := mpitest.Config{N: n, BTL: "tcp", AllowFailures: true}
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		c, err := p.World().Dup()
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := untilAllPending(blocking, n-1); err != nil {
				return err
			}
			if err := mpi.RevokeOnlyTo(c, []int{1}); err != nil {
				return err
			}
			mpi.Kill(p)
			return nil
		}
		blocking <- c
		// From the next survivor, who never sends.
		src := 1 + c.Rank()%(n-1)
		err = within("Recv", func() error { _, err := c.Recv(nil, src, 1); return err })
		if !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("rank %d: receive from %d: %v, want ErrRevoked", c.Rank(), src, err)
		}
		nc, err := c.Shrink()
		if err != nil {
			return fmt.Errorf("shrink: %w", err)
		}
		if nc.Size() != n-1 {
			return fmt.Errorf("shrunk to %d ranks, want %d", nc.Size(), n-1)
		}
		return nc.Barrier()
	})
	for _, err := range errs {
		t.Error(err)
	}
}

func TestRevokeRefusesCheckpoint(t *testing.T) {
	// A checkpoint (SaveState) while a communicator is revoked is refused,
	// naming it; after Shrink and Free it is taken.
	blocking := make(chan *mpi.Comm, 2)
	mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
		c, err := p.World().Dup()
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := untilAllPending(blocking, 1); err != nil {
				return err
			}
			if err := c.Revoke(); err != nil {
				return err
			}
		} else {
			blocking <- c
			if _, err := c.Recv(nil, 0, 1); !errors.Is(err, mpi.ErrRevoked) {
				return fmt.Errorf("receive: %v, want ErrRevoked", err)
			}
		}
		_, err = p.SaveState()
		want := fmt.Sprintf("communicator %d is", c.Handle())
		if !errors.Is(err, mpi.ErrRevoked) || !strings.Contains(fmt.Sprint(err), want) || !strings.Contains(fmt.Sprint(err), "shrink it and free it") {
			return fmt.Errorf("SaveState with a revoked communicator: %v", err)
		}
		nc, err := c.Shrink()
		if err != nil {
			return err
		}
		if err := c.Free(); err != nil {
			return err
		}
		if err := nc.Barrier(); err != nil {
			return err
		}
		for {
			_, err = p.SaveState()
			if !errors.Is(err, mpi.ErrBusy) {
				// Busy only while the barrier's last frame is written.
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("SaveState after shrink and free: %w", err)
		}
		return nil
	})
}

func TestRevokeBeforeCreation(t *testing.T) {
	// A notice for a communicator a process has not created yet is kept:
	// the communicator is born revoked, and the forwarding rule applies
	// to it once created. Rank 0 sends rank 1 alone a notice for the
	// handle the next Dup gives, then a message on the world, which rank
	// 1 receives before it calls Dup (frames from one peer arrive in
	// order); after the Dup rank 0 dies, and rank 1 must forward the
	// notice to rank 2, blocked on the new communicator.
	cfg := mpitest.Config{N: 3, BTL: "tcp", AllowFailures: true}
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		w := p.World()
		h := mpi.NextHandle(p)
		switch w.Rank() {
		case 0:
			if err := mpi.SendRevokeNotice(p, 1, h); err != nil {
				return err
			}
			if err := w.Send(nil, 1, 7); err != nil {
				return err
			}
		case 1:
			if _, err := w.Recv(nil, 0, 7); err != nil {
				return err
			}
		}
		c, err := w.Dup()
		if err != nil {
			return err
		}
		if c.Handle() != h {
			return fmt.Errorf("Dup gave handle %d, the test expected %d", c.Handle(), h)
		}
		switch w.Rank() {
		case 0:
			mpi.Kill(p)
			return nil
		case 1:
			if !c.IsRevoked() {
				return fmt.Errorf("the communicator was not born revoked")
			}
			return nil
		}
		err = within("Recv", func() error { _, err := c.Recv(nil, 1, 1); return err })
		if !errors.Is(err, mpi.ErrRevoked) {
			return fmt.Errorf("receive on the communicator: %v, want ErrRevoked", err)
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
}
