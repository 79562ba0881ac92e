package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestRollBackInPlace: 4 ranks save their library state at a common point
// (a message to rank 1 still unreceived, a Dup made), go on, block in
// receives and a collective that cannot finish, and are rolled back: every
// blocked call fails (ErrRolledBack, or ErrProcFailed when a peer's
// rollback closed its connection first), every later one with
// ErrRolledBack, and after Restore the
// world keeps its handle, the saved message is delivered, the program's
// Dup replays to a working communicator (the old one is freed) and
// collectives agree again.
func TestRollBackInPlace(t *testing.T) {
	for _, btl := range []string{"uds", "tcp"} {
		t.Run(btl, func(t *testing.T) { rollBackInPlace(t, btl) })
	}
}

func rollBackInPlace(t *testing.T, btl string) {
	const n = 4
	var blocked, saved sync.WaitGroup
	blocked.Add(n)
	saved.Add(n)
	rollNow := make(chan struct{})
	go func() {
		blocked.Wait()
		close(rollNow)
	}()
	mpitest.Run(t, n, btl, func(p *mpi.Proc) error {
		w := p.World()
		interrupted := make(chan error, 1)
		go func() {
			<-rollNow
			interrupted <- p.RollBack(1)
		}()
		state, dup, err := saveAPoint(p, &saved)
		if err != nil {
			return err
		}
		// Go on past the point, then block where nothing can finish.
		if err := mpi.Allreduce(w, []int{1}, make([]int, 1), mpi.Sum); err != nil {
			return fmt.Errorf("allreduce past the point: %w", err)
		}
		blocked.Done()
		switch w.Rank() {
		case 2, 3:
			_, err = w.Recv(make([]byte, 1), 5-w.Rank(), 99) // 2 and 3 wait on each other
		default:
			err = mpi.Allreduce(w, []int{1}, make([]int, 1), mpi.Sum)
		}
		// A peer that rolled back first closed its connections: the
		// call may have seen that as its failure before this rank's own
		// rollback came, as cr.Run documents (it treats both alike).
		if !errors.Is(err, mpi.ErrRolledBack) && !errors.Is(err, mpi.ErrProcFailed) {
			return fmt.Errorf("blocked call: %v, want ErrRolledBack or ErrProcFailed", err)
		}
		if err := <-interrupted; err != nil {
			return err
		}
		if err := w.Send([]byte{1}, (w.Rank()+1)%n, 5); !errors.Is(err, mpi.ErrRolledBack) {
			return fmt.Errorf("send during the rollback: %v, want ErrRolledBack", err)
		}
		if err := p.Restore(t.Context(), state); err != nil {
			return err
		}
		return afterRestore(p, w, dup)
	})
}

// saveAPoint makes a Dup and leaves a message from rank 0 to rank 1
// unreceived, then saves the library state once every rank is there. No
// rank sends again before every rank saved (saved, outside the library):
// the states are a consistent cut, as a coordinated checkpoint's are.
func saveAPoint(p *mpi.Proc, saved *sync.WaitGroup) ([]byte, *mpi.Comm, error) {
	w := p.World()
	dup, err := w.Dup()
	if err != nil {
		return nil, nil, err
	}
	if w.Rank() == 0 {
		if err := w.Send([]byte("saved"), 1, 7); err != nil {
			return nil, nil, err
		}
	}
	if err := w.Barrier(); err != nil {
		return nil, nil, err
	}
	if w.Rank() == 1 {
		// The message is in rank 1's library before the save.
		if _, err := w.Probe(0, 7); err != nil {
			return nil, nil, err
		}
	}
	state, err := p.SaveState()
	saved.Done()
	if err != nil {
		return nil, nil, err
	}
	saved.Wait()
	// Past the point: the message is received and the Dup freed; the
	// rollback brings both back.
	if w.Rank() == 1 {
		if _, err := w.Recv(make([]byte, 5), 0, 7); err != nil {
			return nil, nil, err
		}
	}
	return state, dup, w.Barrier()
}

func afterRestore(p *mpi.Proc, w *mpi.Comm, oldDup *mpi.Comm) error {
	if p.World() != w {
		return errors.New("the world changed handle")
	}
	if err := oldDup.Barrier(); err == nil {
		return errors.New("a communicator made before the rollback still works")
	}
	dup, err := w.Dup() // replays the saved Dup
	if err != nil {
		return fmt.Errorf("dup again: %w", err)
	}
	p.EndReplay()
	if w.Rank() == 1 {
		buf := make([]byte, 5)
		if _, err := w.Recv(buf, 0, 7); err != nil || !bytes.Equal(buf, []byte("saved")) {
			return fmt.Errorf("the saved message: %q, %v", buf, err)
		}
	}
	sum := make([]int, 1)
	if err := mpi.Allreduce(dup, []int{w.Rank()}, sum, mpi.Sum); err != nil || sum[0] != 6 {
		return fmt.Errorf("allreduce on the replayed dup: %v, %v", sum, err)
	}
	next, prev := (w.Rank()+1)%4, (w.Rank()+3)%4
	if err := w.Send([]byte{byte(w.Rank())}, next, 3); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := w.Recv(b, prev, 3); err != nil || int(b[0]) != prev {
		return fmt.Errorf("ring after the restore: %v, %v", b, err)
	}
	return w.Barrier()
}
