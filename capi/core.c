/*
 * core.c: the calls that stay in C because they need nothing of package mpi
 * (cached ranks and sizes, clocks, versions, datatype sizes, status fields,
 * handle conversion) and the error-handler dispatch every call ends in.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "gompi.h"

int gompi_state;
int gompi_thread_level;

/* ---- Communicators' cache ------------------------------------------------- */

/* comm_slot is what C keeps of a communicator: enough for Comm_rank/size
 * and the error handler without a call into Go. */
typedef struct {
	uintptr_t h; /* 0: free */
	int rank, size;
	MPI_Errhandler eh;
	int remote; /* an intercommunicator's remote size; 0: an intracommunicator */
} comm_slot;

enum { COMM_SLOTS = 4096 };
static comm_slot world = {(uintptr_t)MPI_COMM_WORLD, 0, 1, MPI_ERRORS_ARE_FATAL};
static comm_slot self = {(uintptr_t)MPI_COMM_SELF, 0, 1, MPI_ERRORS_ARE_FATAL};
static comm_slot comms[COMM_SLOTS];
static pthread_mutex_t comms_mu = PTHREAD_MUTEX_INITIALIZER;

/* find returns c's slot or NULL; the caller holds comms_mu for user
 * communicators (WORLD and SELF are never moved). */
static comm_slot *find(uintptr_t h) {
	if (h == (uintptr_t)MPI_COMM_WORLD) return &world;
	if (h == (uintptr_t)MPI_COMM_SELF) return &self;
	if (h < GOMPI_HANDLE_BASE || GOMPI_HANDLE_KIND(h) != GOMPI_KIND_COMM) return NULL;
	size_t i = GOMPI_HANDLE_ID(h) % COMM_SLOTS;
	for (size_t n = 0; n < COMM_SLOTS; n++, i = (i + 1) % COMM_SLOTS) {
		if (comms[i].h == h) return &comms[i];
		if (comms[i].h == 0) return NULL;
	}
	return NULL;
}

void gompi_comm_put(uintptr_t h, int rank, int size, uintptr_t parent) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *p = find(parent);
	MPI_Errhandler eh = p ? p->eh : MPI_ERRORS_ARE_FATAL;
	comm_slot *s = find(h);
	if (s == NULL && h != (uintptr_t)MPI_COMM_WORLD && h != (uintptr_t)MPI_COMM_SELF) {
		size_t i = GOMPI_HANDLE_ID(h) % COMM_SLOTS;
		while (comms[i].h != 0 && comms[i].h != (uintptr_t)-1) i = (i + 1) % COMM_SLOTS;
		s = &comms[i];
	}
	s->h = h;
	s->rank = rank;
	s->size = size;
	s->remote = 0;
	s->eh = eh;
	pthread_mutex_unlock(&comms_mu);
}

void gompi_comm_del(uintptr_t h) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find(h);
	/* a tombstone keeps the probe chains of the others intact */
	if (s != NULL && s != &world && s != &self) s->h = (uintptr_t)-1;
	pthread_mutex_unlock(&comms_mu);
}

int gompi_comm_known(MPI_Comm c) {
	pthread_mutex_lock(&comms_mu);
	int ok = find((uintptr_t)c) != NULL;
	pthread_mutex_unlock(&comms_mu);
	return ok;
}

void gompi_comm_set_remote(uintptr_t h, int remote) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find(h);
	if (s != NULL) s->remote = remote;
	pthread_mutex_unlock(&comms_mu);
}

int gompi_comm_remote_size(MPI_Comm c) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)c);
	int remote = s ? s->remote : -1;
	pthread_mutex_unlock(&comms_mu);
	return remote;
}

int PMPI_Comm_rank(MPI_Comm comm, int *rank) {
	if (gompi_state != 1) return gompi_check_init("MPI_Comm_rank");
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)comm);
	if (s != NULL) *rank = s->rank;
	pthread_mutex_unlock(&comms_mu);
	return s ? MPI_SUCCESS : gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_rank");
}

int PMPI_Comm_size(MPI_Comm comm, int *size) {
	if (gompi_state != 1) return gompi_check_init("MPI_Comm_size");
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)comm);
	if (s != NULL) *size = s->size;
	pthread_mutex_unlock(&comms_mu);
	return s ? MPI_SUCCESS : gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_size");
}

/* ---- Error handlers --------------------------------------------------------- */

/* User error handlers by creation number, in chunks that never move (a
 * handler runs without the lock) and are made as needed: a handle names
 * one handler for good, and programs create and free thousands (MPICH's
 * commcall: 2000). */
