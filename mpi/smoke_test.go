package mpi_test

import (
	"bytes"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestSmokeRing(t *testing.T) {
	for _, btl := range []string{"tcp", "uds"} {
		t.Run(btl, func(t *testing.T) {
			mpitest.Run(t, 3, btl, func(p *mpi.Proc) error {
				w := p.World()
				n, r := w.Size(), w.Rank()
				for _, size := range []int{0, 8, 100 << 10} {
					msg := bytes.Repeat([]byte{byte(r)}, size)
					buf := make([]byte, size)
					rq, err := w.Irecv(buf, (r-1+n)%n, 7)
					if err != nil {
						return err
					}
					if err := w.Send(msg, (r+1)%n, 7); err != nil {
						return err
					}
					st, err := rq.Wait()
					if err != nil {
						return err
					}
					if st.Source != (r-1+n)%n || st.Tag != 7 || st.Count != size {
						return fmt.Errorf("status %+v", st)
					}
					if size > 0 && buf[0] != byte((r-1+n)%n) {
						return fmt.Errorf("payload from %d", buf[0])
					}
				}
				return nil
			})
		})
	}
}
