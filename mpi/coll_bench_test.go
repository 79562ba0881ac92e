package mpi_test

import (
	"fmt"
	"testing"

	"gompi/mca"
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

// BenchmarkCollNodes times Barrier and an 8-byte integer Allreduce of 4
// ranks on two simulated nodes (uds within a node, tcp between), with han
// and with the flat algorithms alone (coll ^han).
func BenchmarkCollNodes(b *testing.B) {
	for _, sel := range []string{"han", "^han"} {
		for _, op := range []string{"barrier", "allreduce-8B"} {
			b.Run(sel+"/"+op, func(b *testing.B) {
				cfg := mpitest.Config{N: 4, BTL: "tcp,uds", Nodes: []string{"a", "a", "b", "b"},
					Settings: []mca.Setting{{Name: "coll", Value: sel}}}
				if sel == "han" {
					cfg.Settings = nil
				}
				mpitest.RunWith(b, cfg, func(p *mpi.Proc) error {
					w := p.World()
					in, out := []int64{int64(w.Rank())}, []int64{0}
					run := func() error {
						if op == "barrier" {
							return w.Barrier()
						}
						return mpi.Allreduce(w, in, out, mpi.Sum)
					}
					for i := 0; i < 10; i++ {
						if err := run(); err != nil {
							return err
						}
					}
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := run(); err != nil {
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
}
