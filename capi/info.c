/*
 * info.c: Info objects (ordered key/value lists, held wholly in C) and a
 * communicator's info hints, which gompi keeps as given (it acts on none)
 * and copies on a dup.
 *
 * Handles are GOMPI_HANDLE(GOMPI_KIND_INFO, n), n the creation number of
 * the object in this process, never an address. Keys keep the order in
 * which they were first set; setting a key again replaces its value in
 * place (MPI_Info_get_nthkey's order, as in Open MPI). The Info calls
 * need no initialized MPI (MPI-4 allows them before MPI_Init and after
 * MPI_Finalize).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "gompi.h"

typedef struct {
	char *key, *val;
} entry;

typedef struct {
	int n, cap;
	entry *e;
} info;

static pthread_mutex_t info_mu = PTHREAD_MUTEX_INITIALIZER;
static info **infos; /* by creation number; NULL once freed */
static size_t ninfos, capinfos;
static info env;     /* MPI_INFO_ENV */
static int env_made;

/* A communicator's hints: comm_hints[i] belongs to comm_handles[i]. */
static uintptr_t *comm_handles;
static info **comm_hints;
static size_t ncomm, capcomm;

static void clear(info *in) {
	for (int i = 0; i < in->n; i++) free(in->e[i].key), free(in->e[i].val);
	free(in->e);
	*in = (info){0};
}

static int index_of(const info *in, const char *key) {
	for (int i = 0; i < in->n; i++)
		if (strcmp(in->e[i].key, key) == 0) return i;
	return -1;
}

static int put(info *in, const char *key, const char *val) {
	char *v = strdup(val);
	if (v == NULL) return MPI_ERR_NO_MEM;
	int i = index_of(in, key);
	if (i >= 0) {
		free(in->e[i].val);
		in->e[i].val = v;
		return MPI_SUCCESS;
	}
	char *k = strdup(key);
	if (k != NULL && in->n == in->cap) {
		int c = in->cap ? 2 * in->cap : 8;
		entry *e = realloc(in->e, (size_t)c * sizeof *e);
		if (e != NULL) in->e = e, in->cap = c;
	}
	if (k == NULL || in->n == in->cap) {
		free(k), free(v);
		return MPI_ERR_NO_MEM;
	}
	in->e[in->n++] = (entry){k, v};
	return MPI_SUCCESS;
}

static int copy_into(info *dst, const info *src) {
	for (int i = 0; i < src->n; i++) {
		int rc = put(dst, src->e[i].key, src->e[i].val);
		if (rc != MPI_SUCCESS) return rc;
	}
	return MPI_SUCCESS;
}

/* fill_env puts in what the standard suggests for MPI_INFO_ENV that gompi
 * knows the same before and after MPI_Init (MPI_Info_create_env may come
 * at any time and must give the same): the command, this host and the
 * working directory. */
static void fill_env(info *in) {
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n > 0) buf[n] = 0, put(in, "command", buf);
	int len;
	if (PMPI_Get_processor_name(buf, &len) == MPI_SUCCESS) put(in, "host", buf);
	if (getcwd(buf, sizeof buf) != NULL) put(in, "wdir", buf);
}

/* make_env fills MPI_INFO_ENV once MPI is initialized (info_mu held). */
static void make_env(void) {
	if (env_made || gompi_state != 1) return;
	env_made = 1;
	fill_env(&env);
}

/* get returns the object behind a handle, or NULL; info_mu held. */
static info *get(MPI_Info h) {
	if (h == MPI_INFO_ENV) {
		make_env();
		return &env;
	}
	uintptr_t u = (uintptr_t)h;
	if (u < GOMPI_HANDLE_BASE || GOMPI_HANDLE_KIND(u) != GOMPI_KIND_INFO) return NULL;
	uintptr_t id = GOMPI_HANDLE_ID(u);
	return id < ninfos ? infos[id] : NULL;
}

/* add files a new object and returns its handle (0 when out of memory);
 * info_mu held. */
