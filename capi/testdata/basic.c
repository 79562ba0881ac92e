/* basic.c: what package capi's tests check through the built library:
 * ranks, point-to-point with wildcards and PROC_NULL, requests, the
 * collectives on predefined types, communicators and error handling. Each
 * line it prints is "rank R: what = value". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define SAY(...) (printf("rank %d: ", rank), printf(__VA_ARGS__), printf("\n"))

int main(int argc, char **argv) {
	int rank, size, provided, flag, count;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	SAY("size = %d", size);
	SAY("provided = %d", provided);
	MPI_Query_thread(&flag);
	SAY("query_thread = %d", flag);

	/* a ring: every rank sends its rank to the next, any source, any tag */
	int next = (rank + 1) % size, prev = (rank + size - 1) % size, got = -1;
	MPI_Request reqs[2];
	MPI_Status st[2];
	MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]);
	MPI_Isend(&rank, 1, MPI_INT, next, 10 + rank, MPI_COMM_WORLD, &reqs[1]);
	MPI_Waitall(2, reqs, st);
	MPI_Get_count(&st[0], MPI_INT, &count);
	SAY("ring = %d source %d tag %d count %d null %d", got, st[0].MPI_SOURCE, st[0].MPI_TAG, count,
	    reqs[0] == MPI_REQUEST_NULL);
	/* synchronous and ready modes, around the ring the other way */
	MPI_Irecv(&got, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &reqs[0]);
	MPI_Barrier(MPI_COMM_WORLD); /* every receive is posted: ready mode is valid */
	MPI_Rsend(&rank, 1, MPI_INT, next, 3, MPI_COMM_WORLD);
	MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
	SAY("rsend = %d", got);
	MPI_Issend(&rank, 1, MPI_INT, next, 4, MPI_COMM_WORLD, &reqs[1]);
	MPI_Recv(&got, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
	SAY("issend = %d", got);

	/* PROC_NULL */
	MPI_Status s;
	MPI_Recv(&got, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &s);
	MPI_Get_count(&s, MPI_INT, &count);
	SAY("procnull source %d tag %d count %d", s.MPI_SOURCE, s.MPI_TAG, count);

	/* collectives */
	long v = rank + 1, sum = 0, max = 0;
	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	MPI_Reduce(&v, &max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
	SAY("allreduce sum = %ld", sum);
	if (rank == 0) SAY("reduce max = %ld", max);
	double d = rank, all[64];
	MPI_Allgather(&d, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
	SAY("allgather last = %g", all[size - 1]);
	int b = rank == 0 ? 77 : 0;
	MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
	SAY("bcast = %d", b);
	MPI_Request ib[2];
	int ibv = rank == 0 ? 88 : 0;
	MPI_Ibcast(&ibv, 1, MPI_INT, 0, MPI_COMM_WORLD, &ib[0]);
	MPI_Ibarrier(MPI_COMM_WORLD, &ib[1]);
	MPI_Waitall(2, ib, MPI_STATUSES_IGNORE);
	SAY("ibcast = %d", ibv);
	unsigned in_place = 2;
	MPI_Allreduce(MPI_IN_PLACE, &in_place, 1, MPI_UNSIGNED, MPI_PROD, MPI_COMM_WORLD);
	SAY("in-place prod = %u", in_place);
	MPI_Barrier(MPI_COMM_WORLD);

	/* communicators */
	MPI_Comm dup, half;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_compare(MPI_COMM_WORLD, dup, &flag);
	SAY("compare dup = %s", flag == MPI_CONGRUENT ? "congruent" : "other");
	MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &half);
	int hr;
	MPI_Comm_rank(half, &hr);
	SAY("split reversed rank = %d", hr);
	MPI_Comm_set_name(dup, "the dup");
	char name[MPI_MAX_OBJECT_NAME];
	int len;
	MPI_Comm_get_name(dup, name, &len);
	SAY("name = %s (%d)", name, len);
	MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
	SAY("world name = %s", name);
	MPI_Comm_free(&dup);
	MPI_Comm_free(&half);
	SAY("freed = %d", dup == MPI_COMM_NULL && half == MPI_COMM_NULL);

	/* predefined attributes */
	int *tagub, *wtg;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagub, &flag);
	SAY("tag_ub >= 32767: %d (flag %d)", *tagub >= 32767, flag);
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &wtg, &flag);
	SAY("wtime_is_global = %d (flag %d)", *wtg, flag);

	/* errors: returned, then the class and string of unsupported */
	MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int rc = MPI_Send(&v, 1, MPI_LONG, size, 0, MPI_COMM_WORLD);
	SAY("send to rank size = %d", rc);
	rc = MPI_Win_fence(0, MPI_WIN_NULL);
	int cls;
	MPI_Error_class(rc, &cls);
	char es[MPI_MAX_ERROR_STRING];
	MPI_Error_string(cls, es, &len);
	SAY("win_fence = %d (%s)", cls, es);
	rc = MPI_Comm_get_attr(MPI_COMM_WORLD, 12345, &tagub, &flag);
	SAY("bad keyval = %d", rc);

	int inited, fin;
	MPI_Initialized(&inited);
	MPI_Finalize();
	MPI_Finalized(&fin);
	SAY("initialized %d finalized %d", inited, fin);
	return 0;
}