enum { EH_CHUNK = 1024, EH_CHUNKS = 4096 };
static MPI_Comm_errhandler_function **eh_chunks[EH_CHUNKS];
static int nerrhandlers;

static MPI_Comm_errhandler_function *eh_at(uintptr_t id) { return eh_chunks[id / EH_CHUNK][id % EH_CHUNK]; }

static const char *class_strings[] = {
	[MPI_SUCCESS] = "no error",
	[MPI_ERR_BUFFER] = "invalid buffer pointer",
	[MPI_ERR_COUNT] = "invalid count argument",
	[MPI_ERR_TYPE] = "invalid datatype",
	[MPI_ERR_TAG] = "invalid tag",
	[MPI_ERR_COMM] = "invalid communicator",
	[MPI_ERR_RANK] = "invalid rank",
	[MPI_ERR_REQUEST] = "invalid request",
	[MPI_ERR_ROOT] = "invalid root",
	[MPI_ERR_GROUP] = "invalid group",
	[MPI_ERR_OP] = "invalid reduce operation",
	[MPI_ERR_TOPOLOGY] = "invalid topology",
	[MPI_ERR_DIMS] = "invalid dimension argument",
	[MPI_ERR_ARG] = "invalid argument of some other kind",
	[MPI_ERR_UNKNOWN] = "unknown error",
	[MPI_ERR_TRUNCATE] = "message truncated",
	[MPI_ERR_OTHER] = "known error not in this list",
	[MPI_ERR_INTERN] = "internal MPI (implementation) error",
	[MPI_ERR_PENDING] = "pending request",
	[MPI_ERR_IN_STATUS] = "error code is in status",
	[MPI_ERR_INFO_KEY] = "key longer than MPI_MAX_INFO_KEY",
	[MPI_ERR_INFO_NOKEY] = "invalid key passed to MPI_Info_delete",
	[MPI_ERR_INFO_VALUE] = "value longer than MPI_MAX_INFO_VAL",
	[MPI_ERR_INFO] = "invalid info argument",
	[MPI_ERR_KEYVAL] = "invalid keyval",
	[MPI_ERR_NAME] = "invalid service name",
	[MPI_ERR_NO_MEM] = "out of memory",
	[MPI_ERR_UNSUPPORTED_OPERATION] = "operation not supported",
	[MPI_ERR_PROC_ABORTED] = "operation with a process that aborted",
	[MPI_ERR_VALUE_TOO_LARGE] = "value too large to store",
	[MPI_ERR_ERRHANDLER] = "invalid error handler",
	[MPI_ERR_ABI] = "ABI mismatch",
	[MPIX_ERR_PROC_FAILED] = "process failure",
	[MPIX_ERR_PROC_FAILED_PENDING] = "process failure, request pending",
	[MPIX_ERR_REVOKED] = "communication object revoked",
};

/* Error classes and codes a program adds (MPI_Add_error_class/code):
 * numbered from MPI_ERR_LASTCODE+1 in the order they are added, the same
 * on every process that adds them in the same order. user_class[i] is the
 * class of number MPI_ERR_LASTCODE+1+i (its own number for a class). */
#define USER_CODES 4096
static int user_class[USER_CODES];
static char *user_string[USER_CODES];
static int user_n;
static pthread_mutex_t user_mu = PTHREAD_MUTEX_INITIALIZER;
int gompi_lastusedcode = MPI_ERR_LASTCODE;

/* user_index is the slot of an added code or class, -1 for another number.
 * Called with user_mu held. */
static int user_index(int code) {
	int i = code - MPI_ERR_LASTCODE - 1;
	return i >= 0 && i < user_n ? i : -1;
}

static int add_code(int cls, int *out, const char *fn) {
	gompi_check_init(fn);
	pthread_mutex_lock(&user_mu);
	int ok = user_n < USER_CODES;
	if (ok && cls >= 0) {
		int i = user_index(cls);
		ok = (cls < MPI_ERR_LASTCODE && cls < (int)(sizeof class_strings / sizeof class_strings[0]) &&
		      class_strings[cls] != NULL) ||
		     (i >= 0 && user_class[i] == cls);
	}
	if (ok) {
		int code = MPI_ERR_LASTCODE + 1 + user_n;
		user_class[user_n++] = cls >= 0 ? cls : code;
		gompi_lastusedcode = code;
		*out = code;
	}
	pthread_mutex_unlock(&user_mu);
	return ok ? MPI_SUCCESS : gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, fn);
}

