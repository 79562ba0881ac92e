/* Attributes and keyvals (copy and delete callbacks through Comm_dup and
 * Comm_free, predefined attributes, type and window attributes, the
 * MPI-1 names, MPI_COMM_SELF's at MPI_Finalize), Info objects and
 * communicator hints, MPI_Alloc_mem, windows as objects. */
#include "ctest.h"

static int copies, deletes;

static int copy_fn(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
	(void)c, (void)key, (void)extra;
	copies++;
	*(void **)out = (char *)in + 1; /* the copy carries value+1 */
	*flag = 1;
	return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm c, int key, void *val, void *extra)
{
	(void)c, (void)key, (void)val;
	deletes += *(int *)extra;
	return MPI_SUCCESS;
}

static void attrs(void)
{
	int key, key2, one = 1, flag;
	void *val;
	MPI_Comm dup;
	MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &one);
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key2, NULL);
	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &val, &flag);
	ct_out("unset flag %d", flag);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void *)(long)(100 + ct_rank));
	MPI_Comm_set_attr(MPI_COMM_WORLD, key2, (void *)7L);
	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &val, &flag);
	ct_out("set flag %d value %ld", flag, (long)val);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_get_attr(dup, key, &val, &flag);
	ct_out("dup copies %d flag %d value %ld", copies, flag, flag ? (long)val : -1L);
	MPI_Comm_get_attr(dup, key2, &val, &flag);
	ct_out("null copy fn flag %d", flag);
	MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void *)5L);
	ct_out("replace deletes %d", deletes);
	MPI_Comm_free(&dup);
	ct_out("free deletes %d", deletes);
	MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
	MPI_Comm_get_attr(MPI_COMM_WORLD, key, &val, &flag);
	ct_out("deleted flag %d deletes %d", flag, deletes);
	MPI_Comm_free_keyval(&key);
	ct_out("keyval freed invalid %d", key == MPI_KEYVAL_INVALID);
	MPI_Comm_delete_attr(MPI_COMM_WORLD, key2);
	MPI_Comm_free_keyval(&key2);
	{
		int *p;
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
		ct_out("tag_ub flag %d >= 32767 %d", flag, flag && *p >= 32767);
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag);
		ct_out("wtime_is_global flag-or-absent ok %d", !flag || *p == 0 || *p == 1);
	}
}

static void infos(void)
{
	MPI_Info info, dup;
	int n, i, flag, len;
	char key[MPI_MAX_INFO_KEY], val[64];
	MPI_Info_create(&info);
	MPI_Info_set(info, "alpha", "1");
	MPI_Info_set(info, "beta", "two");
	MPI_Info_set(info, "gamma", "three");
	MPI_Info_set(info, "alpha", "uno");
	MPI_Info_get_nkeys(info, &n);
	ct_out("nkeys %d", n);
	for (i = 0; i < n; i++) {
		MPI_Info_get_nthkey(info, i, key);
		MPI_Info_get(info, key, sizeof val - 1, val, &flag);
		MPI_Info_get_valuelen(info, key, &len, &flag);
		ct_out("key %d %s = %s len %d", i, key, val, len);
	}
	MPI_Info_delete(info, "beta");
	MPI_Info_get(info, "beta", sizeof val - 1, val, &flag);
	ct_out("deleted beta flag %d", flag);
	MPI_Info_dup(info, &dup);
	MPI_Info_get_nkeys(dup, &n);
	MPI_Info_get(dup, "gamma", 3, val, &flag);
	ct_out("dup nkeys %d gamma truncated %s", n, val);
	MPI_Info_free(&info);
	MPI_Info_free(&dup);
	ct_out("info freed null %d", info == MPI_INFO_NULL);
#if MPI_VERSION >= 4
	{
		int buflen = 0;
		MPI_Info_create(&info);
		MPI_Info_set(info, "k", "value");
		MPI_Info_get_string(info, "k", &buflen, NULL, &flag);
		ct_out("mpi4: get_string len %d flag %d", buflen, flag);
		ct_check(flag && buflen == 6, "Info_get_string length %d", buflen);
		MPI_Info_free(&info);
	}
#endif
}

