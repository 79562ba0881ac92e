package mpi_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestCommCreateGroup: the even and the odd ranks each make a communicator
// of their own at once, with the same tag, the odd ones in reverse order;
// only members call. Each works (an Allreduce), is logged as a Split for
// restart, and a later world Dup gets a context of its own.
func TestCommCreateGroup(t *testing.T) {
	for n := 1; n <= 5; n++ {
		mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			w := p.World()
			var mine []int
			for r := w.Rank() % 2; r < n; r += 2 {
				mine = append(mine, r)
			}
			if w.Rank()%2 == 1 {
				slices.Reverse(mine)
			}
			g, err := w.Group().Incl(mine)
			if err != nil {
				return err
			}
			c, err := w.CreateGroup(ctx, g, 7)
			if err != nil {
				return err
			}
			if c.Size() != len(mine) || mine[c.Rank()] != w.Rank() || c.WorldRank(0) != mine[0] {
				return fmt.Errorf("rank %d: size %d rank %d", w.Rank(), c.Size(), c.Rank())
			}
			sum := []int64{int64(w.Rank())}
			if err := mpi.Allreduce(c, sum, sum, mpi.Sum); err != nil {
				return err
			}
			want := int64(0)
			for _, r := range mine {
				want += int64(r)
			}
			if sum[0] != want {
				return fmt.Errorf("allreduce on the group's communicator: %d, want %d", sum[0], want)
			}
			log := p.CreationLog()
			e := log[len(log)-1]
			if e.Op != mpi.OpSplit || e.Parent != w.Handle() || e.Handle != c.Handle() || !slices.Equal(e.Members, mine) {
				return fmt.Errorf("creation log entry %+v", e)
			}
			d, err := w.Dup()
			if err != nil {
				return err
			}
			if d.Handle() == c.Handle() {
				return fmt.Errorf("world dup took the group communicator's context %d", c.Handle())
			}
			if err := mpi.Allreduce(d, sum, sum, mpi.Sum); err != nil {
				return err
			}
			return nil
		})
	}
}

// TestCommCreateGroupErrors: a process outside the group, and a tag out
// of range, are refused without communicating.
func TestCommCreateGroupErrors(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		other, err := w.Group().Incl([]int{1 - w.Rank()})
		if err != nil {
			return err
		}
		if _, err := w.CreateGroup(context.Background(), other, 0); err == nil {
			return fmt.Errorf("a non-member's CreateGroup succeeded")
		}
		if _, err := w.CreateGroup(context.Background(), w.Group(), -1); err == nil {
			return fmt.Errorf("CreateGroup with tag -1 succeeded")
		}
		return nil
	})
}
