package mpi_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// BenchmarkRevoke measures a revocation's propagation: from rank 0's
// Revoke call to the last other rank's blocked Recv returning ErrRevoked,
// n in-process ranks over uds. Each iteration revokes a fresh Dup of the
// world once every other rank is blocked on it; the median over the
// iterations is reported as median-µs (ns/op also counts the Dup, the
// wait for the ranks to block and a Barrier).
func BenchmarkRevoke(b *testing.B) {
	for _, n := range []int{4, 8, 16, 32, 64} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ends := make([]time.Time, n)
			var took []time.Duration
			blocking := make(chan *mpi.Comm, n)
			mpitest.Run(b, n, "uds", func(p *mpi.Proc) error {
				w := p.World()
				for i := 0; i < b.N; i++ {
					c, err := w.Dup()
					if err != nil {
						return err
					}
					var start time.Time
					if w.Rank() == 0 {
						if err := untilAllPending(blocking, n-1); err != nil {
							return err
						}
						start = time.Now()
						if err := c.Revoke(); err != nil {
							return err
						}
					} else {
						blocking <- c
						if _, err := c.Recv(nil, 0, 1); err == nil {
							return fmt.Errorf("receive on a revoked communicator succeeded")
						}
						ends[w.Rank()] = time.Now()
					}
					// The ranks' times are read after the barrier.
					if err := w.Barrier(); err != nil {
						return err
					}
					if w.Rank() == 0 {
						last := slices.MaxFunc(ends[1:], time.Time.Compare)
						took = append(took, last.Sub(start))
					}
					if err := c.Free(); err != nil {
						return err
					}
				}
				return nil
			})
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "median-µs")
		})
	}
}
