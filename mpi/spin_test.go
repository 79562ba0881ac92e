package mpi_test

import (
	"bytes"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// With the waiters polling their requests (as on a node with a core for
// each Go processor), blocking receives, Wait and WaitCtx still deliver
// every message whole and in order, on both stream transports; run with
// -race this checks the hand-off of a request's outcome through the poll.
func TestWaitersThatPoll(t *testing.T) {
	for _, btl := range []string{"tcp", "uds"} {
		t.Run(btl, func(t *testing.T) {
			mpitest.Run(t, 2, btl, func(p *mpi.Proc) error {
				mpi.SetSpin(p, true)
				w := p.World()
				other := 1 - w.Rank()
				buf := make([]byte, 64)
				for i := range 2000 {
					msg := []byte(fmt.Sprintf("message %d from %d", i, w.Rank()))
					if err := w.Send(msg, other, i%3); err != nil {
						return err
					}
					want := []byte(fmt.Sprintf("message %d from %d", i, other))
					var st mpi.Status
					var err error
					switch i % 3 {
					case 0:
						st, err = w.Recv(buf, other, 0)
					case 1:
						var r *mpi.Request
						if r, err = w.Irecv(buf, other, 1); err == nil {
							st, err = r.Wait()
						}
					case 2:
						var r *mpi.Request
						if r, err = w.Irecv(buf, other, 2); err == nil {
							st, err = r.WaitCtx(t.Context())
						}
					}
					if err != nil {
						return fmt.Errorf("message %d: %w", i, err)
					}
					if got := buf[:st.Count]; !bytes.Equal(got, want) {
						return fmt.Errorf("message %d: got %q, want %q", i, got, want)
					}
				}
				return nil
			})
		})
	}
}
