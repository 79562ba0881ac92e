/*
 * inter.c: intercommunicators (package mpi's, intercomm.go). An
 * intercommunicator's handle is a communicator handle like any other; C
 * caches its remote size beside its local rank and size, so that
 * MPI_Comm_remote_size, MPI_Comm_test_inter and the point-to-point rank
 * checks answer in C. Point-to-point, MPI_Barrier, Comm_dup/free/compare
 * and Comm_group (the local group) work on one; the other collectives and
 * constructors return MPI_ERR_UNSUPPORTED_OPERATION.
 */
#include "_cgo_export.h"
#include "gompi.h"

/* CHECK_INTER starts an intercommunicator-only call: MPI_ERR_COMM on an
 * intracommunicator. */
#define CHECK_INTER(comm, fn)                                                                   \
	do {                                                                                    \
		CHECK_COMM(comm, fn);                                                           \
		if (gompi_comm_remote_size(comm) <= 0) return gompi_error(comm, MPI_ERR_COMM, fn); \
	} while (0)

int PMPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag, MPI_Comm *newintercomm) {
	CHECK_COMM(local_comm, "MPI_Intercomm_create");
	if (gompi_comm_remote_size(local_comm) != 0) return gompi_error(local_comm, MPI_ERR_COMM, "MPI_Intercomm_create");
	if (tag < 0) return gompi_error(local_comm, MPI_ERR_TAG, "MPI_Intercomm_create");
	uintptr_t h;
	int rc = gompi_go_intercomm_create((uintptr_t)local_comm, local_leader, (uintptr_t)peer_comm, remote_leader, tag, &h);
	if (rc == MPI_SUCCESS) *newintercomm = (MPI_Comm)h;
	return gompi_error(local_comm, rc, "MPI_Intercomm_create");
}

int PMPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm) {
	CHECK_INTER(intercomm, "MPI_Intercomm_merge");
	uintptr_t h;
	int rc = gompi_go_intercomm_merge((uintptr_t)intercomm, high != 0, &h);
	if (rc == MPI_SUCCESS) *newintracomm = (MPI_Comm)h;
	return gompi_error(intercomm, rc, "MPI_Intercomm_merge");
}

int PMPI_Comm_remote_size(MPI_Comm comm, int *size) {
	CHECK_INTER(comm, "MPI_Comm_remote_size");
	*size = gompi_comm_remote_size(comm);
	return MPI_SUCCESS;
}

int PMPI_Comm_remote_group(MPI_Comm comm, MPI_Group *group) {
	CHECK_INTER(comm, "MPI_Comm_remote_group");
	uintptr_t h;
	int rc = gompi_go_comm_remote_group((uintptr_t)comm, &h);
	if (rc == MPI_SUCCESS) *group = (MPI_Group)h;
	return gompi_error(comm, rc, "MPI_Comm_remote_group");
}

int PMPI_Comm_test_inter(MPI_Comm comm, int *flag) {
	CHECK_COMM(comm, "MPI_Comm_test_inter");
	*flag = gompi_comm_remote_size(comm) > 0;
	return MPI_SUCCESS;
}

#define GOMPI_FILE_inter
#include "aliases_gen.h"
