/* unsupported.c calls a function gompi does not implement under the
 * default error handler (MPI_ERRORS_ARE_FATAL): the job must end. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Win_fence(0, MPI_WIN_NULL);
	printf("still running\n");
	MPI_Finalize();
	return 0;
}