static MPI_Info add(info *in) {
	if (ninfos == capinfos) {
		size_t c = capinfos ? 2 * capinfos : 64;
		info **p = realloc(infos, c * sizeof *p);
		if (p == NULL) return 0;
		infos = p, capinfos = c;
	}
	infos[ninfos] = in;
	return (MPI_Info)GOMPI_HANDLE(GOMPI_KIND_INFO, ninfos++);
}

/* new_copy makes a new object holding src's entries (none for NULL). */
static int new_copy(const info *src, MPI_Info *out) {
	info *in = calloc(1, sizeof *in);
	int rc = in == NULL ? MPI_ERR_NO_MEM : MPI_SUCCESS;
	if (rc == MPI_SUCCESS && src != NULL) rc = copy_into(in, src);
	MPI_Info h = rc == MPI_SUCCESS ? add(in) : 0;
	if (h == 0) {
		if (in != NULL) clear(in);
		free(in);
		return MPI_ERR_NO_MEM;
	}
	*out = h;
	return MPI_SUCCESS;
}

static int fail_info(int rc, const char *fn) { return gompi_error(MPI_COMM_WORLD, rc, fn); }

/* check_key validates a key argument: MPI_ERR_INFO_KEY when it is empty
 * or longer than MPI_MAX_INFO_KEY-1. */
static int check_key(const char *key) {
	if (key == NULL) return MPI_ERR_INFO_KEY;
	size_t n = strnlen(key, MPI_MAX_INFO_KEY);
	return n == 0 || n >= MPI_MAX_INFO_KEY ? MPI_ERR_INFO_KEY : MPI_SUCCESS;
}

int PMPI_Info_create(MPI_Info *out) {
	pthread_mutex_lock(&info_mu);
	int rc = new_copy(NULL, out);
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_create");
}

int PMPI_Info_dup(MPI_Info h, MPI_Info *out) {
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	int rc = in == NULL ? MPI_ERR_INFO : new_copy(in, out);
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_dup");
}

/* MPI_Info_create_env may come before MPI_Init (MPI-4). */
int PMPI_Info_create_env(int argc, char *argv[], MPI_Info *out) {
	(void)argc, (void)argv; /* the values come from the job, as MPI_INFO_ENV's */
	pthread_mutex_lock(&info_mu);
	int rc = new_copy(NULL, out);
	if (rc == MPI_SUCCESS) fill_env(get(*out));
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_create_env");
}

int PMPI_Info_free(MPI_Info *h) {
	pthread_mutex_lock(&info_mu);
	info *in = *h == MPI_INFO_ENV ? NULL : get(*h);
	if (in != NULL) {
		clear(in);
		free(in);
		infos[GOMPI_HANDLE_ID((uintptr_t)*h)] = NULL;
	}
	pthread_mutex_unlock(&info_mu);
	if (in == NULL) return fail_info(MPI_ERR_INFO, "MPI_Info_free");
	*h = MPI_INFO_NULL;
	return MPI_SUCCESS;
}

int PMPI_Info_set(MPI_Info h, const char *key, const char *value) {
	int rc = check_key(key);
	if (rc == MPI_SUCCESS && (value == NULL || strnlen(value, MPI_MAX_INFO_VAL) >= MPI_MAX_INFO_VAL))
		rc = MPI_ERR_INFO_VALUE;
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	if (in == NULL) rc = MPI_ERR_INFO;
	if (rc == MPI_SUCCESS) rc = put(in, key, value);
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_set");
}

int PMPI_Info_delete(MPI_Info h, const char *key) {
	int rc = check_key(key);
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	if (in == NULL) rc = MPI_ERR_INFO;
	int i = rc == MPI_SUCCESS ? index_of(in, key) : -1;
	if (rc == MPI_SUCCESS && i < 0) rc = MPI_ERR_INFO_NOKEY;
	if (i >= 0) {
		free(in->e[i].key), free(in->e[i].val);
		memmove(&in->e[i], &in->e[i + 1], (size_t)(in->n - i - 1) * sizeof in->e[0]);
		in->n--;
	}
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_delete");
}

/* lookup_value finds key's value: the info's error (with *flag untouched)
 * or MPI_SUCCESS with *flag set and, when found, a copy in *val. */