/* order_copy logs which keyval's copy callback ran, in order. */
static char order[64];
static int order_copy(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
	(void)c, (void)key, (void)in;
	strncat(order, (const char *)extra, sizeof order - strlen(order) - 1);
	*(void **)out = in;
	*flag = 1;
	return MPI_SUCCESS;
}

static int order_delete(MPI_Comm c, int key, void *val, void *extra)
{
	(void)c, (void)key, (void)val;
	strncat(order, (const char *)extra, sizeof order - strlen(order) - 1);
	return MPI_SUCCESS;
}

static int failing_copy(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
	(void)c, (void)key, (void)extra, (void)in, (void)out, (void)flag;
	return MPI_ERR_OTHER;
}

/* more_attrs: copy and delete order, DUP_FN, the MPI-1 names, a failing
 * copy callback, a keyval freed while an attribute still uses it. */
static void more_attrs(void)
{
	int a, b, c, old, flag, rc;
	void *val;
	MPI_Comm dup, dup2;
	MPI_Comm_create_keyval(order_copy, order_delete, &a, "a");
	MPI_Comm_create_keyval(order_copy, order_delete, &b, "b");
	MPI_Comm_create_keyval(MPI_COMM_DUP_FN, order_delete, &c, "c");
	MPI_Comm_set_attr(MPI_COMM_WORLD, c, (void *)3L);
	MPI_Comm_set_attr(MPI_COMM_WORLD, b, (void *)2L);
	MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void *)1L);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_get_attr(dup, c, &val, &flag);
	ct_out("dup_fn flag %d value %ld copies %s", flag, (long)val, order);
	order[0] = 0;
	MPI_Comm_free_keyval(&b); /* still used by both communicators' attributes */
	MPI_Comm_dup(dup, &dup2);
	ct_out("copied with a freed keyval: %s", order);
	order[0] = 0;
	MPI_Comm_free(&dup2);
	MPI_Comm_free(&dup);
	ct_out("free deleted %zu attributes", strlen(order));
	MPI_Comm_delete_attr(MPI_COMM_WORLD, a);
	MPI_Comm_delete_attr(MPI_COMM_WORLD, c);
	MPI_Comm_free_keyval(&a);
	MPI_Comm_free_keyval(&c);
	order[0] = 0;
	MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &old, NULL);
	MPI_Attr_put(MPI_COMM_WORLD, old, (void *)42L);
	MPI_Attr_get(MPI_COMM_WORLD, old, &val, &flag);
	ct_out("mpi-1 attr flag %d value %ld", flag, (long)val);
	MPI_Attr_delete(MPI_COMM_WORLD, old);
	MPI_Keyval_free(&old);
	ct_out("mpi-1 keyval freed invalid %d", old == MPI_KEYVAL_INVALID);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_create_keyval(failing_copy, MPI_COMM_NULL_DELETE_FN, &a, NULL);
	MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void *)1L);
	dup = MPI_COMM_NULL;
	rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	ct_out("failing copy fails %d", rc != MPI_SUCCESS);
	MPI_Comm_delete_attr(MPI_COMM_WORLD, a);
	MPI_Comm_free_keyval(&a);
	rc = MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void *)1L);
	ct_out("invalid keyval fails %d", rc != MPI_SUCCESS); /* Open MPI 4.1 says MPI_ERR_OTHER */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static int type_deletes;
static int type_delete(MPI_Datatype t, int key, void *val, void *extra)
{
	(void)t, (void)key, (void)val, (void)extra;
	type_deletes++;
	return MPI_SUCCESS;
}

