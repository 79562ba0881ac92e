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
// failed process is the rank losing a peer, not the program choosing to
// end the job: the rank exits with the error's code instead of calling
// MPI_Abort, as a Go rank returns its error and exits. The runtime already
// knows of the failure, and its ErrMgr decides: autor restores every rank
// from the last checkpoint (an MPI_Abort would end the job whatever the
// policy: an abort is the program's will), the default ends the job as
// before. Any other error aborts the job, as the standard says.

//export gompi_go_fatal
func gompi_go_fatal(errcode C.int, msg *C.char) {
	if errcode == code(mpi.ErrProcFailed) || errcode == code(mpi.ErrProcFailedPending) {
		fmt.Fprintf(os.Stderr, "gompi: rank %d ends on a failed peer (exit status %d); the job's ErrMgr decides what follows\n", mpi.World().Rank(), int(errcode))
		os.Exit(int(errcode))
	}
	gompi_go_abort(errcode, msg)
}
