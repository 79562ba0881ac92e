package mpi_test

import (
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestPeerFailure(t *testing.T) {
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			checked := make([]bool, 3)
			cfg := mpitest.Config{N: 3, BTL: btl, AllowFailures: true}
			errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
				w := p.World()
				if w.Rank() == 0 {
					// Talk to both so connections exist both ways, then die.
					for _, q := range []int{1, 2} {
						if err := w.Send([]byte("hi"), q, 1); err != nil {
							return err
						}
						if _, err := w.Recv(nil, q, 2); err != nil {
							return err
						}
					}
					mpi.Kill(p)
					return nil
				}
				if _, err := w.Recv(make([]byte, 2), 0, 1); err != nil {
					return err
				}
				if err := w.Send(nil, 0, 2); err != nil {
					return err
				}
				// Blocked on the dead rank: the receive fails, naming it.
				_, err := w.Recv(nil, 0, 3)
				if rank, ok := mpi.RankOf(err); !errors.Is(err, mpi.ErrProcFailed) || !ok || rank != 0 {
					return fmt.Errorf("receive from the dead rank: %v", err)
				}
				// Sends to it, AnySource receives and collectives on a
				// communicator holding it fail too.
				if err := w.Send(make([]byte, 100), 0, 4); !errors.Is(err, mpi.ErrProcFailed) {
					return fmt.Errorf("send to the dead rank: %v", err)
				}
				if _, err := w.Recv(nil, mpi.AnySource, 5); !errors.Is(err, mpi.ErrProcFailed) {
					return fmt.Errorf("AnySource receive: %v", err)
				}
				if err := w.Barrier(); !errors.Is(err, mpi.ErrProcFailed) {
					return fmt.Errorf("barrier: %v", err)
				}
				// The survivors still talk to each other.
				other := 3 - w.Rank()
				b := make([]byte, 1)
				if _, err := w.Sendrecv([]byte{byte(w.Rank())}, other, 6, b, other, 6); err != nil || int(b[0]) != other {
					return fmt.Errorf("survivors: %v (%v)", err, b)
				}
				checked[w.Rank()] = true
				return nil
			})
			for _, err := range errs {
				t.Error(err)
			}
			if !checked[1] || !checked[2] {
				t.Errorf("survivors finished their checks: %v", checked[1:])
			}
		})
	}
}

func TestMarkFailed(t *testing.T) {
	// The runtime reports a rank lost that this process never talked to.
	cfg := mpitest.Config{N: 2, BTL: "tcp", AllowFailures: true}
	errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 1 {
			mpi.Kill(p)
			return nil
		}
		done := make(chan error, 1)
		go func() { _, err := w.Recv(nil, 1, 0); done <- err }()
		go p.MarkFailed(1, errors.New("daemon saw it exit"))
		if err := <-done; !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("receive after MarkFailed: %v", err)
		}
		return nil
	})
	for _, err := range errs {
		t.Error(err)
	}
}

func TestContextStopsProc(t *testing.T) {
	// Rank 0 waits for a message that never comes; RecvCtx gives up, and a
	// request's WaitCtx too, leaving the Proc usable.
	mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 1 {
			return nil
		}
		ctx, cancel := contextCanceled()
		defer cancel()
		if _, err := w.RecvCtx(ctx, nil, 1, 9); err == nil {
			return fmt.Errorf("RecvCtx with a canceled context succeeded")
		}
		rq, err := w.Irecv(nil, mpi.AnySource, 9)
		if err != nil {
			return err
		}
		if _, err := rq.WaitCtx(ctx); err == nil {
			return fmt.Errorf("WaitCtx with a canceled context succeeded")
		}
		if _, ok, _ := rq.Test(); ok {
			return fmt.Errorf("request completed without a message")
		}
		// Satisfy it from ourselves so nothing is left posted.
		if err := w.Send(nil, 0, 9); err != nil {
			return err
		}
		_, err = rq.Wait()
		return err
	})
}
