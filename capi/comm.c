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
	int rc = gompi_check_init("MPI_Finalize");
	return gompi_error(MPI_COMM_WORLD, gompi_go_finalize(), "MPI_Finalize");
	(void)rc;
}

int PMPI_Abort(MPI_Comm comm, int errorcode) {
	(void)comm; /* gompi aborts the whole job whatever the communicator */
	char msg[64];
	snprintf(msg, sizeof msg, "MPI_Abort called with error code %d", errorcode);
	gompi_go_abort(errorcode, msg);
	return MPI_SUCCESS; /* not reached */
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPI_Comm_dup");
	uintptr_t h;
	int rc = gompi_go_comm_dup((uintptr_t)comm, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Comm_dup");
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
	int rc = gompi_go_comm_free((uintptr_t)*comm);
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

int PMPI_Comm_test_inter(MPI_Comm comm, int *flag) {
	CHECK_COMM(comm, "MPI_Comm_test_inter");
	*flag = 0; /* gompi has intra-communicators only */
	return MPI_SUCCESS;
}

/* The predefined attributes' values (MPI gives the address of each). A
 * message's tag travels as an int; 2^30-1 leaves the sign bit alone. */
static int tag_ub = 0x3fffffff, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0, appnum = 0;

/* predefined_attr answers the predefined keyvals; user keyvals are not
 * implemented yet (MPI_Comm_create_keyval is unsupported), so any other
 * keyval is invalid. */
static int predefined_attr(MPI_Comm comm, int keyval, void *attribute_val, int *flag, const char *fn) {
	CHECK_COMM(comm, fn);
	int *v = NULL;
	switch (keyval) {
	case MPI_TAG_UB: v = &tag_ub; break;
	case MPI_HOST: v = &host; break;
	case MPI_IO: v = &io; break;
	case MPI_WTIME_IS_GLOBAL: v = &wtime_global; break;
	case MPI_APPNUM: v = &appnum; break;
	case MPI_LASTUSEDCODE: v = &gompi_lastusedcode; break;
	case MPI_UNIVERSE_SIZE: /* no dynamic processes: the universe is the job */
		*flag = 0;
		return MPI_SUCCESS;
	default:
		return gompi_error(comm, MPI_ERR_KEYVAL, fn);
	}
	*(int **)attribute_val = v;
	*flag = 1;
	return MPI_SUCCESS;
}

int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag) {
	return predefined_attr(comm, comm_keyval, attribute_val, flag, "MPI_Comm_get_attr");
}

int PMPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag) {
	return predefined_attr(comm, keyval, attribute_val, flag, "MPI_Attr_get");
}

#define GOMPI_FILE_comm
#include "aliases_gen.h"