static int lookup_value(MPI_Info h, const char *key, char **val, int *flag) {
	int rc = check_key(key);
	*val = NULL;
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	if (in == NULL) rc = MPI_ERR_INFO;
	if (rc == MPI_SUCCESS) {
		int i = index_of(in, key);
		*flag = i >= 0;
		if (i >= 0 && (*val = strdup(in->e[i].val)) == NULL) rc = MPI_ERR_NO_MEM;
	}
	pthread_mutex_unlock(&info_mu);
	return rc;
}

int PMPI_Info_get(MPI_Info h, const char *key, int valuelen, char *value, int *flag) {
	if (valuelen < 0) return fail_info(MPI_ERR_ARG, "MPI_Info_get");
	char *v;
	int rc = lookup_value(h, key, &v, flag);
	if (v != NULL) {
		/* at most valuelen characters, and the terminating NUL */
		size_t n = strnlen(v, (size_t)valuelen);
		memcpy(value, v, n);
		value[n] = 0;
		free(v);
	}
	return fail_info(rc, "MPI_Info_get");
}

int PMPI_Info_get_valuelen(MPI_Info h, const char *key, int *valuelen, int *flag) {
	char *v;
	int rc = lookup_value(h, key, &v, flag);
	if (v != NULL) *valuelen = (int)strlen(v);
	free(v);
	return fail_info(rc, "MPI_Info_get_valuelen");
}

/* MPI_Info_get_string (MPI-4): *buflen in is the buffer's size (0: just
 * ask), out the value's length with its NUL. */
int PMPI_Info_get_string(MPI_Info h, const char *key, int *buflen, char *value, int *flag) {
	if (*buflen < 0) return fail_info(MPI_ERR_ARG, "MPI_Info_get_string");
	char *v;
	int rc = lookup_value(h, key, &v, flag);
	if (v != NULL) {
		size_t n = strlen(v);
		if (*buflen > 0) {
			size_t m = n < (size_t)*buflen - 1 ? n : (size_t)*buflen - 1;
			memcpy(value, v, m);
			value[m] = 0;
		}
		*buflen = (int)n + 1;
		free(v);
	}
	return fail_info(rc, "MPI_Info_get_string");
}

int PMPI_Info_get_nkeys(MPI_Info h, int *nkeys) {
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	if (in != NULL) *nkeys = in->n;
	pthread_mutex_unlock(&info_mu);
	return in == NULL ? fail_info(MPI_ERR_INFO, "MPI_Info_get_nkeys") : MPI_SUCCESS;
}

int PMPI_Info_get_nthkey(MPI_Info h, int n, char *key) {
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	int rc = in == NULL ? MPI_ERR_INFO : n < 0 || n >= in->n ? MPI_ERR_ARG : MPI_SUCCESS;
	if (rc == MPI_SUCCESS) snprintf(key, MPI_MAX_INFO_KEY, "%s", in->e[n].key);
	pthread_mutex_unlock(&info_mu);
	return fail_info(rc, "MPI_Info_get_nthkey");
}

/* ---- Communicators' hints ------------------------------------------------------ */

/* hints returns comm's hint list, made empty when create and it has none;
 * info_mu held. */
static info *hints(uintptr_t comm, int create) {
	for (size_t i = 0; i < ncomm; i++)
		if (comm_handles[i] == comm) return comm_hints[i];
	if (!create) return NULL;
	if (ncomm == capcomm) {
		size_t c = capcomm ? 2 * capcomm : 16;
		uintptr_t *hs = realloc(comm_handles, c * sizeof *hs);
		if (hs != NULL) comm_handles = hs;
		info **is = hs ? realloc(comm_hints, c * sizeof *is) : NULL;
		if (is == NULL) return NULL;
		comm_hints = is, capcomm = c;
	}
	info *in = calloc(1, sizeof *in);
	if (in == NULL) return NULL;
	comm_handles[ncomm] = comm, comm_hints[ncomm++] = in;
	return in;
}

void gompi_info_comm_drop(uintptr_t comm) {
	pthread_mutex_lock(&info_mu);
	for (size_t i = 0; i < ncomm; i++) {
		if (comm_handles[i] != comm) continue;
		clear(comm_hints[i]);
		free(comm_hints[i]);
		comm_handles[i] = comm_handles[--ncomm], comm_hints[i] = comm_hints[ncomm];
		break;
	}
	pthread_mutex_unlock(&info_mu);
}