int PMPI_Add_error_class(int *errorclass) { return add_code(-1, errorclass, "MPI_Add_error_class"); }

int PMPI_Add_error_code(int errorclass, int *errorcode) {
	if (errorclass < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Add_error_code");
	return add_code(errorclass, errorcode, "MPI_Add_error_code");
}

int PMPI_Add_error_string(int errorcode, const char *string) {
	gompi_check_init("MPI_Add_error_string");
	pthread_mutex_lock(&user_mu);
	int i = user_index(errorcode);
	if (i >= 0) {
		free(user_string[i]);
		user_string[i] = strndup(string, MPI_MAX_ERROR_STRING - 1);
	}
	pthread_mutex_unlock(&user_mu);
	return i >= 0 ? MPI_SUCCESS : gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Add_error_string");
}

int PMPI_Error_class(int errorcode, int *errorclass) {
	if (errorcode > MPI_ERR_LASTCODE) {
		pthread_mutex_lock(&user_mu);
		int i = user_index(errorcode);
		if (i >= 0) *errorclass = user_class[i];
		pthread_mutex_unlock(&user_mu);
		return i >= 0 ? MPI_SUCCESS : gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Error_class");
	}
	if (errorcode < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Error_class");
	*errorclass = errorcode;
	return MPI_SUCCESS;
}

int PMPI_Error_string(int errorcode, char *string, int *resultlen) {
	const char *s = NULL;
	if (errorcode >= 0 && errorcode < (int)(sizeof class_strings / sizeof class_strings[0]))
		s = class_strings[errorcode];
	char buf[64];
	if (errorcode > MPI_ERR_LASTCODE) {
		/* an added code: its string, empty until MPI_Add_error_string */
		pthread_mutex_lock(&user_mu);
		int i = user_index(errorcode);
		if (i >= 0) snprintf(string, MPI_MAX_ERROR_STRING, "%s", user_string[i] ? user_string[i] : "");
		pthread_mutex_unlock(&user_mu);
		if (i < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Error_string");
		*resultlen = (int)strlen(string);
		return MPI_SUCCESS;
	}
	if (s == NULL) {
		if (errorcode < 0 || errorcode > MPI_ERR_LASTCODE)
			return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Error_string");
		snprintf(buf, sizeof buf, "MPI error %d", errorcode);
		s = buf;
	}
	snprintf(string, MPI_MAX_ERROR_STRING, "%s", s);
	*resultlen = (int)strlen(string);
	return MPI_SUCCESS;
}

static MPI_Errhandler comm_errhandler(MPI_Comm comm) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)comm);
	MPI_Errhandler eh = s ? s->eh : self.eh;
	pthread_mutex_unlock(&comms_mu);
	return eh;
}

/* gompi_raise applies error handler eh to code, raised by fn on the object
 * whose handle obj points to (what a user handler is given). */
int gompi_raise(MPI_Errhandler eh, void *obj, int code, const char *fn) {
	if (code == MPI_SUCCESS || eh == MPI_ERRORS_RETURN) return code;
	uintptr_t h = (uintptr_t)eh;
	if (h >= GOMPI_HANDLE_BASE && GOMPI_HANDLE_KIND(h) == GOMPI_KIND_ERRHANDLER &&
	    GOMPI_HANDLE_ID(h) < (uintptr_t)nerrhandlers) {
		eh_at(GOMPI_HANDLE_ID(h))((MPI_Comm *)obj, &code);
		return code;
	}
	char msg[MPI_MAX_ERROR_STRING + 256];
	char es[MPI_MAX_ERROR_STRING];
	int n;
	PMPI_Error_string(code, es, &n);
	if (code == MPI_ERR_UNSUPPORTED_OPERATION)
		snprintf(msg, sizeof msg, "%s is not implemented by gompi (MPI_ERR_UNSUPPORTED_OPERATION)", fn);
	else
		snprintf(msg, sizeof msg, "%s: %s (error %d)", fn, es, code);
	fprintf(stderr, "gompi: %s\n", msg);
	fflush(stderr);
	gompi_go_fatal(code, msg);
	return code; /* not reached */
}

int gompi_error(MPI_Comm comm, int code, const char *fn) {
	if (code == MPI_SUCCESS) return code;
	return gompi_raise(comm_errhandler(comm), &comm, code, fn);
}

int gompi_unsupported(const char *fn) { return gompi_error(MPI_COMM_SELF, MPI_ERR_UNSUPPORTED_OPERATION, fn); }

