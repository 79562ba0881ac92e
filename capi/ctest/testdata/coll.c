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

/* nbwait completes a non-blocking call, so one body serves both forms */
static void nbwait(int nb, MPI_Request *rq)
{
	if (nb)
		MPI_Wait(rq, MPI_STATUS_IGNORE);
}

#define NB(nb, blocking, nonblocking, rq) ((nb) ? (nonblocking, nbwait(1, rq)) : (void)(blocking))

/* inplace: MPI_IN_PLACE in every collective that takes it. */
static void inplace(int nb)
{
	int i, *all = calloc(4 * s + 4, sizeof(int)), *counts = malloc(s * sizeof(int)),
	    *displs = malloc(s * sizeof(int)), root = s / 2, total = 0;
	MPI_Request rq;
	const char *p = nb ? "i" : "";
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	if (r == root)
		NB(nb, MPI_Gather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD),
		   MPI_Igather(MPI_IN_PLACE, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD, &rq), &rq);
	else
		NB(nb, MPI_Gather(all, 2, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD),
		   MPI_Igather(all, 2, MPI_INT, NULL, 0, MPI_INT, root, MPI_COMM_WORLD, &rq), &rq);
	if (r == root)
		show(nb ? "igather in_place" : "gather in_place", all, 2 * s);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	if (r == root)
		NB(nb, MPI_Scatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root, MPI_COMM_WORLD),
		   MPI_Iscatter(all, 2, MPI_INT, MPI_IN_PLACE, 2, MPI_INT, root, MPI_COMM_WORLD, &rq), &rq);
	else
		NB(nb, MPI_Scatter(NULL, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD),
		   MPI_Iscatter(NULL, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "iscatter in_place" : "scatter in_place", all, 2 * s);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	NB(nb, MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, MPI_COMM_WORLD),
	   MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "iallgather in_place" : "allgather in_place", all, 3 * s);
	for (i = 0; i < s; i++)
		counts[i] = i % 3 + 1, displs[i] = total, total += counts[i] + 1;
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	NB(nb, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD),
	   MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "iallgatherv in_place" : "allgatherv in_place", all, total);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	NB(nb, MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD),
	   MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "ialltoall in_place" : "alltoall in_place", all, 2 * s);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	NB(nb, MPI_Reduce_scatter_block(MPI_IN_PLACE, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
	   MPI_Ireduce_scatter_block(MPI_IN_PLACE, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "ireduce_scatter_block in_place" : "reduce_scatter_block in_place", all, 2);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 1000 + i;
	for (i = 0; i < s; i++)
		counts[i] = i % 2 + 1;
	NB(nb, MPI_Reduce_scatter(MPI_IN_PLACE, all, counts, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
	   MPI_Ireduce_scatter(MPI_IN_PLACE, all, counts, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "ireduce_scatter in_place" : "reduce_scatter in_place", all, counts[r]);
	all[0] = r + 2, all[1] = -r;
	NB(nb, MPI_Scan(MPI_IN_PLACE, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
	   MPI_Iscan(MPI_IN_PLACE, all, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "iscan in_place" : "scan in_place", all, 2);
	all[0] = r + 2, all[1] = -r;
	NB(nb, MPI_Exscan(MPI_IN_PLACE, all, 2, MPI_INT, MPI_PROD, MPI_COMM_WORLD),
	   MPI_Iexscan(MPI_IN_PLACE, all, 2, MPI_INT, MPI_PROD, MPI_COMM_WORLD, &rq), &rq);
	if (r > 0)
		show(nb ? "iexscan in_place" : "exscan in_place", all, 2);
	all[0] = r + 2, all[1] = -r;
	if (r == root)
		NB(nb, MPI_Reduce(MPI_IN_PLACE, all, 2, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD),
		   MPI_Ireduce(MPI_IN_PLACE, all, 2, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &rq), &rq);
	else
		NB(nb, MPI_Reduce(all, NULL, 2, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD),
		   MPI_Ireduce(all, NULL, 2, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &rq), &rq);
	if (r == root)
		show(nb ? "ireduce in_place" : "reduce in_place", all, 2);
	ct_out("%sin_place done", p);
	free(all), free(counts), free(displs);
}

/* derived: collectives on a datatype with holes (every other int), which
 * moves packed. (Open MPI refuses predefined ops on derived types.) */
static void derived(int nb)
{
	int i, v[8], *all = calloc(8 * s, sizeof(int)), *out = calloc(8 * s, sizeof(int));
	MPI_Datatype every2, *types = malloc(s * sizeof(MPI_Datatype));
	int *c = malloc(s * sizeof(int)), *d = malloc(s * sizeof(int));
	MPI_Request rq;
	MPI_Type_vector(2, 1, 2, MPI_INT, &every2);
	MPI_Type_commit(&every2);
	for (i = 0; i < 8; i++)
		v[i] = r * 10 + i;
	NB(nb, MPI_Bcast(v, 2, every2, 0, MPI_COMM_WORLD), MPI_Ibcast(v, 2, every2, 0, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "ibcast vector" : "bcast vector", v, 8);
	for (i = 0; i < 8; i++)
		v[i] = r * 10 + i;
	NB(nb, MPI_Allgather(v, 1, every2, all, 2, MPI_INT, MPI_COMM_WORLD),
	   MPI_Iallgather(v, 1, every2, all, 2, MPI_INT, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "iallgather vector" : "allgather vector", all, 2 * s);
	memset(all, 0, 8 * s * sizeof(int));
	NB(nb, MPI_Gather(v, 4, MPI_INT, all, 2, every2, 0, MPI_COMM_WORLD),
	   MPI_Igather(v, 4, MPI_INT, all, 2, every2, 0, MPI_COMM_WORLD, &rq), &rq);
	if (r == 0)
		show(nb ? "igather into vector" : "gather into vector", all, 8 * s);
	for (i = 0; i < s; i++)
		types[i] = every2, c[i] = 1, d[i] = i * 4 * (int)sizeof(int);
	for (i = 0; i < 4 * s; i++)
		all[i] = r * 100 + i;
	memset(out, 0, 8 * s * sizeof(int));
	NB(nb, MPI_Alltoallw(all, c, d, types, out, c, d, types, MPI_COMM_WORLD),
	   MPI_Ialltoallw(all, c, d, types, out, c, d, types, MPI_COMM_WORLD, &rq), &rq);
	show(nb ? "ialltoallw vector" : "alltoallw vector", out, 4 * s);
	MPI_Type_free(&every2);
	free(all), free(out), free(types), free(c), free(d);
}

/* errors: wrong arguments return their class under MPI_ERRORS_RETURN. */
static void errors(void)
{
	int v = 1, o, rc;
	double d = 1;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Allreduce(&d, &o, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD);
	ct_out("double band: %s", ct_errname(rc));
	rc = MPI_Allreduce(&v, &o, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD);
	ct_out("op null: %s", ct_errname(rc));
	rc = MPI_Bcast(&v, 1, MPI_INT, s, MPI_COMM_WORLD);
	ct_out("bcast bad root: %s", ct_errname(rc));
	rc = MPI_Bcast(&v, -1, MPI_INT, 0, MPI_COMM_WORLD);
	ct_out("bcast negative count: %s", ct_errname(rc));
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
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
		inplace(nb);
		derived(nb);
	}
	errors();
	if (s >= 2) { /* Bcast on an intercommunicator: MPI_ROOT, MPI_PROC_NULL, a remote root */
		MPI_Comm half, ic;
		MPI_Request rq;
		int low = r < s / 2, lr, v = -1;
		MPI_Comm_split(MPI_COMM_WORLD, low, r, &half);
		MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? s / 2 : 0, 7, &ic);
		MPI_Comm_rank(half, &lr);
		if (low)
			v = lr == 0 ? 4242 : -1;
		MPI_Bcast(&v, 1, MPI_INT, low ? (lr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, ic);
		ct_out("intercomm bcast %d", v);
		v = low ? -1 : 77 + (lr == 0);
		MPI_Ibcast(&v, 1, MPI_INT, low ? 0 : (lr == 0 ? MPI_ROOT : MPI_PROC_NULL), ic, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		ct_out("intercomm ibcast %d", v);
		MPI_Comm_free(&ic);
		MPI_Comm_free(&half);
	}
#if MPI_VERSION >= 4
	{ /* the large-count forms */
		int v[2] = {r, r + 1}, out[2], *all = malloc(2 * s * sizeof(int));
		MPI_Request rq;
		MPI_Allreduce_c(v, out, (MPI_Count)2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		ct_out("mpi4: allreduce_c %d %d", out[0], out[1]);
		MPI_Iallgather_c(v, (MPI_Count)2, MPI_INT, all, (MPI_Count)2, MPI_INT, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		ct_out("mpi4: iallgather_c last %d %d", all[2 * s - 2], all[2 * s - 1]);
		MPI_Exscan_c(v, out, (MPI_Count)1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (r > 0)
			ct_out("mpi4: exscan_c %d", out[0]);
		free(all);
	}
#endif
	{
		int v[2] = {r, r}, root = 0;
		MPI_Reduce(r == root ? MPI_IN_PLACE : v, v, 2, MPI_INT, MPI_MIN, root, MPI_COMM_WORLD);
		if (r == root)
			ct_out("reduce in_place min %d %d", v[0], v[1]);
	}
	return ct_end();
}
