package mpi_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestGetFailedAckFailed kills ranks one after the other and checks that
// each survivor lists them in the order it learned of them, and that
// acknowledging is a growing prefix of that list.
func TestGetFailedAckFailed(t *testing.T) {
	mpitest.Run(t, 4, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if g, err := w.GetFailed(); err != nil || g.Size() != 0 {
			return fmt.Errorf("before any failure: %v, %v", g.Members(), err)
		}
		if n, err := w.AckFailed(5); err != nil || n != 0 {
			return fmt.Errorf("ack with nothing failed: %d, %v", n, err)
		}
		if _, err := w.AckFailed(-1); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("ack of -1: %v", err)
		}
		p.MarkFailed(3, errors.New("test"))
		p.MarkFailed(1, errors.New("test"))
		if p.Rank() == 1 || p.Rank() == 3 {
			return nil
		}
		g, err := w.GetFailed()
		if err != nil || !slices.Equal(g.Members(), []int{3, 1}) {
			return fmt.Errorf("failed %v, %v; want [3 1]", g.Members(), err)
		}
		if n, _ := w.AckFailed(1); n != 1 {
			return fmt.Errorf("ack 1: %d acknowledged", n)
		}
		if n, _ := w.AckFailed(0); n != 1 {
			return fmt.Errorf("ack 0 after 1: %d acknowledged, want 1 (never shrinks)", n)
		}
		if n, _ := w.AckFailed(10); n != 2 {
			return fmt.Errorf("ack 10: %d acknowledged, want 2", n)
		}
		return nil
	})
}