/* gompi_check_init reports a call made before MPI_Init or after
 * MPI_Finalize: with no library to raise it on, it is fatal, as the
 * standard leaves it. */
int gompi_check_init(const char *fn) {
	if (gompi_state == 1) return MPI_SUCCESS;
	fprintf(stderr, "gompi: %s called %s\n", fn, gompi_state == 0 ? "before MPI_Init" : "after MPI_Finalize");
	fflush(stderr);
	_exit(1);
}

/* gompi_errhandler_create files a user error handler of any kind (the
 * object it is called with is the caller's to match). */
int gompi_errhandler_create(void *fn, MPI_Errhandler *errhandler) {
	pthread_mutex_lock(&comms_mu);
	int chunk = nerrhandlers / EH_CHUNK;
	int ok = chunk < EH_CHUNKS;
	if (ok && eh_chunks[chunk] == NULL) {
		eh_chunks[chunk] = calloc(EH_CHUNK, sizeof *eh_chunks[chunk]);
		ok = eh_chunks[chunk] != NULL;
	}
	if (ok) {
		eh_chunks[chunk][nerrhandlers % EH_CHUNK] = (MPI_Comm_errhandler_function *)fn;
		*errhandler = (MPI_Errhandler)GOMPI_HANDLE(GOMPI_KIND_ERRHANDLER, nerrhandlers);
		nerrhandlers++;
	}
	pthread_mutex_unlock(&comms_mu);
	return ok ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn, MPI_Errhandler *errhandler) {
	return gompi_error(MPI_COMM_SELF, gompi_errhandler_create((void *)fn, errhandler), "MPI_Comm_create_errhandler");
}

int gompi_errhandler_valid(MPI_Errhandler eh) {
	uintptr_t h = (uintptr_t)eh;
	if (eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_ABORT || eh == MPI_ERRORS_RETURN) return 1;
	return h >= GOMPI_HANDLE_BASE && GOMPI_HANDLE_KIND(h) == GOMPI_KIND_ERRHANDLER &&
	       GOMPI_HANDLE_ID(h) < (uintptr_t)nerrhandlers;
}

int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)comm);
	int ok = gompi_errhandler_valid(errhandler);
	if (s != NULL && ok) s->eh = errhandler;
	pthread_mutex_unlock(&comms_mu);
	if (s == NULL) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_set_errhandler");
	if (!ok) return gompi_error(comm, MPI_ERR_ARG, "MPI_Comm_set_errhandler");
	return MPI_SUCCESS;
}

int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler) {
	pthread_mutex_lock(&comms_mu);
	comm_slot *s = find((uintptr_t)comm);
	if (s != NULL) *errhandler = s->eh;
	pthread_mutex_unlock(&comms_mu);
	return s ? MPI_SUCCESS : gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_get_errhandler");
}

int PMPI_Errhandler_free(MPI_Errhandler *errhandler) {
	/* user handlers keep their slot: a communicator may still use one, and
	 * slots are never reused, so a handle means one handler for good */
	if (!gompi_errhandler_valid(*errhandler)) return gompi_error(MPI_COMM_SELF, MPI_ERR_ARG, "MPI_Errhandler_free");
	*errhandler = MPI_ERRHANDLER_NULL;
	return MPI_SUCCESS;
}

int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
	if (!gompi_comm_known(comm)) return gompi_error(MPI_COMM_SELF, MPI_ERR_COMM, "MPI_Comm_call_errhandler");
	gompi_error(comm, errorcode, "MPI_Comm_call_errhandler");
	return MPI_SUCCESS;
}

/* ---- Clocks, versions, names ------------------------------------------------ */

