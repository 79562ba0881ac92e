package mpi_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// Benchmarks run two Procs in this process over real sockets. ns/op of
// PingPong is one round trip; lat-us is half of it (the usual one-way
// latency); MB/s counts both directions.

var benchSizes = []struct {
	name string
	size int
}{{"8B", 8}, {"1MiB", 1 << 20}}

// benchTransports are the transports the point-to-point benchmarks
// compare: tcp+tls is tcp with btl_tcp_tls on; tcp+nopoll is tcp with
// btl_tcp_poll=0, which TLS connections imply (a tls.Conn cannot be
// busy-polled), so that TLS's own cost can be told from polling's.
var benchTransports = append(slices.Clone(transports), "tcp+tls", "tcp+nopoll")

// benchJob is a job of two ranks over transport btl (a benchTransports
// name).
func benchJob(btl string) mpitest.Config {
	switch btl {
	case "tcp+tls":
		return tcpTLS(2)
	case "tcp+nopoll":
		return mpitest.Config{N: 2, BTL: "tcp", Settings: []mca.Setting{{Name: "btl_tcp_poll", Value: "0"}}}
	}
	return mpitest.Config{N: 2, BTL: btl}
}

func BenchmarkPingPong(b *testing.B) {
	for _, btl := range benchTransports {
		for _, s := range benchSizes {
			b.Run(btl+"/"+s.name, func(b *testing.B) {
				b.SetBytes(int64(2 * s.size))
				mpitest.RunWith(b, benchJob(btl), func(p *mpi.Proc) error {
					w := p.World()
					buf := make([]byte, s.size)
					other := 1 - w.Rank()
					pingpong := func(n int) error {
						for i := 0; i < n; i++ {
							if w.Rank() == 0 {
								if err := w.Send(buf, other, 1); err != nil {
									return err
								}
								if _, err := w.Recv(buf, other, 1); err != nil {
									return err
								}
							} else {
								if _, err := w.Recv(buf, other, 1); err != nil {
									return err
								}
								if err := w.Send(buf, other, 1); err != nil {
									return err
								}
							}
						}
						return nil
					}
					if err := pingpong(100); err != nil { // connect and warm up
						return err
					}
					if err := w.Barrier(); err != nil {
						return err
					}
					start := time.Now()
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					if err := pingpong(b.N); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.StopTimer()
						b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N)/2, "lat-us")
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkStream is streaming bandwidth: rank 0 keeps a window of Isends
// in flight, rank 1 a window of Irecvs; ns/op is one message.
func BenchmarkStream(b *testing.B) {
	const window = 16
	for _, btl := range benchTransports {
		b.Run(btl+"/1MiB", func(b *testing.B) {
			size := 1 << 20
			b.SetBytes(int64(size))
			mpitest.RunWith(b, benchJob(btl), func(p *mpi.Proc) error {
				w := p.World()
				bufs := make([][]byte, window)
				for i := range bufs {
					bufs[i] = make([]byte, size)
				}
				stream := func(n int) error {
					reqs := make([]*mpi.Request, 0, window)
					for i := 0; i < n; i += window {
						reqs = reqs[:0]
						for k := 0; k < window && i+k < n; k++ {
							var rq *mpi.Request
							var err error
							if w.Rank() == 0 {
								rq, err = w.Isend(bufs[k], 1, 2)
							} else {
								rq, err = w.Irecv(bufs[k], 0, 2)
							}
							if err != nil {
								return err
							}
							reqs = append(reqs, rq)
						}
						if _, err := mpi.Waitall(reqs); err != nil {
							return err
						}
					}
					// The receiver's ack ends the timing at the sender.
					if w.Rank() == 0 {
						_, err := w.Recv(nil, 1, 3)
						return err
					}
					return w.Send(nil, 0, 3)
				}
				if err := stream(window); err != nil {
					return err
				}
				if w.Rank() == 0 {
					b.ResetTimer()
				}
				if err := stream(b.N); err != nil {
					return err
				}
				if w.Rank() == 0 {
					b.StopTimer()
				}
				return nil
			})
		})
	}
}

func BenchmarkAllreduce(b *testing.B) {
	for _, n := range []int{2, 4} {
		for _, count := range []int{1, 1 << 17} {
			b.Run(fmt.Sprintf("n=%d/%dB", n, 8*count), func(b *testing.B) {
				mpitest.Run(b, n, "uds", func(p *mpi.Proc) error {
					w := p.World()
					in, out := make([]float64, count), make([]float64, count)
					for i := 0; i < 10; i++ {
						if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
							return err
						}
					}
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					for i := 0; i < b.N; i++ {
						if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
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
