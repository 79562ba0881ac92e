/* Intercommunicators: the world split into a low and a high half joined
 * by MPI_Intercomm_create; test_inter, sizes, the remote group,
 * point-to-point naming remote ranks (ANY_SOURCE, statuses), Barrier,
 * Comm_dup and compare, Intercomm_merge with either half high and with
 * both the same, and the intercomm-only calls on an intracommunicator. */
#include "ctest.h"

/* world_of returns the world rank of rank r of the other half. */
static int world_of(int low, int h, int r)
{
	return low ? h + r : r;
}

/* exchange: every rank sends its world rank to every remote rank (tag:
 * its local rank) and receives from MPI_ANY_SOURCE as many messages,
 * filed by status source; prints what came from whom. */
static void exchange(MPI_Comm ic, const char *what, int low, int h)
{
	int lr, rs, i, v, got[64];
	MPI_Request req[64];
	MPI_Status st;

	MPI_Comm_rank(ic, &lr);
	MPI_Comm_remote_size(ic, &rs);
	for (i = 0; i < rs; i++)
		MPI_Isend(&ct_rank, 1, MPI_INT, i, lr, ic, &req[i]);
	for (i = 0; i < rs; i++)
		got[i] = -1;
	for (i = 0; i < rs; i++) {
		MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, ic, &st);
		ct_check(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rs && st.MPI_TAG == st.MPI_SOURCE, "%s: source %d tag %d", what, st.MPI_SOURCE, st.MPI_TAG);
		if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rs)
			got[st.MPI_SOURCE] = v;
	}
	MPI_Waitall(rs, req, MPI_STATUSES_IGNORE);
	for (i = 0; i < rs; i++) {
		ct_check(got[i] == world_of(low, h, i), "%s: remote rank %d sent %d", what, i, got[i]);
		ct_out("%s from remote %d: world %d", what, i, got[i]);
	}
	/* every receive above is done before a Sendrecv's message (tag 5)
	 * could meet the MPI_ANY_TAG receives */
	MPI_Barrier(ic);
	/* a Sendrecv with the remote rank of the same local rank, if any */
	MPI_Comm_size(ic, &i);
	if (lr < rs && lr < i) {
		MPI_Sendrecv(&ct_rank, 1, MPI_INT, lr, 5, &v, 1, MPI_INT, MPI_ANY_SOURCE, 5, ic, &st);
		ct_out("%s sendrecv: world %d from remote %d", what, v, st.MPI_SOURCE);
	}
}

static void merge(MPI_Comm ic, int high, const char *what)
{
	MPI_Comm m;
	int r, n, flag, sum, *all, i;
	char line[512];
	size_t off = 0;

	MPI_Intercomm_merge(ic, high, &m);
	MPI_Comm_rank(m, &r);
	MPI_Comm_size(m, &n);
	MPI_Comm_test_inter(m, &flag);
	all = malloc(sizeof(int) * n);
	MPI_Allgather(&ct_rank, 1, MPI_INT, all, 1, MPI_INT, m);
	MPI_Allreduce(&ct_rank, &sum, 1, MPI_INT, MPI_SUM, m);
	for (i = 0; i < n && off < sizeof line - 16; i++)
		off += snprintf(line + off, sizeof line - off, " %d", all[i]);
	ct_out("merge %s: rank %d size %d inter %d sum %d order%s", what, r, n, flag, sum, line);
	free(all);
	MPI_Comm_free(&m);
}

int main(int argc, char **argv)
{
	MPI_Comm local, ic, dup;
	MPI_Group rg, wg;
	int h, low, flag, n, r, rs, res, i, *in, *out;

	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	if (ct_size < 2) {
		ct_out("skip: an intercommunicator needs 2 ranks");
		return ct_end();
	}
	h = ct_size / 2;
	low = ct_rank < h;
	MPI_Comm_split(MPI_COMM_WORLD, low ? 0 : 1, ct_rank, &local);
	MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? h : 0, 17, &ic);
	MPI_Comm_test_inter(ic, &flag);
	MPI_Comm_size(ic, &n);
	MPI_Comm_rank(ic, &r);
	MPI_Comm_remote_size(ic, &rs);
	ct_out("intercomm: inter %d size %d rank %d remote size %d", flag, n, r, rs);
	MPI_Comm_test_inter(MPI_COMM_WORLD, &flag);
	ct_out("world inter %d", flag);

	MPI_Comm_remote_group(ic, &rg);
	MPI_Group_size(rg, &n);
	MPI_Group_rank(rg, &r);
	ct_out("remote group size %d rank %s", n, r == MPI_UNDEFINED ? "undefined" : "defined");
	MPI_Comm_group(MPI_COMM_WORLD, &wg);
	in = malloc(sizeof(int) * n);
	out = malloc(sizeof(int) * n);
	for (i = 0; i < n; i++)
		in[i] = i;
	MPI_Group_translate_ranks(rg, n, in, wg, out);
	for (i = 0; i < n; i++)
		ct_out("remote group rank %d is world %d", i, out[i]);
	free(in);
	free(out);
	MPI_Group_free(&rg);
	MPI_Group_free(&wg);

	exchange(ic, "intercomm", low, h);

	MPI_Comm_dup(ic, &dup);
	MPI_Comm_test_inter(dup, &flag);
	MPI_Comm_compare(ic, dup, &res);
	ct_out("dup inter %d compare %s", flag, ct_name(res));
	MPI_Comm_compare(ic, MPI_COMM_WORLD, &res);
	ct_out("compare intercomm world %s", ct_name(res));
	exchange(dup, "dup", low, h);
	MPI_Comm_free(&dup);

	merge(ic, !low, "low first");
	merge(ic, low, "high first");
	merge(ic, 0, "both low");

	MPI_Comm_free(&ic);
	ct_out("freed null %d", ic == MPI_COMM_NULL);
	MPI_Comm_free(&local);
	return ct_end();
}
