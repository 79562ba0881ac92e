/*
 * gompi.h: what the C files of package capi share (not installed).
 */
#ifndef GOMPI_INTERNAL_H
#define GOMPI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mpi.h"
#include "mpi-ext.h"

/* A generated stub of a function gompi does not implement; each also has
 * an alias gompi_stub_MPI_X, by which capi's tests tell stubs from
 * implementations in the built library. */
#define GOMPI_STUB

/* Handles gompi creates: GOMPI_HANDLE(kind, id), id being gompi's own
 * deterministic number (a communicator's context id, a creation sequence
 * number), never an address. All are at least 0x10000, above every
 * predefined handle of the standard (those are below 0x400). */
enum {
	GOMPI_KIND_COMM = 1,
	GOMPI_KIND_GROUP = 2,
	GOMPI_KIND_TYPE = 3,
	GOMPI_KIND_OP = 4,
	GOMPI_KIND_ERRHANDLER = 5,
	GOMPI_KIND_INFO = 6,
	GOMPI_KIND_REQUEST = 7,
	GOMPI_KIND_MESSAGE = 8,
	GOMPI_KIND_WIN = 9
};
#define GOMPI_HANDLE_BASE ((uintptr_t)0x10000)
#define GOMPI_HANDLE(kind, id) (GOMPI_HANDLE_BASE + ((uintptr_t)(id) << 4) + (uintptr_t)(kind))
#define GOMPI_HANDLE_KIND(h) ((int)((uintptr_t)(h) & 0xf))
#define GOMPI_HANDLE_ID(h) (((uintptr_t)(h) - GOMPI_HANDLE_BASE) >> 4)

/* Library state: 0 before MPI_Init, 1 initialized, 2 finalized. */
extern int gompi_state;
extern int gompi_thread_level;
/* MPI_LASTUSEDCODE's value: the last error code or class added. */
extern int gompi_lastusedcode;

/* Errors. gompi_error raises code on comm (its error handler decides what
 * happens) and returns what the call returns; gompi_unsupported raises
 * MPI_ERR_UNSUPPORTED_OPERATION for a function gompi does not implement. */
int gompi_error(MPI_Comm comm, int code, const char *fn);
int gompi_unsupported(const char *fn);
int gompi_check_init(const char *fn);
/* gompi_wait_request completes the request *h as MPI_Wait does (p2p.c):
 * polling from C, then parked in Go. */
int gompi_wait_request(uintptr_t *h, MPI_Status *st);
/* gompi_set_err_comm notes, on this thread, the communicator of a request
 * whose completion failed (p2p.c): the error handler its error goes to. */
extern __thread uintptr_t gompi_err_comm;
void gompi_set_err_comm(uintptr_t c);
/* gompi_raise applies error handler eh (of any object kind) to code; obj
 * points to the object's handle, which a user handler is given. */
int gompi_raise(MPI_Errhandler eh, void *obj, int code, const char *fn);
int gompi_errhandler_create(void *fn, MPI_Errhandler *errhandler);
int gompi_errhandler_valid(MPI_Errhandler eh);

/* Communicators' cached values, set by the Go side when it creates one. */
void gompi_comm_put(uintptr_t h, int rank, int size, uintptr_t parent);
void gompi_comm_del(uintptr_t h);
int gompi_comm_known(MPI_Comm c);
/* gompi_comm_dup duplicates a communicator with its attributes and hints
 * (comm.c); an MPI error code. */
int gompi_comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
/* An intercommunicator's remote group size, cached beside its rank and
 * size (the local group's): set after gompi_comm_put; 0 for an
 * intracommunicator, -1 for an unknown handle. */
void gompi_comm_set_remote(uintptr_t h, int remote);
int gompi_comm_remote_size(MPI_Comm c);

/* CHECK_COMM starts a function taking a communicator: the library must be
 * running and the handle one it gave out (or a predefined one). */
#define CHECK_COMM(comm, fn)                                                                 \
	do {                                                                                 \
		gompi_check_init(fn);                                                        \
		if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, fn); \
	} while (0)

/* Attributes (attr.c) of the three kinds of object that have them, keyed
 * by the object's handle. gompi_attr_copy runs the copy callbacks from old
 * to new (on a dup); gompi_attr_free runs the delete callbacks before an
 * object goes. Each returns an MPI error code. */
enum { GOMPI_ATTR_COMM = 1, GOMPI_ATTR_TYPE = 2, GOMPI_ATTR_WIN = 3 };
int gompi_keyval_create(int kind, void *copy, void *del, void *extra, int *out);
int gompi_keyval_free(int kind, int *keyval);
int gompi_attr_set(int kind, uintptr_t h, int keyval, void *val);
int gompi_attr_get(int kind, uintptr_t h, int keyval, void *out, int *flag);
int gompi_attr_delete(int kind, uintptr_t h, int keyval);
int gompi_attr_copy(int kind, uintptr_t old, uintptr_t new);
int gompi_attr_free(int kind, uintptr_t h);

/* Info objects (info.c): a communicator's hints, copied on a dup and
 * dropped on its free. */
int gompi_info_comm_copy(uintptr_t old, uintptr_t new);
void gompi_info_comm_drop(uintptr_t h);

/* Datatypes. gompi_type_size is the fast path C takes for the predefined
 * datatypes that are dense (size = extent, no holes): their size, else -1
 * (the pair types with padding, MPI_DOUBLE_INT..., are not dense: their
 * size is not their extent). gompi_type_size_all knows every datatype
 * (datatype.go), -1 for an unknown handle. */
int64_t gompi_type_size(MPI_Datatype t);
int64_t gompi_type_size_all(MPI_Datatype t);
int64_t gompi_type_size_of(uintptr_t h);

/* Reduction ops (op.c): a user op's C function called from Go, and the
 * predefined ops on long double, which Go has no type for. */
void gompi_op_call(uintptr_t fn, int big, void *in, void *inout, int64_t len, uintptr_t dt);
int gompi_op_ldouble(uintptr_t op, int pair, void *inout, const void *in, int64_t n);

/* Status */
void gompi_status_set(MPI_Status *st, int source, int tag, int64_t bytes, int cancelled);

#endif