static void type_attrs(void)
{
	int key, flag;
	void *val;
	MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_delete, &key, NULL);
	MPI_Type_get_attr(MPI_INT, key, &val, &flag);
	ct_out("type attr unset flag %d", flag);
	MPI_Type_set_attr(MPI_INT, key, (void *)9L);
	MPI_Type_get_attr(MPI_INT, key, &val, &flag);
	ct_out("type attr flag %d value %ld", flag, (long)val);
	MPI_Type_delete_attr(MPI_INT, key);
	MPI_Type_get_attr(MPI_INT, key, &val, &flag);
	ct_out("type attr deleted flag %d deletes %d", flag, type_deletes);
	{
		/* Type_dup copies (TYPE_DUP_FN), Type_free deletes; the NULL
		 * copy fn's attribute stays behind */
		MPI_Datatype vec, dup;
		int nocopy;
		MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &nocopy, NULL);
		MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
		MPI_Type_set_attr(vec, key, (void *)(long)(10 + ct_rank));
		MPI_Type_set_attr(vec, nocopy, (void *)1L);
		MPI_Type_dup(vec, &dup);
		MPI_Type_get_attr(dup, key, &val, &flag);
		ct_out("type dup copied flag %d value %ld", flag, (long)val);
		MPI_Type_get_attr(dup, nocopy, &val, &flag);
		ct_out("type dup null copy flag %d", flag);
		/* the dup first: Open MPI frees a type only once no dup of it
		 * remains, and deletes its attributes then */
		MPI_Type_free(&dup);
		ct_out("type dup free deletes %d", type_deletes);
		MPI_Type_free(&vec);
		ct_out("type free deletes %d", type_deletes);
		MPI_Type_free_keyval(&nocopy);
	}
	MPI_Type_free_keyval(&key);
}

#ifndef OPEN_MPI
/* Windows as objects. Open MPI 4.1 makes no window under the harness's
 * options (no single-copy mechanism, no osc component), so this part runs
 * on gompi only and prints nothing but failures. */
static int win_deletes;
static int win_delete(MPI_Win w, int key, void *val, void *extra)
{
	(void)w, (void)key, (void)val, (void)extra;
	win_deletes++;
	return MPI_SUCCESS;
}

static void windows(void)
{
	int buf[4], *p, size, flag, key, len, *ip;
	MPI_Aint *sz;
	void *base;
	MPI_Win win;
	MPI_Group g;
	char name[MPI_MAX_OBJECT_NAME];
	MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
	ct_check(flag && base == (void *)buf, "WIN_BASE flag %d", flag);
	MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag);
	ct_check(flag && *sz == sizeof buf, "WIN_SIZE flag %d", flag);
	MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &ip, &flag);
	ct_check(flag && *ip == sizeof(int), "WIN_DISP_UNIT flag %d", flag);
	MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &ip, &flag);
	ct_check(flag && *ip == MPI_WIN_FLAVOR_CREATE, "WIN_CREATE_FLAVOR flag %d", flag);
	MPI_Win_get_attr(win, MPI_WIN_MODEL, &ip, &flag);
	ct_check(flag && (*ip == MPI_WIN_UNIFIED || *ip == MPI_WIN_SEPARATE), "WIN_MODEL flag %d", flag);
	MPI_Win_get_group(win, &g);
	MPI_Group_size(g, &size);
	MPI_Group_free(&g);
	ct_check(size == ct_size, "Win_get_group size %d", size);
	MPI_Win_set_name(win, "mywin");
	MPI_Win_get_name(win, name, &len);
	ct_check(strcmp(name, "mywin") == 0 && len == 5, "Win_get_name %s %d", name, len);
	MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete, &key, NULL);
	MPI_Win_set_attr(win, key, (void *)5L);
	MPI_Win_get_attr(win, key, &base, &flag);
	ct_check(flag && base == (void *)5L, "Win_get_attr of a user keyval flag %d", flag);
	MPI_Win_free(&win);
	ct_check(win == MPI_WIN_NULL && win_deletes == 1, "Win_free: deletes %d", win_deletes);
	MPI_Win_free_keyval(&key);
	MPI_Win_allocate(16 * (ct_rank + 1), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &p, &win);
	p[0] = ct_rank;
	MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
	ct_check(base == (void *)p, "Win_allocate base");
	MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag);
	ct_check(*sz == 16 * (ct_rank + 1), "Win_allocate size %ld", (long)*sz);
	MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &ip, &flag);
	ct_check(*ip == MPI_WIN_FLAVOR_ALLOCATE, "Win_allocate flavor");
	MPI_Win_free(&win);
}
#endif

/* create_group: the even ranks make a communicator among themselves, in
 * reverse order, while the odd ones do not take part. */
