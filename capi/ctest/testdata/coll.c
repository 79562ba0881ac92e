/* Every collective and its non-blocking twin: Barrier, Bcast, Reduce,
 * Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v,w),
 * Reduce_scatter(_block), Scan, Exscan, with MPI_IN_PLACE where the
 * standard allows it. Blocking and non-blocking results must agree. */
#include "ctest.h"

static int r, s;

static void show(const char *what, const int *v, int n)
{
	char line[8192];
	int i, off = snprintf(line, sizeof line, "%s", what);
	for (i = 0; i < n && off < (int)sizeof line - 16; i++)
		off += snprintf(line + off, sizeof line - off, " %d", v[i]);
	ct_out("%s", line);
}

static void rooted(int nb)
{
	int root = s - 1, i, v[4], *all = calloc(4 * s, sizeof(int)), *counts = malloc(s * sizeof(int)),
	    *displs = malloc(s * sizeof(int)), sum[4], got[4] = {0}, total = 0;
	MPI_Request rq;
	const char *p = nb ? "i" : "";
	for (i = 0; i < 4; i++)
		v[i] = r * 100 + i;
	if (nb) {
		MPI_Ibcast(v, 4, MPI_INT, root, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Bcast(v, 4, MPI_INT, root, MPI_COMM_WORLD);
	ct_out("%sbcast %d %d %d %d", p, v[0], v[1], v[2], v[3]);
	for (i = 0; i < 4; i++)
		v[i] = r * 100 + i;
	if (nb) {
		MPI_Ireduce(v, sum, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Reduce(v, sum, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (r == 0)
		show(nb ? "ireduce" : "reduce", sum, 4);
	if (nb) {
		MPI_Igather(v, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Gather(v, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD);
	if (r == root)
		show(nb ? "igather" : "gather", all, 2 * s);
	for (i = 0; i < s; i++)
		counts[i] = i % 3 + 1, displs[i] = total, total += counts[i];
	if (nb) {
		MPI_Igatherv(v, counts[r], MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Gatherv(v, counts[r], MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
	if (r == 0)
		show(nb ? "igatherv" : "gatherv", all, total);
	for (i = 0; i < 4 * s; i++)
		all[i] = i * 7;
	if (nb) {
		MPI_Iscatter(all, 2, MPI_INT, got, 2, MPI_INT, 0, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, 0, MPI_COMM_WORLD);
	ct_out("%sscatter %d %d", p, got[0], got[1]);
	if (nb) {
		MPI_Iscatterv(all, counts, displs, MPI_INT, got, counts[r], MPI_INT, root, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Scatterv(all, counts, displs, MPI_INT, got, counts[r], MPI_INT, root, MPI_COMM_WORLD);
	show(nb ? "iscatterv" : "scatterv", got, counts[r]);
	free(all), free(counts), free(displs);
}

static void everyone(int nb)
{
	int i, j, v[4], *all = calloc(4 * s, sizeof(int)), *out = calloc(4 * s, sizeof(int)),
	    *sc = malloc(s * sizeof(int)), *sd = malloc(s * sizeof(int)), *rc = malloc(s * sizeof(int)),
	    *rd = malloc(s * sizeof(int)), total = 0, rtotal = 0;
	MPI_Request rq;
	for (i = 0; i < 4; i++)
		v[i] = r * 100 + i;
	if (nb) {
		MPI_Iallreduce(v, out, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Allreduce(v, out, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	show(nb ? "iallreduce max" : "allreduce max", out, 4);
	memcpy(out, v, sizeof v);
	if (nb) {
		MPI_Iallreduce(MPI_IN_PLACE, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Allreduce(MPI_IN_PLACE, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	show(nb ? "iallreduce in_place sum" : "allreduce in_place sum", out, 4);
	if (nb) {
		MPI_Iallgather(v, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Allgather(v, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD);
	show(nb ? "iallgather" : "allgather", all, 3 * s);
	for (i = 0; i < s; i++)
		rc[i] = (i + 1) % 4, rd[i] = rtotal, rtotal += rc[i];
	if (nb) {
		MPI_Iallgatherv(v, rc[r], MPI_INT, all, rc, rd, MPI_INT, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Allgatherv(v, rc[r], MPI_INT, all, rc, rd, MPI_INT, MPI_COMM_WORLD);
	show(nb ? "iallgatherv" : "allgatherv", all, rtotal);
	for (i = 0; i < 2 * s; i++)
		out[i] = r * 1000 + i;
	if (nb) {
		MPI_Ialltoall(out, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Alltoall(out, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
	show(nb ? "ialltoall" : "alltoall", all, 2 * s);
	/* alltoallv: rank r sends j%2+1 values to rank j, receives r%2+1 from each */
	for (j = 0, total = 0, rtotal = 0; j < s; j++) {
		sc[j] = j % 2 + 1, sd[j] = total, total += sc[j];
		rc[j] = r % 2 + 1, rd[j] = rtotal, rtotal += rc[j];
	}
	if (nb) {
		MPI_Ialltoallv(out, sc, sd, MPI_INT, all, rc, rd, MPI_INT, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Alltoallv(out, sc, sd, MPI_INT, all, rc, rd, MPI_INT, MPI_COMM_WORLD);
	show(nb ? "ialltoallv" : "alltoallv", all, rtotal);
	{
		MPI_Datatype *types = malloc(s * sizeof(MPI_Datatype));
		for (j = 0; j < s; j++) {
			types[j] = MPI_INT;
			sd[j] *= sizeof(int), rd[j] *= sizeof(int);
		}
		memset(all, 0, 4 * s * sizeof(int));
		if (nb) {
			MPI_Ialltoallw(out, sc, sd, types, all, rc, rd, types, MPI_COMM_WORLD, &rq);
			MPI_Wait(&rq, MPI_STATUS_IGNORE);
		} else
			MPI_Alltoallw(out, sc, sd, types, all, rc, rd, types, MPI_COMM_WORLD);
		show(nb ? "ialltoallw" : "alltoallw", all, rtotal);
		free(types);
	}
	free(all), free(out), free(sc), free(sd), free(rc), free(rd);
}

static void reductions(int nb)
{
	int i, *in = malloc(3 * s * sizeof(int)), *counts = malloc(s * sizeof(int)), out[8] = {0}, v = r + 1, total = 0;
	MPI_Request rq;
	for (i = 0; i < 3 * s; i++)
		in[i] = r * 10 + i;
	if (nb) {
		MPI_Ireduce_scatter_block(in, out, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Reduce_scatter_block(in, out, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	show(nb ? "ireduce_scatter_block" : "reduce_scatter_block", out, 3);
	for (i = 0; i < s; i++)
		counts[i] = i % 3 + 1, total += counts[i];
	(void)total;
	if (nb) {
		MPI_Ireduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	show(nb ? "ireduce_scatter" : "reduce_scatter", out, counts[r]);
	if (nb) {
		MPI_Iscan(&v, out, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Scan(&v, out, 1, MPI_INT, MPI_PROD, MPI_COMM_WORLD);
	ct_out("%sscan prod %d", nb ? "i" : "", out[0]);
	out[0] = -1;
	if (nb) {
		MPI_Iexscan(&v, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Exscan(&v, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (r > 0) /* rank 0's result is undefined */
		ct_out("%sexscan sum %d", nb ? "i" : "", out[0]);
	if (nb) {
		MPI_Ibarrier(MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	} else
		MPI_Barrier(MPI_COMM_WORLD);
	ct_out("%sbarrier", nb ? "i" : "");
	free(in), free(counts);
}

int main(int argc, char **argv)
{
	int nb;
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	r = ct_rank, s = ct_size;
	for (nb = 0; nb < 2; nb++) {
		rooted(nb);
		everyone(nb);
		reductions(nb);
	}
	{
		int v[2] = {r, r}, root = 0;
		MPI_Reduce(r == root ? MPI_IN_PLACE : v, v, 2, MPI_INT, MPI_MIN, root, MPI_COMM_WORLD);
		if (r == root)
			ct_out("reduce in_place min %d %d", v[0], v[1]);
	}
	return ct_end();
}