double PMPI_Wtime(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double PMPI_Wtick(void) {
	struct timespec ts;
	clock_getres(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int PMPI_Get_version(int *version, int *subversion) {
	*version = MPI_VERSION;
	*subversion = MPI_SUBVERSION;
	return MPI_SUCCESS;
}

int PMPI_Abi_get_version(int *abi_major, int *abi_minor) {
	*abi_major = MPI_ABI_VERSION;
	*abi_minor = MPI_ABI_SUBVERSION;
	return MPI_SUCCESS;
}

int PMPI_Get_library_version(char *version, int *resultlen) {
	snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
		 "gompi (MPI %d.%d, standard ABI %d.%d): a Go MPI runtime; C interface over package mpi",
		 MPI_VERSION, MPI_SUBVERSION, MPI_ABI_VERSION, MPI_ABI_SUBVERSION);
	*resultlen = (int)strlen(version);
	return MPI_SUCCESS;
}

int PMPI_Get_processor_name(char *name, int *resultlen) {
	if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) snprintf(name, MPI_MAX_PROCESSOR_NAME, "localhost");
	name[MPI_MAX_PROCESSOR_NAME - 1] = 0;
	*resultlen = (int)strlen(name);
	return MPI_SUCCESS;
}

int PMPI_Initialized(int *flag) {
	*flag = gompi_state >= 1;
	return MPI_SUCCESS;
}

int PMPI_Finalized(int *flag) {
	*flag = gompi_state == 2;
	return MPI_SUCCESS;
}

int PMPI_Query_thread(int *provided) {
	*provided = gompi_thread_level;
	return MPI_SUCCESS;
}

int PMPI_Pcontrol(const int level, ...) {
	(void)level; /* no profiling levels: the call has no effect, as allowed */
	return MPI_SUCCESS;
}

/* ---- Datatypes and status ------------------------------------------------------ */

int64_t gompi_type_size(MPI_Datatype t) {
	switch ((uintptr_t)t) {
	case (uintptr_t)MPI_AINT: return sizeof(MPI_Aint);
	case (uintptr_t)MPI_COUNT: return sizeof(MPI_Count);
	case (uintptr_t)MPI_OFFSET: return sizeof(MPI_Offset);
	case (uintptr_t)MPI_PACKED: return 1;
	case (uintptr_t)MPI_SHORT: return sizeof(short);
	case (uintptr_t)MPI_INT: return sizeof(int);
	case (uintptr_t)MPI_LONG: return sizeof(long);
	case (uintptr_t)MPI_LONG_LONG: return sizeof(long long);
	case (uintptr_t)MPI_UNSIGNED_SHORT: return sizeof(unsigned short);
	case (uintptr_t)MPI_UNSIGNED: return sizeof(unsigned);
	case (uintptr_t)MPI_UNSIGNED_LONG: return sizeof(unsigned long);
	case (uintptr_t)MPI_UNSIGNED_LONG_LONG: return sizeof(unsigned long long);
	case (uintptr_t)MPI_FLOAT: return sizeof(float);
	case (uintptr_t)MPI_C_FLOAT_COMPLEX: return 2 * sizeof(float);
	case (uintptr_t)MPI_CXX_FLOAT_COMPLEX: return 2 * sizeof(float);
	case (uintptr_t)MPI_DOUBLE: return sizeof(double);
	case (uintptr_t)MPI_C_DOUBLE_COMPLEX: return 2 * sizeof(double);
	case (uintptr_t)MPI_CXX_DOUBLE_COMPLEX: return 2 * sizeof(double);
	case (uintptr_t)MPI_LONG_DOUBLE: return sizeof(long double);
	case (uintptr_t)MPI_C_LONG_DOUBLE_COMPLEX: return 2 * sizeof(long double);
	case (uintptr_t)MPI_CXX_LONG_DOUBLE_COMPLEX: return 2 * sizeof(long double);
	case (uintptr_t)MPI_FLOAT_INT: return sizeof(struct { float v; int i; });
	case (uintptr_t)MPI_2INT: return 2 * sizeof(int);
	case (uintptr_t)MPI_C_BOOL: return sizeof(_Bool);
	case (uintptr_t)MPI_CXX_BOOL: return 1;
	case (uintptr_t)MPI_WCHAR: return sizeof(wchar_t);
	case (uintptr_t)MPI_INT8_T: case (uintptr_t)MPI_UINT8_T: case (uintptr_t)MPI_CHAR:
	case (uintptr_t)MPI_SIGNED_CHAR: case (uintptr_t)MPI_UNSIGNED_CHAR: case (uintptr_t)MPI_BYTE:
		return 1;
	case (uintptr_t)MPI_INT16_T: case (uintptr_t)MPI_UINT16_T: return 2;
	case (uintptr_t)MPI_INT32_T: case (uintptr_t)MPI_UINT32_T: return 4;
	case (uintptr_t)MPI_INT64_T: case (uintptr_t)MPI_UINT64_T: return 8;
	}
	return -1;
}

/* The status's private ints hold the message's length in bytes (two
 * ints, low first) and whether it was cancelled. */
void gompi_status_set(MPI_Status *st, int source, int tag, int64_t bytes, int cancelled) {
	if (st == MPI_STATUS_IGNORE) return;
	st->MPI_SOURCE = source;
	st->MPI_TAG = tag;
	st->MPI_ERROR = MPI_SUCCESS;
	st->MPI_internal[0] = (int)(uint32_t)(uint64_t)bytes;
	st->MPI_internal[1] = (int)(uint32_t)((uint64_t)bytes >> 32);
	st->MPI_internal[2] = cancelled;
}

int PMPI_Test_cancelled(const MPI_Status *status, int *flag) {
	*flag = status->MPI_internal[2] != 0;
	return MPI_SUCCESS;
}

int PMPI_Status_set_cancelled(MPI_Status *status, int flag) {
	status->MPI_internal[2] = flag != 0;
	return MPI_SUCCESS;
}

int PMPI_Status_set_elements(MPI_Status *status, MPI_Datatype datatype, int count) {
	int64_t n = gompi_type_size_all(datatype);
	if (n < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Status_set_elements");
	gompi_status_set(status, status->MPI_SOURCE, status->MPI_TAG, n * count, status->MPI_internal[2]);
	return MPI_SUCCESS;
}

int PMPI_Status_set_elements_c(MPI_Status *status, MPI_Datatype datatype, MPI_Count count) {
	int64_t n = gompi_type_size_all(datatype);
	if (n < 0) return gompi_error(MPI_COMM_SELF, MPI_ERR_TYPE, "MPI_Status_set_elements_c");
	gompi_status_set(status, status->MPI_SOURCE, status->MPI_TAG, n * count, status->MPI_internal[2]);
	return MPI_SUCCESS;
}

/* The MPI-3 name of the large-count form. */
int PMPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype datatype, MPI_Count count) {
	return PMPI_Status_set_elements_c(status, datatype, count);
}

/* ---- Address arithmetic and handle conversion ----------------------------------- */

MPI_Aint PMPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return base + disp; }
MPI_Aint PMPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) { return addr1 - addr2; }

