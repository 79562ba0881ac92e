/* Communicator operations: dup, split, split_type, create, compare,
 * set/get name, free. */
#include "ctest.h"

int main(int argc, char **argv)
{
	MPI_Comm dup, split, shared, even, cmp;
	MPI_Group wg, eg;
	int r, s, res, len, sum, n, i, *ranks;
	char name[MPI_MAX_OBJECT_NAME];

	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	r = ct_rank, s = ct_size;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
	ct_out("compare world world %s", ct_name(res));
	MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
	ct_out("compare world dup %s", ct_name(res));
	MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, dup);
	ct_out("dup allreduce %d", sum);

	/* colour by parity, key reverses the order */
	MPI_Comm_split(MPI_COMM_WORLD, r % 2, s - r, &split);
	MPI_Comm_size(split, &n);
	MPI_Comm_rank(split, &i);
	ct_out("split size %d rank %d", n, i);
	MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, split);
	ct_out("split allreduce %d", sum);
	MPI_Comm_compare(MPI_COMM_WORLD, split, &res);
	ct_out("compare world split %s", ct_name(res));
	{
		MPI_Comm rev;
		MPI_Comm_split(MPI_COMM_WORLD, 0, s - r, &rev);
		MPI_Comm_compare(MPI_COMM_WORLD, rev, &res);
		ct_out("compare world reversed %s", s == 1 ? "MPI_SIMILAR" : ct_name(res));
		MPI_Comm_free(&rev);
	}
	{
		MPI_Comm none;
		MPI_Comm_split(MPI_COMM_WORLD, r == 0 ? MPI_UNDEFINED : 1, 0, &none);
		ct_out("split undefined null %d", none == MPI_COMM_NULL);
		if (none != MPI_COMM_NULL)
			MPI_Comm_free(&none);
	}
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
	MPI_Comm_size(shared, &n);
	ct_out("split_type shared size %d", n);
#if MPI_VERSION >= 4
	{ /* MPI-4's hardware types: the node is the only resource gompi knows */
		MPI_Comm hw;
		MPI_Info info;
		char v[64] = "";
		int m = -1, flag = 0;
		MPI_Info_create(&info);
		MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory");
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &hw);
		if (hw != MPI_COMM_NULL)
			MPI_Comm_size(hw, &m), MPI_Comm_free(&hw);
		ct_out("mpi4: hw_guided shared_memory size %d", m);
		ct_check(m == n, "HW_GUIDED mpi_shared_memory gave %d ranks, SHARED %d", m, n);
		MPI_Info_set(info, "mpi_hw_resource_type", "l3cache");
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &hw);
		ct_out("mpi4: hw_guided l3cache null %d", hw == MPI_COMM_NULL);
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &hw);
		ct_check(hw == MPI_COMM_NULL, "HW_GUIDED without info gave a communicator");
		MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_UNGUIDED, 0, info, &hw);
		if (hw != MPI_COMM_NULL) {
			MPI_Comm_size(hw, &m);
			MPI_Info_get(info, "mpi_hw_resource_type", sizeof v - 1, v, &flag);
			ct_check(m < s && flag, "HW_UNGUIDED gave %d of %d ranks, resource %s", m, s, flag ? v : "unnamed");
			MPI_Comm_free(&hw);
		} else {
			ct_check(n == s, "HW_UNGUIDED gave MPI_COMM_NULL over %d nodes' ranks", s / n);
		}
		MPI_Info_free(&info);
	}
#endif

	/* create from the group of the even ranks */
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	ranks = malloc(sizeof(int) * s);
	for (i = 0, n = 0; i < s; i += 2)
		ranks[n++] = i;
	MPI_Group_incl(wg, n, ranks, &eg);
	MPI_Comm_create(MPI_COMM_WORLD, eg, &even);
	ct_out("create null %d", even == MPI_COMM_NULL);
	if (even != MPI_COMM_NULL) {
		MPI_Comm_rank(even, &i);
		MPI_Comm_size(even, &n);
		MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, even);
		ct_out("create rank %d size %d allreduce %d", i, n, sum);
		MPI_Comm_free(&even);
	}

	MPI_Comm_set_name(dup, "ctest-dup");
	MPI_Comm_get_name(dup, name, &len);
	ct_out("name %s %d", name, len);
	MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
	ct_out("world name %s", name);
	cmp = dup;
	MPI_Comm_free(&dup);
	ct_out("freed null %d", dup == MPI_COMM_NULL);
	(void)cmp;
	MPI_Comm_free(&split);
	MPI_Comm_free(&shared);
	MPI_Group_free(&eg);
	MPI_Group_free(&wg);
	free(ranks);
	return ct_end();
}
