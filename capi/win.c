/*
 * win.c: windows as objects only. MPI_Win_create and MPI_Win_allocate
 * make a window (collective over the communicator, which they duplicate
 * for the window's own use), with its group, name, error handler,
 * predefined attributes (MPI_WIN_BASE, _SIZE, _DISP_UNIT, _CREATE_FLAVOR,
 * _MODEL) and user attributes; MPI_Win_free deletes the attributes and
 * synchronizes the members. One-sided communication (Put, Get,
 * Accumulate, fences, locks...) is not implemented: those calls return
 * MPI_ERR_UNSUPPORTED_OPERATION.
 *
 * Handles are GOMPI_HANDLE(GOMPI_KIND_WIN, n), n the window's creation
 * number in this process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

typedef struct {
	MPI_Comm comm; /* the window's duplicate of its communicator */
	void *base, *mem; /* mem: what MPI_Win_allocate allocated */
	MPI_Aint size;
	int disp_unit, flavor, model;
	MPI_Errhandler eh;
	char name[MPI_MAX_OBJECT_NAME];
} win;

static pthread_mutex_t win_mu = PTHREAD_MUTEX_INITIALIZER;
static win **wins; /* by creation number; NULL once freed */
static size_t nwins, capwins;

/* lookup returns the window behind a handle, or NULL. The record is the
 * window's until MPI_Win_free, which only the program calls. */
static win *lookup(MPI_Win h) {
	uintptr_t u = (uintptr_t)h;
	if (u < GOMPI_HANDLE_BASE || GOMPI_HANDLE_KIND(u) != GOMPI_KIND_WIN) return NULL;
	pthread_mutex_lock(&win_mu);
	uintptr_t id = GOMPI_HANDLE_ID(u);
	win *w = id < nwins ? wins[id] : NULL;
	pthread_mutex_unlock(&win_mu);
	return w;
}

/* fail raises code on a window: its error handler, or MPI_COMM_WORLD's
 * when the handle names no window. */
static int fail(MPI_Win h, win *w, int code, const char *fn) {
	if (w == NULL) return gompi_error(MPI_COMM_WORLD, code, fn);
	return gompi_raise(w->eh, &h, code, fn);
}

#define CHECK_WIN(h, w, fn)                                                            \
	gompi_check_init(fn);                                                          \
	win *w = lookup(h);                                                            \
	if (w == NULL) return gompi_error(MPI_COMM_WORLD, MPI_ERR_WIN, fn)

/* make creates a window over base on comm's members. */
static int make(void *base, void *mem, MPI_Aint size, int disp_unit, int flavor, MPI_Comm comm, MPI_Win *out,
		const char *fn) {
	CHECK_COMM(comm, fn);
	if (size < 0) return gompi_error(comm, MPI_ERR_SIZE, fn);
	if (disp_unit <= 0) return gompi_error(comm, MPI_ERR_DISP, fn);
	win *w = calloc(1, sizeof *w);
	if (w == NULL) return gompi_error(comm, MPI_ERR_NO_MEM, fn);
	uintptr_t c;
	int rc = gompi_go_comm_dup((uintptr_t)comm, &c); /* no attributes: the window's own */
	if (rc != MPI_SUCCESS) {
		free(w);
		return gompi_error(comm, rc, fn);
	}
	*w = (win){(MPI_Comm)c, base, mem, size, disp_unit, flavor, MPI_WIN_UNIFIED, MPI_ERRORS_ARE_FATAL, {0}};
	pthread_mutex_lock(&win_mu);
	if (nwins == capwins) {
		size_t n = capwins ? 2 * capwins : 16;
		win **p = realloc(wins, n * sizeof *p);
		if (p != NULL) wins = p, capwins = n;
	}
	int ok = nwins < capwins;
	if (ok) {
		wins[nwins] = w;
		*out = (MPI_Win)GOMPI_HANDLE(GOMPI_KIND_WIN, nwins++);
	}
	pthread_mutex_unlock(&win_mu);
	if (!ok) {
		gompi_go_comm_free(c);
		free(w);
		return gompi_error(comm, MPI_ERR_NO_MEM, fn);
	}
	return MPI_SUCCESS;
}

int PMPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
	(void)info; /* hints ignored */
	return make(base, NULL, size, disp_unit, MPI_WIN_FLAVOR_CREATE, comm, win, "MPI_Win_create");
}

int PMPI_Win_create_c(void *base, MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win) {
	(void)info;
	if (disp_unit > 0x7fffffff) return gompi_error(comm, MPI_ERR_DISP, "MPI_Win_create_c");
	return make(base, NULL, size, (int)disp_unit, MPI_WIN_FLAVOR_CREATE, comm, win, "MPI_Win_create_c");
}

static int allocate(MPI_Aint size, MPI_Aint disp_unit, MPI_Comm comm, void *baseptr, MPI_Win *win, const char *fn) {
	if (size < 0) return gompi_error(comm, MPI_ERR_SIZE, fn);
	if (disp_unit > 0x7fffffff) return gompi_error(comm, MPI_ERR_DISP, fn);
	void *mem = malloc(size ? (size_t)size : 1);
	if (mem == NULL) return gompi_error(comm, MPI_ERR_NO_MEM, fn);
	int rc = make(mem, mem, size, (int)disp_unit, MPI_WIN_FLAVOR_ALLOCATE, comm, win, fn);
	if (rc != MPI_SUCCESS) {
		free(mem);
		return rc;
	}
	*(void **)baseptr = mem;
	return MPI_SUCCESS;
}

int PMPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
	(void)info;
	return allocate(size, disp_unit, comm, baseptr, win, "MPI_Win_allocate");
}

int PMPI_Win_allocate_c(MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win) {
	(void)info;
	return allocate(size, disp_unit, comm, baseptr, win, "MPI_Win_allocate_c");
}

/* MPI_Win_free deletes the window's attributes (a delete callback that
 * fails keeps the window), then waits for every member, as the standard
 * has it, and releases the window. */
int PMPI_Win_free(MPI_Win *h) {
	CHECK_WIN(*h, w, "MPI_Win_free");
	int rc = gompi_attr_free(GOMPI_ATTR_WIN, (uintptr_t)*h);
	if (rc != MPI_SUCCESS) return fail(*h, w, rc, "MPI_Win_free");
	PMPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN); /* the window's handler decides */
	rc = PMPI_Barrier(w->comm);
	if (rc != MPI_SUCCESS) return fail(*h, w, rc, "MPI_Win_free");
	gompi_go_comm_free((uintptr_t)w->comm);
	pthread_mutex_lock(&win_mu);
	wins[GOMPI_HANDLE_ID((uintptr_t)*h)] = NULL;
	pthread_mutex_unlock(&win_mu);
	free(w->mem);
	free(w);
	*h = MPI_WIN_NULL;
	return MPI_SUCCESS;
}

int PMPI_Win_get_group(MPI_Win h, MPI_Group *group) {
	CHECK_WIN(h, w, "MPI_Win_get_group");
	return fail(h, w, PMPI_Comm_group(w->comm, group), "MPI_Win_get_group");
}

int PMPI_Win_set_name(MPI_Win h, const char *name) {
	CHECK_WIN(h, w, "MPI_Win_set_name");
	snprintf(w->name, sizeof w->name, "%s", name);
	return MPI_SUCCESS;
}

int PMPI_Win_get_name(MPI_Win h, char *name, int *resultlen) {
	CHECK_WIN(h, w, "MPI_Win_get_name");
	snprintf(name, MPI_MAX_OBJECT_NAME, "%s", w->name);
	*resultlen = (int)strlen(name);
	return MPI_SUCCESS;
}

/* ---- Attributes --------------------------------------------------------------------- */

int PMPI_Win_get_attr(MPI_Win h, int keyval, void *val, int *flag) {
	CHECK_WIN(h, w, "MPI_Win_get_attr");
	void *v = NULL;
	switch (keyval) {
	case MPI_WIN_BASE: v = w->base; break; /* the base itself, not its address */
	case MPI_WIN_SIZE: v = &w->size; break;
	case MPI_WIN_DISP_UNIT: v = &w->disp_unit; break;
	case MPI_WIN_CREATE_FLAVOR: v = &w->flavor; break;
	case MPI_WIN_MODEL: v = &w->model; break;
	default:
		return fail(h, w, gompi_attr_get(GOMPI_ATTR_WIN, (uintptr_t)h, keyval, val, flag), "MPI_Win_get_attr");
	}
	*(void **)val = v;
	*flag = 1;
	return MPI_SUCCESS;
}

int PMPI_Win_set_attr(MPI_Win h, int keyval, void *val) {
	CHECK_WIN(h, w, "MPI_Win_set_attr");
	return fail(h, w, gompi_attr_set(GOMPI_ATTR_WIN, (uintptr_t)h, keyval, val), "MPI_Win_set_attr");
}

int PMPI_Win_delete_attr(MPI_Win h, int keyval) {
	CHECK_WIN(h, w, "MPI_Win_delete_attr");
	return fail(h, w, gompi_attr_delete(GOMPI_ATTR_WIN, (uintptr_t)h, keyval), "MPI_Win_delete_attr");
}

/* ---- Error handlers ------------------------------------------------------------------ */

int PMPI_Win_create_errhandler(MPI_Win_errhandler_function *fn, MPI_Errhandler *errhandler) {
	return gompi_error(MPI_COMM_WORLD, gompi_errhandler_create((void *)fn, errhandler), "MPI_Win_create_errhandler");
}

int PMPI_Win_set_errhandler(MPI_Win h, MPI_Errhandler eh) {
	CHECK_WIN(h, w, "MPI_Win_set_errhandler");
	if (!gompi_errhandler_valid(eh)) return fail(h, w, MPI_ERR_ARG, "MPI_Win_set_errhandler");
	w->eh = eh;
	return MPI_SUCCESS;
}

int PMPI_Win_get_errhandler(MPI_Win h, MPI_Errhandler *eh) {
	CHECK_WIN(h, w, "MPI_Win_get_errhandler");
	*eh = w->eh;
	return MPI_SUCCESS;
}

int PMPI_Win_call_errhandler(MPI_Win h, int errorcode) {
	CHECK_WIN(h, w, "MPI_Win_call_errhandler");
	fail(h, w, errorcode, "MPI_Win_call_errhandler");
	return MPI_SUCCESS;
}

#define GOMPI_FILE_win
#include "aliases_gen.h"
