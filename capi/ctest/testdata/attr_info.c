/* Attributes and keyvals (copy and delete callbacks through Comm_dup and
 * Comm_free, predefined attributes) and Info objects. */
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

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	attrs();
	infos();
	return ct_end();
}
