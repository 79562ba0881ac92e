package mpi

import "errors"

// Kill cuts a Proc off as if its process died: connections drop without a
// goodbye and its own calls fail.
func Kill(p *Proc) {
	p.stop(&ProcFailedError{Rank: p.rank, Cause: errors.New("killed by the test")})
	p.shutdown()
}