/* set_hints makes comm's hints a copy of src's (none for NULL). */
static int set_hints(uintptr_t comm, const info *src) {
	info *dst = hints(comm, 1);
	if (dst == NULL) return MPI_ERR_NO_MEM;
	clear(dst);
	return src ? copy_into(dst, src) : MPI_SUCCESS;
}

int gompi_info_comm_copy(uintptr_t old, uintptr_t new) {
	pthread_mutex_lock(&info_mu);
	info *src = hints(old, 0);
	int rc = src ? set_hints(new, src) : MPI_SUCCESS;
	pthread_mutex_unlock(&info_mu);
	return rc;
}

/* MPI_Comm_set_info with MPI_INFO_NULL changes nothing, as in MPICH. */
int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info h) {
	CHECK_COMM(comm, "MPI_Comm_set_info");
	if (h == MPI_INFO_NULL) return MPI_SUCCESS;
	pthread_mutex_lock(&info_mu);
	info *in = get(h);
	int rc = in == NULL ? MPI_ERR_INFO : set_hints((uintptr_t)comm, in);
	pthread_mutex_unlock(&info_mu);
	return gompi_error(comm, rc, "MPI_Comm_set_info");
}

int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info *out) {
	CHECK_COMM(comm, "MPI_Comm_get_info");
	pthread_mutex_lock(&info_mu);
	int rc = new_copy(hints((uintptr_t)comm, 0), out);
	pthread_mutex_unlock(&info_mu);
	return gompi_error(comm, rc, "MPI_Comm_get_info");
}

/* MPI_Comm_dup_with_info: MPI_INFO_NULL gives the new communicator no
 * hints. */
int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info h, MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPI_Comm_dup_with_info");
	pthread_mutex_lock(&info_mu);
	int ok = h == MPI_INFO_NULL || get(h) != NULL;
	pthread_mutex_unlock(&info_mu);
	if (!ok) return gompi_error(comm, MPI_ERR_INFO, "MPI_Comm_dup_with_info");
	MPI_Comm nc;
	int rc = gompi_comm_dup(comm, &nc);
	if (rc == MPI_SUCCESS) {
		/* the new communicator's hints are info's, not comm's */
		pthread_mutex_lock(&info_mu);
		rc = set_hints((uintptr_t)nc, get(h));
		pthread_mutex_unlock(&info_mu);
		*newcomm = nc;
	}
	return gompi_error(comm, rc, "MPI_Comm_dup_with_info");
}

/* MPI_Comm_idup duplicates at once (blocking) and returns a request that
 * completes when every member has: an MPI_Ibarrier on the new
 * communicator. A program that starts idups in different orders on
 * different members would wait forever here. */
int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request) {
	CHECK_COMM(comm, "MPI_Comm_idup");
	int rc = gompi_comm_dup(comm, newcomm);
	if (rc != MPI_SUCCESS) return gompi_error(comm, rc, "MPI_Comm_idup");
	return PMPI_Ibarrier(*newcomm, request);
}

int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request) {
	CHECK_COMM(comm, "MPI_Comm_idup_with_info");
	int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
	if (rc != MPI_SUCCESS) return rc;
	return PMPI_Ibarrier(*newcomm, request);
}

/* ---- Memory ---------------------------------------------------------------------- */

/* MPI_Alloc_mem is plain memory: gompi has no memory to register, and the
 * info hints are ignored, as the standard allows. */
int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr) {
	(void)info;
	gompi_check_init("MPI_Alloc_mem");
	if (size < 0) return fail_info(MPI_ERR_SIZE, "MPI_Alloc_mem");
	void *p = malloc(size ? (size_t)size : 1);
	if (p == NULL) return fail_info(MPI_ERR_NO_MEM, "MPI_Alloc_mem");
	*(void **)baseptr = p;
	return MPI_SUCCESS;
}

int PMPI_Free_mem(void *base) {
	free(base);
	return MPI_SUCCESS;
}

#define GOMPI_FILE_info
#include "aliases_gen.h"
