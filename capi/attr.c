/*
 * attr.c: keyvals and attributes of communicators, datatypes and windows,
 * held wholly in C (the callbacks are C function pointers; package mpi
 * needs none of it).
 *
 * A keyval is a number given in creation order (GOMPI_KEYVAL_BASE + n),
 * never an address, so a program run again the same way sees the same
 * numbers. Its record is never reused: a keyval the program frees stays
 * valid while attributes are set with it (their copy and delete callbacks
 * run, and the program may still get or delete them, as MPICH's fkeyval
 * tests do), and is invalid once the last is gone.
 *
 * Each object's attributes are kept in the order they were set: an
 * object's free (Comm_free, Type_free, Win_free and MPI_Finalize on
 * MPI_COMM_SELF and MPI_COMM_WORLD) deletes them last set first, as the
 * standard asks of MPI_Finalize; a dup copies them in keyval creation
 * order. Callbacks run with attr_mu released, so they may call MPI
 * (MPI_Comm_get_attr from a delete callback, say).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

#define GOMPI_KEYVAL_BASE 0x1000

typedef int(copy_fn)(void *obj, int keyval, void *extra, void *in, void *out, int *flag);
typedef int(delete_fn)(void *obj, int keyval, void *val, void *extra);

typedef struct {
	int kind;     /* GOMPI_ATTR_COMM, _TYPE or _WIN */
	int freed;    /* the program freed it */
	int refs;     /* attributes set with it */
	copy_fn *copy;   /* NULL: never copied; (copy_fn *)1: the DUP_FN */
	delete_fn *del;  /* NULL: nothing to do */
	void *extra;
} keyval;

typedef struct attr {
	int keyval;
	void *val;
	struct attr *next;
} attr;

typedef struct {
	int kind;
	uintptr_t h;
	attr *first; /* in the order set */
} object;

static pthread_mutex_t attr_mu = PTHREAD_MUTEX_INITIALIZER;
static keyval *keyvals;
static int nkeyvals, capkeyvals;
static object *objects; /* only those with attributes */
static int nobjects, capobjects;

/* lookup returns keyval k's record when it is one of kind's the program
 * may still use, else NULL. Called with attr_mu held. */
static keyval *lookup(int kind, int k) {
	int i = k - GOMPI_KEYVAL_BASE;
	if (i < 0 || i >= nkeyvals || keyvals[i].kind != kind || (keyvals[i].freed && keyvals[i].refs == 0)) return NULL;
	return &keyvals[i];
}

/* find returns the object's record, or NULL; with create, makes one.
 * Called with attr_mu held; a record moves when another is removed. */
static object *find(int kind, uintptr_t h, int create) {
	for (int i = 0; i < nobjects; i++)
		if (objects[i].kind == kind && objects[i].h == h) return &objects[i];
	if (!create) return NULL;
	if (nobjects == capobjects) {
		int n = capobjects ? 2 * capobjects : 16;
		object *o = realloc(objects, (size_t)n * sizeof *o);
		if (o == NULL) return NULL;
		objects = o;
		capobjects = n;
	}
	objects[nobjects] = (object){kind, h, NULL};
	return &objects[nobjects++];
}

/* drop_if_empty removes an object's record once it holds no attribute. */
static void drop_if_empty(int kind, uintptr_t h) {
	object *o = find(kind, h, 0);
	if (o != NULL && o->first == NULL) *o = objects[--nobjects];
}

static attr **slot(object *o, int k) {
	attr **p = &o->first;
	while (*p != NULL && (*p)->keyval != k) p = &(*p)->next;
	return p;
}

/* append sets attribute k of a new object (attr_mu held). */
static int append(int kind, uintptr_t h, int k, void *val) {
	object *o = find(kind, h, 1);
	attr *a = malloc(sizeof *a);
	if (o == NULL || a == NULL) {
		free(a);
		return MPI_ERR_NO_MEM;
	}
	*a = (attr){k, val, NULL};
	*slot(o, -1) = a; /* the end of the list: no keyval is -1 */
	keyvals[k - GOMPI_KEYVAL_BASE].refs++;
	return MPI_SUCCESS;
}

