package mpi_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// untilWaiting waits until p has a goroutine blocked waiting, bounded by
// revokeBound.
func untilWaiting(p *mpi.Proc) error {
	deadline := time.Now().Add(revokeBound)
	for mpi.Waiting(p) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d never waited", p.Rank())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func TestAnySourceAfterFailure(t *testing.T) {
	// Rank 2 dies while rank 0 waits on an AnySource Irecv. ULFM's rules
	// at rank 0: the Wait reports the failure pending and the request
	// stays active; blocking AnySource receives fail until AckFailed;
	// receives from the dead rank fail; then the pending Irecv completes
	// with rank 1's message and AnySource receives work again.
	for _, btl := range []string{"tcp", "sm"} {
		t.Run(btl, func(t *testing.T) {
			procs := make(chan *mpi.Proc, 1)
			cfg := mpitest.Config{N: 3, BTL: btl, AllowFailures: true}
			errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
				w := p.World()
				// Connections both ways between every pair: rank 2's
				// death is seen by both survivors.
				if err := w.Alltoall(make([]byte, 3), make([]byte, 3)); err != nil {
					return err
				}
				switch w.Rank() {
				case 0:
					procs <- p
					return anySourceRules(p)
				case 1:
					return anySourcePeer(w)
				}
				// Rank 2 dies once rank 0 waits on its receive.
				if err := untilWaiting(<-procs); err != nil {
					return err
				}
				mpi.Kill(p)
				return nil
			})
			for _, err := range errs {
				t.Error(err)
			}
		})
	}
}

func anySourceRules(p *mpi.Proc) error {
	w := p.World()
	buf := make([]byte, 8)
	rq, err := w.Irecv(buf, mpi.AnySource, 5)
	if err != nil {
		return err
	}
	cancelled, err := w.Irecv(nil, mpi.AnySource, 6)
	if err != nil {
		return err
	}
	// Blocked when rank 2 fails: pending, not failed.
	err = within("Wait", func() error { _, err := rq.Wait(); return err })
	if !errors.Is(err, mpi.ErrProcFailedPending) || errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("Wait on an AnySource Irecv as a member fails: %v, want ErrProcFailedPending", err)
	}
	if _, ok, err := rq.Test(); ok || !errors.Is(err, mpi.ErrProcFailedPending) {
		return fmt.Errorf("Test of the pending receive: done %v, %v", ok, err)
	}
	if i, _, err := mpi.Waitany([]*mpi.Request{nil, rq}); i != 1 || !errors.Is(err, mpi.ErrProcFailedPending) {
		return fmt.Errorf("Waitany of the pending receive: %d, %v", i, err)
	}
	if _, err := w.Recv(nil, mpi.AnySource, 7); !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("blocking AnySource receive with a failure unacknowledged: %v, want ErrProcFailed", err)
	}
	if _, err := w.Probe(mpi.AnySource, 7); !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("AnySource probe with a failure unacknowledged: %v, want ErrProcFailed", err)
	}
	if _, err := w.Recv(nil, 2, 7); !errors.Is(err, mpi.ErrProcFailed) {
		return fmt.Errorf("receive from the dead rank: %v, want ErrProcFailed", err)
	}
	// Cancel works on a pending receive.
	if err := cancelled.Cancel(); err != nil {
		return err
	}
	if st, err := cancelled.Wait(); err != nil || !st.Cancelled {
		return fmt.Errorf("cancelled pending receive: %+v, %v", st, err)
	}
	failed, err := w.GetFailed()
	if err != nil || failed.Size() != 1 {
		return fmt.Errorf("GetFailed: %v, %v", failed, err)
	}
	if n, err := w.AckFailed(failed.Size()); err != nil || n != 1 {
		return fmt.Errorf("AckFailed: %d, %v", n, err)
	}
	// Acknowledged: the pending receive waits normally and gets rank
	// 1's message, and blocking AnySource receives work.
	if err := w.Send(nil, 1, 100); err != nil {
		return err
	}
	st, err := within2(rq.Wait)
	if err != nil || st.Source != 1 || string(buf[:st.Count]) != "pending" {
		return fmt.Errorf("the pending receive after AckFailed: %+v %q, %v", st, buf[:st.Count], err)
	}
	if st, err := w.Recv(buf, mpi.AnySource, 7); err != nil || st.Source != 1 {
		return fmt.Errorf("blocking AnySource receive after AckFailed: %+v, %v", st, err)
	}
	if st, err := w.Probe(mpi.AnySource, 8); err != nil || st.Source != 1 {
		return fmt.Errorf("AnySource probe after AckFailed: %+v, %v", st, err)
	}
	_, err = w.Recv(buf, 1, 8)
	return err
}

// within2 is within for a Wait.
func within2(wait func() (mpi.Status, error)) (mpi.Status, error) {
	var st mpi.Status
	err := within("Wait", func() error {
		var err error
		st, err = wait()
		return err
	})
	return st, err
}

// anySourcePeer sends rank 0 its messages once rank 0 acknowledged.
func anySourcePeer(w *mpi.Comm) error {
	if _, err := w.Recv(nil, 0, 100); err != nil {
		return err
	}
	for tag, msg := range map[int]string{5: "pending", 7: "blocking", 8: "probed"} {
		if err := w.Send([]byte(msg), 0, tag); err != nil {
			return err
		}
	}
	return nil
}
