/*
 * comm.c: start and end of the library, and communicators.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

/* The thread that called MPI_Init or MPI_Init_thread: MPI's main thread. */
static pthread_t main_thread;

static int init(int required, int *provided, const char *fn) {
	if (gompi_state != 0) {
		fprintf(stderr, "gompi: %s called twice or after MPI_Finalize\n", fn);
		return MPI_ERR_OTHER;
	}
	int p;
	int rc = gompi_go_init(required, &p);
	if (rc != MPI_SUCCESS) return gompi_error(MPI_COMM_WORLD, rc, fn);
	if (provided) *provided = p;
	main_thread = pthread_self();
	return MPI_SUCCESS;
}

int PMPI_Init(int *argc, char ***argv) {
	(void)argc, (void)argv;
	return init(MPI_THREAD_SINGLE, NULL, "MPI_Init");
}

int PMPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
	(void)argc, (void)argv;
	return init(required, provided, "MPI_Init_thread");
}

int PMPI_Is_thread_main(int *flag) {
	int rc = gompi_check_init("MPI_Is_thread_main");
	if (rc != MPI_SUCCESS) return rc;
	*flag = pthread_equal(main_thread, pthread_self()) != 0;
	return MPI_SUCCESS;
}

int PMPI_Finalize(void) {
	gompi_check_init("MPI_Finalize");
	/* First, as the standard says, MPI_COMM_SELF's attributes are deleted
	 * (last set first) while MPI is still fully usable: the callbacks
	 * are the program's at-exit hooks. Then MPI_COMM_WORLD's, which
	 * MPICH and Open MPI delete too. */
	int rc = gompi_attr_free(GOMPI_ATTR_COMM, (uintptr_t)MPI_COMM_SELF);
	int rc2 = gompi_attr_free(GOMPI_ATTR_COMM, (uintptr_t)MPI_COMM_WORLD);
	int rc3 = gompi_go_finalize();
	if (rc == MPI_SUCCESS) rc = rc2;
	if (rc == MPI_SUCCESS) rc = rc3;
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Finalize");
}

int PMPI_Abort(MPI_Comm comm, int errorcode) {
	(void)comm; /* gompi aborts the whole job whatever the communicator */
	char msg[64];
	snprintf(msg, sizeof msg, "MPI_Abort called with error code %d", errorcode);
	gompi_go_abort(errorcode, msg);
	return MPI_SUCCESS; /* not reached */
}

/* gompi_comm_dup duplicates comm with its attributes (their copy
 * callbacks run) and its info hints; when a callback fails, the new
 * communicator is freed again and the callback's code returned. */
int gompi_comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
	uintptr_t h;
	int rc = gompi_go_comm_dup((uintptr_t)comm, &h);
	if (rc != MPI_SUCCESS) return rc;
	rc = gompi_attr_copy(GOMPI_ATTR_COMM, (uintptr_t)comm, h);
	if (rc == MPI_SUCCESS) rc = gompi_info_comm_copy((uintptr_t)comm, h);
	if (rc != MPI_SUCCESS) {
		gompi_attr_free(GOMPI_ATTR_COMM, h);
		gompi_info_comm_drop(h);
		gompi_go_comm_free(h);
		return rc;
	}
	*newcomm = (MPI_Comm)h;
	return MPI_SUCCESS;
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPI_Comm_dup");
	return gompi_error(comm, gompi_comm_dup(comm, newcomm), "MPI_Comm_dup");
}

int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPI_Comm_split");
	uintptr_t h;
	int rc = gompi_go_comm_split((uintptr_t)comm, color, key, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Comm_split");
}

int PMPI_Comm_free(MPI_Comm *comm) {
	CHECK_COMM(*comm, "MPI_Comm_free");
	if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) return gompi_error(*comm, MPI_ERR_COMM, "MPI_Comm_free");
	/* the delete callbacks run first; one that fails keeps the communicator */
	int rc = gompi_attr_free(GOMPI_ATTR_COMM, (uintptr_t)*comm);
	if (rc != MPI_SUCCESS) return gompi_error(*comm, rc, "MPI_Comm_free");
	gompi_info_comm_drop((uintptr_t)*comm);
	rc = gompi_go_comm_free((uintptr_t)*comm);
	if (rc != MPI_SUCCESS) return gompi_error(*comm, rc, "MPI_Comm_free");
	*comm = MPI_COMM_NULL;
	return MPI_SUCCESS;
}

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int *result) {
	CHECK_COMM(comm1, "MPI_Comm_compare");
	CHECK_COMM(comm2, "MPI_Comm_compare");
	return gompi_error(comm1, gompi_go_comm_compare((uintptr_t)comm1, (uintptr_t)comm2, result), "MPI_Comm_compare");
}

int PMPI_Comm_set_name(MPI_Comm comm, const char *comm_name) {
	CHECK_COMM(comm, "MPI_Comm_set_name");
	return gompi_error(comm, gompi_go_comm_set_name((uintptr_t)comm, (char *)comm_name), "MPI_Comm_set_name");
}

int PMPI_Comm_get_name(MPI_Comm comm, char *comm_name, int *resultlen) {
	CHECK_COMM(comm, "MPI_Comm_get_name");
	return gompi_error(comm, gompi_go_comm_get_name((uintptr_t)comm, comm_name, resultlen), "MPI_Comm_get_name");
}

#define GOMPI_FILE_comm
#include "aliases_gen.h"