int gompi_keyval_create(int kind, void *copy, void *del, void *extra, int *out) {
	pthread_mutex_lock(&attr_mu);
	int ok = 1;
	if (nkeyvals == capkeyvals) {
		int n = capkeyvals ? 2 * capkeyvals : 64;
		keyval *k = realloc(keyvals, (size_t)n * sizeof *k);
		if (k != NULL) keyvals = k, capkeyvals = n;
		ok = k != NULL;
	}
	if (ok) {
		keyvals[nkeyvals] = (keyval){kind, 0, 0, (copy_fn *)copy, (delete_fn *)del, extra};
		*out = GOMPI_KEYVAL_BASE + nkeyvals++;
	}
	pthread_mutex_unlock(&attr_mu);
	return ok ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

/* gompi_keyval_free frees a keyval of kind. Freeing one again succeeds
 * (MPICH's keyval_double_free tests free from delete callbacks, then
 * again): the record is never reused, so nothing can go wrong. */
int gompi_keyval_free(int kind, int *k) {
	pthread_mutex_lock(&attr_mu);
	int i = *k - GOMPI_KEYVAL_BASE;
	keyval *kv = i >= 0 && i < nkeyvals && keyvals[i].kind == kind ? &keyvals[i] : NULL;
	if (kv != NULL) kv->freed = 1;
	pthread_mutex_unlock(&attr_mu);
	if (kv == NULL) return MPI_ERR_KEYVAL;
	*k = MPI_KEYVAL_INVALID;
	return MPI_SUCCESS;
}

/* call_delete runs keyval k's delete callback on val (attr_mu held on
 * entry and exit, released during the call). */
static int call_delete(uintptr_t h, int k, void *val) {
	keyval kv = keyvals[k - GOMPI_KEYVAL_BASE];
	if (kv.del == NULL) return MPI_SUCCESS;
	pthread_mutex_unlock(&attr_mu);
	void *obj = (void *)h;
	int rc = kv.del(obj, k, val, kv.extra);
	pthread_mutex_lock(&attr_mu);
	return rc;
}

/* unlink_attr removes attribute k of an object (attr_mu held), returning
 * whether there was one and its value. */
static int unlink_attr(int kind, uintptr_t h, int k, void **val) {
	object *o = find(kind, h, 0);
	if (o == NULL) return 0;
	attr **p = slot(o, k);
	if (*p == NULL) return 0;
	attr *a = *p;
	*p = a->next;
	*val = a->val;
	free(a);
	keyvals[k - GOMPI_KEYVAL_BASE].refs--;
	drop_if_empty(kind, h);
	return 1;
}

/* relink puts an attribute back after its delete callback failed. */
static void relink(int kind, uintptr_t h, int k, void *val) {
	object *o = find(kind, h, 1);
	attr *a = malloc(sizeof *a);
	if (o == NULL || a == NULL) {
		free(a);
		return;
	}
	*a = (attr){k, val, o->first};
	o->first = a;
	keyvals[k - GOMPI_KEYVAL_BASE].refs++;
}

int gompi_attr_set(int kind, uintptr_t h, int k, void *val) {
	pthread_mutex_lock(&attr_mu);
	int rc = MPI_SUCCESS;
	void *old;
	if (lookup(kind, k) == NULL) rc = MPI_ERR_KEYVAL;
	else if (unlink_attr(kind, h, k, &old) && (rc = call_delete(h, k, old)) != MPI_SUCCESS)
		relink(kind, h, k, old);
	if (rc == MPI_SUCCESS) rc = append(kind, h, k, val);
	pthread_mutex_unlock(&attr_mu);
	return rc;
}

/* gompi_attr_get answers a user keyval; MPI_ERR_KEYVAL for another. */
int gompi_attr_get(int kind, uintptr_t h, int k, void *out, int *flag) {
	pthread_mutex_lock(&attr_mu);
	int rc = MPI_ERR_KEYVAL;
	if (lookup(kind, k) != NULL) {
		rc = MPI_SUCCESS;
		object *o = find(kind, h, 0);
		attr *a = o ? *slot(o, k) : NULL;
		*flag = a != NULL;
		if (a != NULL) *(void **)out = a->val;
	}
	pthread_mutex_unlock(&attr_mu);
	return rc;
}

int gompi_attr_delete(int kind, uintptr_t h, int k) {
	pthread_mutex_lock(&attr_mu);
	int rc = MPI_SUCCESS;
	void *old;
	if (lookup(kind, k) == NULL) rc = MPI_ERR_KEYVAL;
	else if (!unlink_attr(kind, h, k, &old)) rc = MPI_SUCCESS; /* nothing set: nothing to do */
	else if ((rc = call_delete(h, k, old)) != MPI_SUCCESS) relink(kind, h, k, old);
	pthread_mutex_unlock(&attr_mu);
	return rc;
}

/* gompi_attr_free deletes every attribute of an object, last set first,
 * before the object goes; a delete callback that fails stops it there
 * (that attribute and the earlier ones stay) and its code is returned. */
int gompi_attr_free(int kind, uintptr_t h) {
	pthread_mutex_lock(&attr_mu);
	int rc = MPI_SUCCESS;
	for (;;) {
		object *o = find(kind, h, 0);
		if (o == NULL) break;
		attr *last = o->first;
		while (last->next != NULL) last = last->next;
		int k = last->keyval;
		void *val;
		unlink_attr(kind, h, k, &val);
		if ((rc = call_delete(h, k, val)) != MPI_SUCCESS) {
			append(kind, h, k, val); /* back where it was: last */
			break;
		}
	}
	pthread_mutex_unlock(&attr_mu);
	return rc;
}

static int by_keyval(const void *a, const void *b) { return ((const attr *)a)->keyval - ((const attr *)b)->keyval; }

/* snapshot copies an object's attributes into a new array sorted by
 * keyval (creation order); *n is its length, -1 when out of memory.
 * attr_mu held. */
static attr *snapshot(int kind, uintptr_t h, int *n) {
	*n = 0;
	object *o = find(kind, h, 0);
	if (o == NULL) return NULL;
	for (attr *a = o->first; a != NULL; a = a->next) (*n)++;
	attr *v = malloc((size_t)*n * sizeof *v);
	if (v == NULL) {
		*n = -1;
		return NULL;
	}
	int i = 0;
	for (attr *a = o->first; a != NULL; a = a->next) v[i++] = *a;
	qsort(v, (size_t)*n, sizeof *v, by_keyval);
	return v;
}

/* gompi_attr_copy runs the copy callbacks of old's attributes, in keyval
 * creation order, and sets on new those they ask for. On a callback's
 * error it returns that code; the caller frees new (deleting what was
 * copied). */
int gompi_attr_copy(int kind, uintptr_t old, uintptr_t new) {
	pthread_mutex_lock(&attr_mu);
	int n, rc = MPI_SUCCESS;
	attr *v = snapshot(kind, old, &n);
	if (n < 0) rc = MPI_ERR_NO_MEM;
	for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
		int k = v[i].keyval, flag = 0;
		keyval kv = keyvals[k - GOMPI_KEYVAL_BASE];
		void *out = NULL;
		if (kv.copy == (copy_fn *)1) {
			out = v[i].val, flag = 1;
		} else if (kv.copy != NULL) {
			pthread_mutex_unlock(&attr_mu);
			rc = kv.copy((void *)old, k, kv.extra, v[i].val, &out, &flag);
			pthread_mutex_lock(&attr_mu);
		}
		if (rc == MPI_SUCCESS && flag) rc = append(kind, new, k, out);
	}
	free(v);
	pthread_mutex_unlock(&attr_mu);
	return rc;
}

