/* Predefined ops on a derived datatype with holes, which Open MPI refuses
 * (so the differential programs cannot show it): gompi combines its base
 * elements, in place and not, blocking and not. Prints "ok" per rank or
 * the first wrong value. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int r, s, i, v[8], out[8], in[8], bad = 0;
	MPI_Datatype vec, every2;
	MPI_Request rq;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &r);
	MPI_Comm_size(MPI_COMM_WORLD, &s);
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec); /* ints 0 and 2 of 4 */
	MPI_Type_create_resized(vec, 0, 4 * sizeof(int), &every2);
	MPI_Type_free(&vec);
	MPI_Type_commit(&every2);
	for (i = 0; i < 8; i++)
		v[i] = r + i, out[i] = -1, in[i] = 10 * i;
	MPI_Allreduce(v, out, 2, every2, MPI_SUM, MPI_COMM_WORLD);
	for (i = 0; i < 8; i++)
		if (out[i] != (i % 2 ? -1 : s * i + s * (s - 1) / 2) && !bad++)
			printf("rank %d: allreduce out[%d] = %d\n", r, i, out[i]);
	MPI_Iallreduce(MPI_IN_PLACE, v, 2, every2, MPI_MAX, MPI_COMM_WORLD, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	for (i = 0; i < 8; i++)
		if (v[i] != (i % 2 ? r + i : s - 1 + i) && !bad++)
			printf("rank %d: iallreduce in place v[%d] = %d\n", r, i, v[i]);
	MPI_Reduce_local(in, v, 2, every2, MPI_PROD);
	for (i = 0; i < 8; i++)
		if (v[i] != (i % 2 ? r + i : 10 * i * (s - 1 + i)) && !bad++)
			printf("rank %d: reduce_local v[%d] = %d\n", r, i, v[i]);
	MPI_Type_free(&every2);
	if (!bad)
		printf("rank %d: ok\n", r);
	MPI_Finalize();
	return 0;
}
