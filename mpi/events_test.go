package mpi_test

import (
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestNotifyFailures: a rank that computes (no MPI call) hears of a peer
// whose connection broke and of a rank the runtime reports, each once per
// subscriber, in the order learned; a late subscriber hears of the known
// ones first; StopFailures ends the sending.
func TestNotifyFailures(t *testing.T) {
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			cfg := mpitest.Config{N: 4, BTL: btl, AllowFailures: true}
			errs := mpitest.Start(cfg, func(p *mpi.Proc) error {
				w := p.World()
				switch w.Rank() {
				case 0:
					return watchFailures(p)
				case 2:
					// Connections both ways, then die: rank 0 sees them break.
					if err := w.Send([]byte{1}, 0, 1); err != nil {
						return err
					}
					if _, err := w.Recv(nil, 0, 2); err != nil {
						return err
					}
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

func watchFailures(p *mpi.Proc) error {
	w := p.World()
	early := make(chan mpi.Failure) // unbuffered: the library must not wait for it
	p.NotifyFailures(early)
	p.NotifyFailures(early) // again: no second subscription
	if _, err := w.Recv(make([]byte, 1), 2, 1); err != nil {
		return err
	}
	if err := w.Send(nil, 2, 2); err != nil {
		return err
	}
	// No MPI call from here: the failures come to the channel alone.
	if f := <-early; f.Rank != 2 || f.Cause == nil {
		return fmt.Errorf("first event %v, want rank 2's broken connection", f)
	}
	report := errors.New("reported lost by the test's runtime")
	p.MarkFailed(1, report)
	p.MarkFailed(2, errors.New("a second report of rank 2"))
	p.MarkFailed(3, report)
	for _, want := range []int{1, 3} {
		if f := <-early; f.Rank != want || !errors.Is(f.Cause, report) {
			return fmt.Errorf("event %v, want rank %d with the runtime's report", f, want)
		}
	}
	late := make(chan mpi.Failure, 3)
	p.NotifyFailures(late)
	for _, want := range []int{2, 1, 3} {
		if f := <-late; f.Rank != want {
			return fmt.Errorf("late subscriber: event %v, want rank %d (the order learned)", f, want)
		}
	}
	p.StopFailures(early)
	p.StopFailures(late)
	p.StopFailures(late) // again: ignored
	select {
	case f := <-late:
		return fmt.Errorf("event %v after StopFailures (each failure once)", f)
	default:
	}
	return nil
}