/* ---- Communicators ------------------------------------------------------------ */

/* The predefined attributes' values (MPI gives the address of each). A
 * message's tag travels as an int; 2^30-1 leaves the sign bit alone. */
static int tag_ub = 0x3fffffff, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0, appnum = 0;
/* MPIX_FT (mpi-ext.h): ULFM's calls work on every communicator. */
static int ft = 1;

/* predefined answers the predefined keyvals; 0 for another. */
static int predefined(int keyval, void *attribute_val, int *flag) {
	int *v = NULL;
	switch (keyval) {
	case MPI_TAG_UB: v = &tag_ub; break;
	case MPI_HOST: v = &host; break;
	case MPI_IO: v = &io; break;
	case MPI_WTIME_IS_GLOBAL: v = &wtime_global; break;
	case MPI_APPNUM: v = &appnum; break;
	case MPI_LASTUSEDCODE: v = &gompi_lastusedcode; break;
	case MPIX_FT: v = &ft; break;
	case MPI_UNIVERSE_SIZE: /* no dynamic processes: the universe is the job */
		*flag = 0;
		return 1;
	default:
		return 0;
	}
	*(int **)attribute_val = v;
	*flag = 1;
	return 1;
}

int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function *copy, MPI_Comm_delete_attr_function *del, int *keyval,
			    void *extra_state) {
	gompi_check_init("MPI_Comm_create_keyval");
	int rc = gompi_keyval_create(GOMPI_ATTR_COMM, (void *)copy, (void *)del, extra_state, keyval);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Comm_create_keyval");
}

int PMPI_Keyval_create(MPI_Copy_function *copy, MPI_Delete_function *del, int *keyval, void *extra_state) {
	gompi_check_init("MPI_Keyval_create");
	int rc = gompi_keyval_create(GOMPI_ATTR_COMM, (void *)copy, (void *)del, extra_state, keyval);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Keyval_create");
}

int PMPI_Comm_free_keyval(int *keyval) {
	gompi_check_init("MPI_Comm_free_keyval");
	return gompi_error(MPI_COMM_WORLD, gompi_keyval_free(GOMPI_ATTR_COMM, keyval), "MPI_Comm_free_keyval");
}

int PMPI_Keyval_free(int *keyval) {
	gompi_check_init("MPI_Keyval_free");
	return gompi_error(MPI_COMM_WORLD, gompi_keyval_free(GOMPI_ATTR_COMM, keyval), "MPI_Keyval_free");
}

