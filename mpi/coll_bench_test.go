package mpi_test

import (
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// BenchmarkBarrier times one Barrier of n ranks over uds, all on one node
// (the collective's latency path: empty messages only).
func BenchmarkBarrier(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			mpitest.Run(b, n, "uds", func(p *mpi.Proc) error {
				w := p.World()
				for i := 0; i < 10; i++ {
					if err := w.Barrier(); err != nil {
						return err
					}
				}
				if w.Rank() == 0 {
					b.ResetTimer()
				}
				for i := 0; i < b.N; i++ {
					if err := w.Barrier(); err != nil {
						return err
					}
				}
				if w.Rank() == 0 {
					b.StopTimer()
				}
				return nil
			})
		})
	}
}