int PMPI_Get_address(const void *location, MPI_Aint *address) {
	*address = (MPI_Aint)location;
	return MPI_SUCCESS;
}

/* Handles are small integers already (predefined ones below 0x400,
 * gompi's from 0x10000 up), so conversion to and from Fortran's int is the
 * value itself. */
MPI_Comm PMPI_Comm_fromint(int v) { return (MPI_Comm)(intptr_t)v; }
int PMPI_Comm_toint(MPI_Comm h) { return (int)(intptr_t)h; }
MPI_Errhandler PMPI_Errhandler_fromint(int v) { return (MPI_Errhandler)(intptr_t)v; }
int PMPI_Errhandler_toint(MPI_Errhandler h) { return (int)(intptr_t)h; }
MPI_File PMPI_File_fromint(int v) { return (MPI_File)(intptr_t)v; }
int PMPI_File_toint(MPI_File h) { return (int)(intptr_t)h; }
MPI_Group PMPI_Group_fromint(int v) { return (MPI_Group)(intptr_t)v; }
int PMPI_Group_toint(MPI_Group h) { return (int)(intptr_t)h; }
MPI_Info PMPI_Info_fromint(int v) { return (MPI_Info)(intptr_t)v; }
int PMPI_Info_toint(MPI_Info h) { return (int)(intptr_t)h; }
MPI_Message PMPI_Message_fromint(int v) { return (MPI_Message)(intptr_t)v; }
int PMPI_Message_toint(MPI_Message h) { return (int)(intptr_t)h; }
MPI_Op PMPI_Op_fromint(int v) { return (MPI_Op)(intptr_t)v; }
int PMPI_Op_toint(MPI_Op h) { return (int)(intptr_t)h; }
MPI_Request PMPI_Request_fromint(int v) { return (MPI_Request)(intptr_t)v; }
int PMPI_Request_toint(MPI_Request h) { return (int)(intptr_t)h; }
MPI_Session PMPI_Session_fromint(int v) { return (MPI_Session)(intptr_t)v; }
int PMPI_Session_toint(MPI_Session h) { return (int)(intptr_t)h; }
MPI_Datatype PMPI_Type_fromint(int v) { return (MPI_Datatype)(intptr_t)v; }
int PMPI_Type_toint(MPI_Datatype h) { return (int)(intptr_t)h; }
MPI_Win PMPI_Win_fromint(int v) { return (MPI_Win)(intptr_t)v; }
int PMPI_Win_toint(MPI_Win h) { return (int)(intptr_t)h; }

#define GOMPI_FILE_core
#include "aliases_gen.h"