static int comm_set(MPI_Comm comm, int keyval, void *val, const char *fn) {
	CHECK_COMM(comm, fn);
	return gompi_error(comm, gompi_attr_set(GOMPI_ATTR_COMM, (uintptr_t)comm, keyval, val), fn);
}

static int comm_get(MPI_Comm comm, int keyval, void *val, int *flag, const char *fn) {
	CHECK_COMM(comm, fn);
	if (predefined(keyval, val, flag)) return MPI_SUCCESS;
	return gompi_error(comm, gompi_attr_get(GOMPI_ATTR_COMM, (uintptr_t)comm, keyval, val, flag), fn);
}

static int comm_delete(MPI_Comm comm, int keyval, const char *fn) {
	CHECK_COMM(comm, fn);
	return gompi_error(comm, gompi_attr_delete(GOMPI_ATTR_COMM, (uintptr_t)comm, keyval), fn);
}

int PMPI_Comm_set_attr(MPI_Comm comm, int keyval, void *val) { return comm_set(comm, keyval, val, "MPI_Comm_set_attr"); }
int PMPI_Attr_put(MPI_Comm comm, int keyval, void *val) { return comm_set(comm, keyval, val, "MPI_Attr_put"); }

int PMPI_Comm_get_attr(MPI_Comm comm, int keyval, void *val, int *flag) {
	return comm_get(comm, keyval, val, flag, "MPI_Comm_get_attr");
}

int PMPI_Attr_get(MPI_Comm comm, int keyval, void *val, int *flag) { return comm_get(comm, keyval, val, flag, "MPI_Attr_get"); }
int PMPI_Comm_delete_attr(MPI_Comm comm, int keyval) { return comm_delete(comm, keyval, "MPI_Comm_delete_attr"); }
int PMPI_Attr_delete(MPI_Comm comm, int keyval) { return comm_delete(comm, keyval, "MPI_Attr_delete"); }

/* ---- Datatypes ------------------------------------------------------------------ */

int PMPI_Type_create_keyval(MPI_Type_copy_attr_function *copy, MPI_Type_delete_attr_function *del, int *keyval,
			    void *extra_state) {
	gompi_check_init("MPI_Type_create_keyval");
	int rc = gompi_keyval_create(GOMPI_ATTR_TYPE, (void *)copy, (void *)del, extra_state, keyval);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Type_create_keyval");
}

int PMPI_Type_free_keyval(int *keyval) {
	gompi_check_init("MPI_Type_free_keyval");
	return gompi_error(MPI_COMM_WORLD, gompi_keyval_free(GOMPI_ATTR_TYPE, keyval), "MPI_Type_free_keyval");
}

int PMPI_Type_set_attr(MPI_Datatype type, int keyval, void *val) {
	gompi_check_init("MPI_Type_set_attr");
	if (gompi_type_size_all(type) < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_TYPE, "MPI_Type_set_attr");
	return gompi_error(MPI_COMM_WORLD, gompi_attr_set(GOMPI_ATTR_TYPE, (uintptr_t)type, keyval, val), "MPI_Type_set_attr");
}

int PMPI_Type_get_attr(MPI_Datatype type, int keyval, void *val, int *flag) {
	gompi_check_init("MPI_Type_get_attr");
	if (gompi_type_size_all(type) < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_TYPE, "MPI_Type_get_attr");
	int rc = gompi_attr_get(GOMPI_ATTR_TYPE, (uintptr_t)type, keyval, val, flag);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Type_get_attr");
}

int PMPI_Type_delete_attr(MPI_Datatype type, int keyval) {
	gompi_check_init("MPI_Type_delete_attr");
	if (gompi_type_size_all(type) < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_TYPE, "MPI_Type_delete_attr");
	return gompi_error(MPI_COMM_WORLD, gompi_attr_delete(GOMPI_ATTR_TYPE, (uintptr_t)type, keyval), "MPI_Type_delete_attr");
}

/* ---- Windows (their objects are in win.c) ----------------------------------------- */

int PMPI_Win_create_keyval(MPI_Win_copy_attr_function *copy, MPI_Win_delete_attr_function *del, int *keyval,
			   void *extra_state) {
	gompi_check_init("MPI_Win_create_keyval");
	int rc = gompi_keyval_create(GOMPI_ATTR_WIN, (void *)copy, (void *)del, extra_state, keyval);
	return gompi_error(MPI_COMM_WORLD, rc, "MPI_Win_create_keyval");
}

int PMPI_Win_free_keyval(int *keyval) {
	gompi_check_init("MPI_Win_free_keyval");
	return gompi_error(MPI_COMM_WORLD, gompi_keyval_free(GOMPI_ATTR_WIN, keyval), "MPI_Win_free_keyval");
}

#define GOMPI_FILE_attr
#include "aliases_gen.h"
