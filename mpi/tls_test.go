package mpi_test

import (
	"bytes"
	"fmt"
	"testing"

	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// tcpTLS is a job over tcp with btl_tcp_tls on.
func tcpTLS(n int) mpitest.Config {
	return mpitest.Config{N: n, BTL: "tcp", Settings: []mca.Setting{{Name: "btl_tcp_tls", Value: "1"}}}
}

// TestTCPTLSJob (issue 31 item 1): a job with btl_tcp_tls runs: every
// pair of ranks connects over TLS (keyed from the job's data-plane secret,
// the hello inside), small and large messages pass around a ring intact,
// and a collective completes.
func TestTCPTLSJob(t *testing.T) {
	mpitest.RunWith(t, tcpTLS(4), func(p *mpi.Proc) error {
		w := p.World()
		r, n := w.Rank(), w.Size()
		for _, size := range []int{8, 1<<20 + 5} {
			out := bytes.Repeat([]byte{byte(r + 1)}, size)
			in := make([]byte, size)
			if _, err := w.Sendrecv(out, (r+1)%n, size, in, (r+n-1)%n, size); err != nil {
				return err
			}
			if want := bytes.Repeat([]byte{byte((r+n-1)%n + 1)}, size); !bytes.Equal(in, want) {
				return fmt.Errorf("rank %d: %d bytes from rank %d differ", r, size, (r+n-1)%n)
			}
		}
		for peer := range n {
			if peer != r && p.Transport(peer) != "tcp" {
				return fmt.Errorf("rank %d reaches %d over %q", r, peer, p.Transport(peer))
			}
		}
		in, out := []float64{float64(r)}, make([]float64, 1)
		if err := mpi.Allreduce(w, in, out, mpi.Sum); err != nil {
			return err
		}
		if out[0] != float64(n*(n-1)/2) {
			return fmt.Errorf("rank %d: allreduce %v", r, out[0])
		}
		return nil
	})
}
