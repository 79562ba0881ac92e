package mpi_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// TestForgedHello: processes that know the job id (it is public) but not
// the job's secret connect to rank 1's TCP port as rank 0 first: one with
// a wrong proof, one with the bare hello of old (job id, no proof) and a
// message behind it, one that stalls in the middle of its hello. Both are
// refused or left waiting, and the real rank 0 still connects and its
// messages arrive; rank 1 receives nothing from the impostors.
func TestForgedHello(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if p.Rank() == 0 {
			addr := mpi.PeerAddr(p, 1)
			wrong := make([]byte, 32)
			rand.Read(wrong)
			c, err := mpi.ForgeHello(addr, p.Job(), 0, 1, wrong)
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, io.EOF) && !isReset(err) {
				return fmt.Errorf("a hello with a wrong proof was not refused: %v", err)
			}
			if err := mpi.ForgeBareHello(addr, p.Job(), 0, 1); !errors.Is(err, io.EOF) && !isReset(err) {
				return fmt.Errorf("a hello with no proof at all was not refused: %v", err)
			}
			stalled, err := mpi.ForgeHello(addr, p.Job(), 0, 1, nil)
			if err != nil {
				return fmt.Errorf("stalled impostor: %w", err)
			}
			defer stalled.Close()
			if err := w.Send([]byte("from the real rank 0"), 1, 7); err != nil {
				return err
			}
		} else {
			buf := make([]byte, 64)
			st, err := w.Recv(buf, 0, 7)
			if err != nil {
				return err
			}
			if !bytes.Equal(buf[:st.Count], []byte("from the real rank 0")) {
				return fmt.Errorf("received %q", buf[:st.Count])
			}
		}
		return w.Barrier()
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
