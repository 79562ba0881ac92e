/*
 * ompi_style.c: a ULFM program as one is written for Open MPI: mpi-ext.h,
 * and the fault-tolerant path only where the extension is there. It must
 * build unchanged with Open MPI's mpicc (with or without ULFM) and with
 * gompicc, which takes the ULFM path.
 */
#include <mpi.h>
#if defined(OPEN_MPI) || defined(GOMPI)
#include <mpi-ext.h>
#endif
#include <stdio.h>

int main(int argc, char *argv[]) {
	int rank, size, rc;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(OMPI_HAVE_MPI_EXT_FTMPI) && defined(MPIX_FT)
	MPI_Comm shrunk;
	int flag = 1;
	MPI_Group failed;
	int nfailed, acked, eclass;
	rc = MPI_Barrier(MPI_COMM_WORLD);
	MPI_Error_class(rc, &eclass);
	if (eclass == MPIX_ERR_PROC_FAILED || eclass == MPIX_ERR_REVOKED) MPIX_Comm_revoke(MPI_COMM_WORLD);
	rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
	MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed);
	MPI_Group_size(failed, &nfailed);
	MPIX_Comm_ack_failed(MPI_COMM_WORLD, nfailed, &acked);
	MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
	MPI_Comm_size(shrunk, &size);
	MPI_Group_free(&failed);
	MPI_Comm_free(&shrunk);
	printf("rank %d: ulfm yes: agree %d flag %d, %d failed, %d left\n", rank, rc, flag, nfailed, size);
#else
	rc = MPI_Barrier(MPI_COMM_WORLD);
	printf("rank %d: ulfm no: barrier %d, %d ranks\n", rank, rc, size);
#endif
	MPI_Finalize();
	return 0;
}