static void create_group(void)
{
	MPI_Group world, evens;
	MPI_Comm c = MPI_COMM_NULL;
	int ranks[8], n = 0, r, rank = -1, size = 0, sum = 0;
	for (r = (ct_size - 1) / 2 * 2; r >= 0; r -= 2)
		ranks[n++] = r;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, n, ranks, &evens);
	if (ct_rank % 2 == 0) {
		MPI_Comm_create_group(MPI_COMM_WORLD, evens, 5, &c);
		MPI_Comm_rank(c, &rank);
		MPI_Comm_size(c, &size);
		MPI_Allreduce(&ct_rank, &sum, 1, MPI_INT, MPI_SUM, c);
		MPI_Comm_free(&c);
	}
	ct_out("create_group rank %d size %d sum %d", rank, size, sum);
	MPI_Group_free(&evens);
	MPI_Group_free(&world);
}

static void memory(void)
{
	int *p;
	MPI_Alloc_mem(100, MPI_INFO_NULL, &p);
	p[24] = 7;
	ct_out("alloc_mem %d", p[24]);
	MPI_Free_mem(p);
}

static void print_info(const char *what, MPI_Info info)
{
	int n, i, flag;
	char key[MPI_MAX_INFO_KEY], val[64];
	MPI_Info_get_nkeys(info, &n);
	ct_out("%s: %d keys", what, n);
	for (i = 0; i < n; i++) {
		MPI_Info_get_nthkey(info, i, key);
		MPI_Info_get(info, key, sizeof val - 1, val, &flag);
		ct_out("%s: %s = %s", what, key, val);
	}
}

static void hints(void)
{
	MPI_Info info, used;
	MPI_Comm dup, dup2;
	int rc, flag, len;
	char val[8];
	MPI_Info_create(&info);
	MPI_Info_set(info, "gompi_test_hint", "yes");
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_set_info(dup, info);
	MPI_Comm_get_info(dup, &used);
	/* Open MPI 4.1 keeps only the hints it knows; gompi keeps them as
	 * given (MPI-4's behaviour), which only gompi's run checks */
	MPI_Info_get(used, "gompi_test_hint", sizeof val - 1, val, &flag);
#ifndef OPEN_MPI
	ct_check(flag, "Comm_get_info lost a hint");
#endif
	MPI_Info_free(&used);
	MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dup2);
	MPI_Comm_get_info(dup2, &used);
	MPI_Info_get(used, "gompi_test_hint", sizeof val - 1, val, &flag);
#ifndef OPEN_MPI
	ct_check(flag, "Comm_dup_with_info lost a hint");
#endif
	MPI_Info_free(&used);
	MPI_Comm_free(&dup);
	MPI_Comm_free(&dup2);
	MPI_Info_free(&info);
	MPI_Info_get_nkeys(MPI_INFO_ENV, &len);
	ct_out("info_env usable %d", len >= 0);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Info_create(&info);
	rc = MPI_Info_delete(info, "absent");
	ct_out("delete absent %s", ct_errname(rc));
	{
		char longkey[MPI_MAX_INFO_KEY + 8];
		memset(longkey, 'k', sizeof longkey - 1);
		longkey[sizeof longkey - 1] = 0;
		rc = MPI_Info_set(info, longkey, "v");
		ct_out("long key %s", ct_errname(rc));
	}
	print_info("after errors", info);
	MPI_Info_free(&info);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* self_delete runs at MPI_Finalize: MPI_COMM_SELF's attributes are
 * deleted first, last set first, while MPI still works. It prints only a
 * failure ("done" is the last line); main's exit status says whether both
 * ran. */
static int self_deletes;
static int self_delete(MPI_Comm c, int key, void *val, void *extra)
{
	int finalized;
	(void)c, (void)key, (void)extra;
	MPI_Finalized(&finalized);
	self_deletes++;
	ct_check(!finalized && (long)val == self_deletes, "finalize deleted self attribute %ld as number %d (finalized %d)",
		 (long)val, self_deletes, finalized);
	return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
	int k1, k2;
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	attrs();
	more_attrs();
	type_attrs();
	infos();
	hints();
#ifndef OPEN_MPI
	windows();
#endif
	memory();
	create_group();
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k1, NULL);
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k2, NULL);
	MPI_Comm_set_attr(MPI_COMM_SELF, k1, (void *)2L);
	MPI_Comm_set_attr(MPI_COMM_SELF, k2, (void *)1L);
	return ct_end() || self_deletes != 2;
}
