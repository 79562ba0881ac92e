package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"fmt"
	"os"

	"gompi/mpi"
)

// A fatal error handler (MPI_ERRORS_ARE_FATAL, the default) raised on a
// failed process (its class, or MPI_ERR_IN_STATUS from a Waitall or the
// like) once this rank knows a process of the job failed is the rank
// losing a peer, not the program choosing to end the job: the rank exits
// with the error's code instead of calling MPI_Abort, as a Go rank
// returns its error and exits. The runtime knows of the failure already,
// and its ErrMgr decides: autor restores every rank from the last
// checkpoint (an MPI_Abort would end the job whatever the policy, an
// abort being the program's will), the default ends the job as before.
// Any other fatal error aborts the job, as the standard says.

//export gompi_go_fatal
func gompi_go_fatal(errcode C.int, msg *C.char) {
	onFailure := errcode == code(mpi.ErrProcFailed) || errcode == code(mpi.ErrProcFailedPending) || errcode == C.MPI_ERR_IN_STATUS
	if onFailure && C.gompi_state == 1 && knowsFailure() {
		status := int(errcode) & 0xff // an exit status is a byte; never 0, a success
		if status == 0 {
			status = 1
		}
		fmt.Fprintf(os.Stderr, "gompi: rank %d ends on a failed process (exit status %d); the job's error manager decides what follows\n", mpi.World().Rank(), status)
		os.Exit(status)
	}
	gompi_go_abort(errcode, msg)
}

// knowsFailure reports whether this rank learned that a process of
// MPI_COMM_WORLD failed.
func knowsFailure() bool {
	g, err := mpi.World().GetFailed()
	return err == nil && g.Size() > 0
}
