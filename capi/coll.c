/*
 * coll.c: collectives over predefined (contiguous) datatypes. Counts and
 * displacements become bytes here; the operations are package mpi's.
 */
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"
#include "gompi.h"

static int check(MPI_Comm comm, const char *fn) {
	gompi_check_init(fn);
	return gompi_comm_known(comm) && comm != MPI_COMM_NULL ? MPI_SUCCESS : MPI_ERR_COMM;
}

static int64_t bytes_of(MPI_Count count, MPI_Datatype t, int *rc) {
	int64_t n = gompi_type_size(t);
	if (count < 0) *rc = MPI_ERR_COUNT;
	else if (n < 0) *rc = (uintptr_t)t >= GOMPI_HANDLE_BASE ? MPI_ERR_UNSUPPORTED_OPERATION : MPI_ERR_TYPE;
	else return n * count;
	return -1;
}

static int check_root(MPI_Comm comm, int root) {
	int size;
	PMPI_Comm_size(comm, &size);
	return root >= 0 && root < size ? MPI_SUCCESS : MPI_ERR_ROOT;
}

int PMPI_Barrier(MPI_Comm comm) {
	int rc = check(comm, "MPI_Barrier");
	if (rc == MPI_SUCCESS) rc = gompi_go_barrier((uintptr_t)comm);
	return gompi_error(comm, rc, "MPI_Barrier");
}

int PMPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
	int rc = check(comm, "MPI_Bcast");
	int64_t n = rc ? -1 : bytes_of(count, datatype, &rc);
	if (n >= 0 && !(rc = check_root(comm, root))) rc = gompi_go_bcast((uintptr_t)comm, buffer, n, root);
	return gompi_error(comm, rc, "MPI_Bcast");
}

int PMPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
	int rc = check(comm, "MPI_Ibarrier");
	uintptr_t h;
	if (rc == MPI_SUCCESS && (rc = gompi_go_ibcast((uintptr_t)comm, NULL, -1, 0, &h)) == MPI_SUCCESS)
		*request = (MPI_Request)h;
	return gompi_error(comm, rc, "MPI_Ibarrier");
}

int PMPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
	int rc = check(comm, "MPI_Ibcast");
	int64_t n = rc ? -1 : bytes_of(count, datatype, &rc);
	uintptr_t h;
	if (n >= 0 && !(rc = check_root(comm, root)) &&
	    (rc = gompi_go_ibcast((uintptr_t)comm, buffer, n, root, &h)) == MPI_SUCCESS)
		*request = (MPI_Request)h;
	return gompi_error(comm, rc, "MPI_Ibcast");
}

static int reduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
		  MPI_Comm comm, const char *fn) {
	int rc = check(comm, fn);
	if (rc != MPI_SUCCESS) return gompi_error(comm, rc, fn);
	if (bytes_of(count, datatype, &rc) < 0) return gompi_error(comm, rc, fn);
	if (root >= 0 && (rc = check_root(comm, root))) return gompi_error(comm, rc, fn);
	int rank;
	PMPI_Comm_rank(comm, &rank);
	int here = root < 0 || rank == root;
	if (sendbuf == MPI_IN_PLACE) sendbuf = recvbuf;
	rc = gompi_go_reduce((uintptr_t)comm, (void *)sendbuf, here ? recvbuf : NULL, count, (uintptr_t)datatype,
			     (uintptr_t)op, root);
	return gompi_error(comm, rc, fn);
}

int PMPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
	return reduce(sendbuf, recvbuf, count, datatype, op, root < 0 ? -1000 : root, comm, "MPI_Reduce");
}

int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
	return reduce(sendbuf, recvbuf, count, datatype, op, -1, comm, "MPI_Allreduce");
}

enum { GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLTOALL };

/* vec turns counts and displacements in elements of size n into bytes. */
static void vec(int size, const int *counts, const int *displs, int64_t n, int64_t *bc, int64_t *bd) {
	for (int i = 0; i < size; i++) {
		bc[i] = counts[i] * n;
		bd[i] = displs[i] * n;
	}
}

int PMPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		MPI_Datatype recvtype, int root, MPI_Comm comm) {
	int rc = check(comm, "MPI_Gather"), rank, size;
	if (rc || (rc = check_root(comm, root))) return gompi_error(comm, rc, "MPI_Gather");
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	int64_t rn = rank == root ? bytes_of(recvcount, recvtype, &rc) : 0;
	if (rn < 0) return gompi_error(comm, rc, "MPI_Gather");
	int64_t sn;
	if (sendbuf == MPI_IN_PLACE) { /* the root's own block is in place already */
		sendbuf = (char *)recvbuf + rn * rank;
		sn = rn;
	} else if ((sn = bytes_of(sendcount, sendtype, &rc)) < 0) {
		return gompi_error(comm, rc, "MPI_Gather");
	}
	rc = gompi_go_gatherv(GATHER, (uintptr_t)comm, (void *)sendbuf, sn, recvbuf, rn * size, NULL, NULL, root);
	return gompi_error(comm, rc, "MPI_Gather");
}

int PMPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
	int rc = check(comm, "MPI_Gatherv"), rank, size;
	if (rc || (rc = check_root(comm, root))) return gompi_error(comm, rc, "MPI_Gatherv");
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	int64_t *bc = calloc(2 * (size_t)size, sizeof(int64_t)), *bd = bc + size, end = 0;
	if (rank == root) {
		int64_t n = bytes_of(1, recvtype, &rc);
		if (n < 0) return free(bc), gompi_error(comm, rc, "MPI_Gatherv");
		vec(size, recvcounts, displs, n, bc, bd);
		for (int i = 0; i < size; i++)
			if (bd[i] + bc[i] > end) end = bd[i] + bc[i];
	}
	int64_t sn;
	if (sendbuf == MPI_IN_PLACE) {
		sendbuf = (char *)recvbuf + bd[rank];
		sn = bc[rank];
	} else if ((sn = bytes_of(sendcount, sendtype, &rc)) < 0) {
		return free(bc), gompi_error(comm, rc, "MPI_Gatherv");
	}
	rc = gompi_go_gatherv(GATHERV, (uintptr_t)comm, (void *)sendbuf, sn, recvbuf, end, rank == root ? bc : NULL,
			      rank == root ? bd : NULL, root);
	free(bc);
	return gompi_error(comm, rc, "MPI_Gatherv");
}

int PMPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int root, MPI_Comm comm) {
	int rc = check(comm, "MPI_Scatter"), rank, size;
	if (rc || (rc = check_root(comm, root))) return gompi_error(comm, rc, "MPI_Scatter");
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	int64_t sn = rank == root ? bytes_of(sendcount, sendtype, &rc) : 0;
	if (sn < 0) return gompi_error(comm, rc, "MPI_Scatter");
	int64_t rn;
	char *tmp = NULL;
	if (recvbuf == MPI_IN_PLACE) { /* the root keeps its block where it is */
		rn = sn;
		recvbuf = tmp = malloc(sn ? sn : 1);
	} else if ((rn = bytes_of(recvcount, recvtype, &rc)) < 0) {
		return gompi_error(comm, rc, "MPI_Scatter");
	}
	rc = gompi_go_gatherv(SCATTER, (uintptr_t)comm, (void *)sendbuf, sn * size, recvbuf, rn, NULL, NULL, root);
	free(tmp);
	return gompi_error(comm, rc, "MPI_Scatter");
}

int PMPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
	int rc = check(comm, "MPI_Scatterv"), rank, size;
	if (rc || (rc = check_root(comm, root))) return gompi_error(comm, rc, "MPI_Scatterv");
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	int64_t *bc = calloc(2 * (size_t)size, sizeof(int64_t)), *bd = bc + size, end = 0;
	if (rank == root) {
		int64_t n = bytes_of(1, sendtype, &rc);
		if (n < 0) return free(bc), gompi_error(comm, rc, "MPI_Scatterv");
		vec(size, sendcounts, displs, n, bc, bd);
		for (int i = 0; i < size; i++)
			if (bd[i] + bc[i] > end) end = bd[i] + bc[i];
	}
	int64_t rn;
	char *tmp = NULL;
	if (recvbuf == MPI_IN_PLACE) {
		rn = bc[rank];
		recvbuf = tmp = malloc(rn ? rn : 1);
	} else if ((rn = bytes_of(recvcount, recvtype, &rc)) < 0) {
		return free(bc), gompi_error(comm, rc, "MPI_Scatterv");
	}
	rc = gompi_go_gatherv(SCATTERV, (uintptr_t)comm, (void *)sendbuf, end, recvbuf, rn, rank == root ? bc : NULL,
			      rank == root ? bd : NULL, root);
	free(bc);
	free(tmp);
	return gompi_error(comm, rc, "MPI_Scatterv");
}

static int allcoll(int kind, const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm, const char *fn) {
	int rc = check(comm, fn), rank, size;
	if (rc) return gompi_error(comm, rc, fn);
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	int64_t rn = bytes_of(recvcount, recvtype, &rc);
	if (rn < 0) return gompi_error(comm, rc, fn);
	int64_t sn;
	char *tmp = NULL;
	if (sendbuf == MPI_IN_PLACE) {
		/* Allgather: this rank's block is in recvbuf already; Alltoall:
		 * the whole send is recvbuf, copied first */
		sn = kind == ALLGATHER ? rn : rn * size;
		if (kind == ALLGATHER) {
			sendbuf = (char *)recvbuf + rn * rank;
			tmp = malloc(sn ? sn : 1);
			memcpy(tmp, sendbuf, sn);
			sendbuf = tmp;
		} else {
			tmp = malloc(sn ? sn : 1);
			memcpy(tmp, recvbuf, sn);
			sendbuf = tmp;
		}
	} else if ((sn = bytes_of(sendcount, sendtype, &rc)) < 0) {
		return gompi_error(comm, rc, fn);
	} else if (kind == ALLTOALL) {
		sn *= size;
	}
	rc = gompi_go_gatherv(kind, (uintptr_t)comm, (void *)sendbuf, sn, recvbuf, rn * size, NULL, NULL, 0);
	free(tmp);
	return gompi_error(comm, rc, fn);
}

int PMPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm) {
	return allcoll(ALLGATHER, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, "MPI_Allgather");
}

int PMPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm) {
	return allcoll(ALLTOALL, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, "MPI_Alltoall");
}

#define GOMPI_FILE_coll
#include "aliases_gen.h"
