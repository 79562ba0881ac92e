/*
 * coll.c: every collective, blocking and non-blocking. C checks the
 * communicator, the root and the counts and resolves MPI_IN_PLACE; Go
 * (coll.go, collv.go) turns (buffer, count, datatype) into package mpi's
 * collectives on any datatype. A non-blocking one returns a request of
 * the Wait/Test families (a NULL request pointer on the Go side means
 * blocking).
 */
#include "_cgo_export.h"
#include "gompi.h"

static int check(MPI_Comm comm, const char *fn) {
	gompi_check_init(fn);
	return gompi_comm_known(comm) && comm != MPI_COMM_NULL ? MPI_SUCCESS : MPI_ERR_COMM;
}

static int check_root(MPI_Comm comm, int root) {
	int size, remote = gompi_comm_remote_size(comm);
	if (remote > 0) /* an intercommunicator: the root names the remote group */
		return root == MPI_ROOT || root == MPI_PROC_NULL || (root >= 0 && root < remote) ? MPI_SUCCESS
												   : MPI_ERR_ROOT;
	PMPI_Comm_size(comm, &size);
	return root >= 0 && root < size ? MPI_SUCCESS : MPI_ERR_ROOT;
}

static int rank_of(MPI_Comm comm) {
	int rank;
	PMPI_Comm_rank(comm, &rank);
	return rank;
}

/* done sets *request (when non-blocking) and raises rc on comm. */
static int done(MPI_Comm comm, int rc, MPI_Request *request, uintptr_t h, const char *fn) {
	if (rc == MPI_SUCCESS && request != NULL) *request = (MPI_Request)h;
	return gompi_error(comm, rc, fn);
}

static int barrier(MPI_Comm comm, MPI_Request *request, const char *fn) {
	int rc = check(comm, fn);
	uintptr_t h = 0;
	if (rc == MPI_SUCCESS) rc = gompi_go_barrier((uintptr_t)comm, request ? &h : NULL);
	return done(comm, rc, request, h, fn);
}

int PMPI_Barrier(MPI_Comm comm) { return barrier(comm, NULL, "MPI_Barrier"); }

int PMPI_Ibarrier(MPI_Comm comm, MPI_Request *request) { return barrier(comm, request, "MPI_Ibarrier"); }

static int bcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request,
		 const char *fn) {
	int rc = check(comm, fn);
	uintptr_t h = 0;
	if (rc == MPI_SUCCESS && count < 0) rc = MPI_ERR_COUNT;
	if (rc == MPI_SUCCESS) rc = check_root(comm, root);
	if (rc == MPI_SUCCESS)
		rc = gompi_go_bcast((uintptr_t)comm, buffer, count, (uintptr_t)datatype, root, request ? &h : NULL);
	return done(comm, rc, request, h, fn);
}

int PMPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
	return bcast(buffer, count, datatype, root, comm, NULL, "MPI_Bcast");
}

int PMPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
	return bcast(buffer, count, datatype, root, comm, request, "MPI_Ibcast");
}

/* The reductions, as coll.go numbers them. */
enum { RED_REDUCE, RED_ALLREDUCE, RED_SCAN, RED_EXSCAN, RED_SCATTER_BLOCK, RED_SCATTER };

static int reduce(int kind, const void *sendbuf, void *recvbuf, MPI_Count count, const int counts[],
		  MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request, const char *fn) {
	int rc = check(comm, fn);
	uintptr_t h = 0;
	if (rc == MPI_SUCCESS && (count < 0 || (kind == RED_SCATTER && counts == NULL))) rc = MPI_ERR_COUNT;
	if (rc == MPI_SUCCESS && kind == RED_REDUCE) rc = check_root(comm, root);
	if (rc == MPI_SUCCESS) {
		if (kind == RED_REDUCE && rank_of(comm) != root) recvbuf = NULL; /* significant at root only */
		if (sendbuf == MPI_IN_PLACE) sendbuf = recvbuf;
		rc = gompi_go_reduce(kind, (uintptr_t)comm, (void *)sendbuf, recvbuf, count, (int *)counts,
				     (uintptr_t)datatype, (uintptr_t)op, root, request ? &h : NULL);
	}
	return done(comm, rc, request, h, fn);
}

int PMPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
	return reduce(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, NULL, "MPI_Reduce");
}

int PMPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
		 MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, request, "MPI_Ireduce");
}

int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
	return reduce(RED_ALLREDUCE, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Allreduce");
}

int PMPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
		    MPI_Request *request) {
	return reduce(RED_ALLREDUCE, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iallreduce");
}

int PMPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
	return reduce(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Scan");
}

int PMPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
	       MPI_Request *request) {
	return reduce(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iscan");
}

int PMPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
	return reduce(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Exscan");
}

int PMPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
		 MPI_Request *request) {
	return reduce(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iexscan");
}

int PMPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
			      MPI_Comm comm) {
	return reduce(RED_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, datatype, op, 0, comm, NULL,
		      "MPI_Reduce_scatter_block");
}

int PMPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
			       MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, datatype, op, 0, comm, request,
		      "MPI_Ireduce_scatter_block");
}

int PMPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
			MPI_Comm comm) {
	return reduce(RED_SCATTER, sendbuf, recvbuf, 0, recvcounts, datatype, op, 0, comm, NULL, "MPI_Reduce_scatter");
}

int PMPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
			 MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_SCATTER, sendbuf, recvbuf, 0, recvcounts, datatype, op, 0, comm, request,
		      "MPI_Ireduce_scatter");
}

/* The rooted and all-to-all collectives, as collv.go numbers them. */
enum { GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV, ALLTOALL, ALLTOALLV };

/* vargs is one buffer argument: a count, or per-rank counts and
 * displacements, in elements of its datatype. */
typedef struct {
	const void *buf;
	MPI_Count count;
	const int *counts, *displs;
	MPI_Datatype type;
} vargs;

static int vcoll(int kind, vargs s, vargs r, int root, MPI_Comm comm, MPI_Request *request, const char *fn) {
	int rc = check(comm, fn), in_place = 0;
	uintptr_t h = 0;
	if (rc == MPI_SUCCESS && kind <= SCATTERV) rc = check_root(comm, root);
	if (rc != MPI_SUCCESS) return done(comm, rc, request, h, fn);
	int here = kind > SCATTERV || rank_of(comm) == root;
	if (kind == SCATTER || kind == SCATTERV) in_place = here && r.buf == MPI_IN_PLACE;
	else in_place = here && s.buf == MPI_IN_PLACE;
	rc = gompi_go_vcoll(kind, (uintptr_t)comm, (void *)s.buf, s.count, (uintptr_t)s.type, (int *)s.counts,
				    (int *)s.displs, (void *)r.buf, r.count, (uintptr_t)r.type, (int *)r.counts,
				    (int *)r.displs, root, in_place, request ? &h : NULL);
	return done(comm, rc, request, h, fn);
}

#define ONE(b, n, t) ((vargs){(b), (n), NULL, NULL, (t)})
#define VEC(b, c, d, t) ((vargs){(b), 0, (c), (d), (t)})

int PMPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(GATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, NULL,
		     "MPI_Gather");
}

int PMPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(GATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, request,
		     "MPI_Igather");
}

int PMPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(GATHERV, ONE(sendbuf, sendcount, sendtype), VEC(recvbuf, recvcounts, displs, recvtype), root, comm,
		     NULL, "MPI_Gatherv");
}

int PMPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		  const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(GATHERV, ONE(sendbuf, sendcount, sendtype), VEC(recvbuf, recvcounts, displs, recvtype), root, comm,
		     request, "MPI_Igatherv");
}

int PMPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		 MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(SCATTER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, NULL,
		     "MPI_Scatter");
}

int PMPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(SCATTER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, request,
		     "MPI_Iscatter");
}

int PMPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf,
		  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(SCATTERV, VEC(sendbuf, sendcounts, displs, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm,
		     NULL, "MPI_Scatterv");
}

int PMPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
		   void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(SCATTERV, VEC(sendbuf, sendcounts, displs, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm,
		     request, "MPI_Iscatterv");
}

int PMPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLGATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, NULL,
		     "MPI_Allgather");
}

int PMPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
	return vcoll(ALLGATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, request,
		     "MPI_Iallgather");
}

int PMPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		    const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLGATHERV, ONE(sendbuf, sendcount, sendtype), VEC(recvbuf, recvcounts, displs, recvtype), 0, comm,
		     NULL, "MPI_Allgatherv");
}

int PMPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
		     const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
	return vcoll(ALLGATHERV, ONE(sendbuf, sendcount, sendtype), VEC(recvbuf, recvcounts, displs, recvtype), 0, comm,
		     request, "MPI_Iallgatherv");
}

int PMPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		  MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLTOALL, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, NULL,
		     "MPI_Alltoall");
}

int PMPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
		   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
	return vcoll(ALLTOALL, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, request,
		     "MPI_Ialltoall");
}

int PMPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
		   void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLTOALLV, VEC(sendbuf, sendcounts, sdispls, sendtype), VEC(recvbuf, recvcounts, rdispls, recvtype),
		     0, comm, NULL, "MPI_Alltoallv");
}

int PMPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
		    void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
		    MPI_Request *request) {
	return vcoll(ALLTOALLV, VEC(sendbuf, sendcounts, sdispls, sendtype), VEC(recvbuf, recvcounts, rdispls, recvtype),
		     0, comm, request, "MPI_Ialltoallv");
}

static int alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
		     void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
		     MPI_Comm comm, MPI_Request *request, const char *fn) {
	int rc = check(comm, fn);
	uintptr_t h = 0;
	if (rc == MPI_SUCCESS && sendbuf == MPI_IN_PLACE) { /* the send is what recvbuf holds */
		sendbuf = recvbuf, sendcounts = recvcounts, sdispls = rdispls, sendtypes = recvtypes;
	}
	if (rc == MPI_SUCCESS)
		rc = gompi_go_alltoallw((uintptr_t)comm, (void *)sendbuf, (int *)sendcounts, (int *)sdispls,
					(uintptr_t *)sendtypes, recvbuf, (int *)recvcounts, (int *)rdispls,
					(uintptr_t *)recvtypes, request ? &h : NULL);
	return done(comm, rc, request, h, fn);
}

int PMPI_Alltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
		   void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
		   MPI_Comm comm) {
	return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, NULL,
			 "MPI_Alltoallw");
}

int PMPI_Ialltoallw(const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
		    void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
		    MPI_Comm comm, MPI_Request *request) {
	return alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request,
			 "MPI_Ialltoallw");
}


/* The MPI-4 large-count forms (MPI_Count counts) of the collectives that
 * take no per-rank arrays: the same calls, whose counts are MPI_Count
 * already. */
int PMPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
	return bcast(buffer, count, datatype, root, comm, NULL, "MPI_Bcast_c");
}

int PMPI_Ibcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request) {
	return bcast(buffer, count, datatype, root, comm, request, "MPI_Ibcast_c");
}

int PMPI_Reduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
		MPI_Comm comm) {
	return reduce(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, NULL, "MPI_Reduce_c");
}

int PMPI_Ireduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		int root, MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_REDUCE, sendbuf, recvbuf, count, NULL, datatype, op, root, comm, request, "MPI_Ireduce_c");
}

int PMPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		MPI_Comm comm) {
	return reduce(RED_ALLREDUCE, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Allreduce_c");
}

int PMPI_Iallreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_ALLREDUCE, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iallreduce_c");
}

int PMPI_Scan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
	return reduce(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Scan_c");
}

int PMPI_Iscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_SCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iscan_c");
}

int PMPI_Exscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		MPI_Comm comm) {
	return reduce(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, NULL, "MPI_Exscan_c");
}

int PMPI_Iexscan_c(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
		MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_EXSCAN, sendbuf, recvbuf, count, NULL, datatype, op, 0, comm, request, "MPI_Iexscan_c");
}

int PMPI_Reduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
		MPI_Op op, MPI_Comm comm) {
	return reduce(RED_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, datatype, op, 0, comm, NULL,
			"MPI_Reduce_scatter_block_c");
}

int PMPI_Ireduce_scatter_block_c(const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
		MPI_Op op, MPI_Comm comm, MPI_Request *request) {
	return reduce(RED_SCATTER_BLOCK, sendbuf, recvbuf, recvcount, NULL, datatype, op, 0, comm, request,
			"MPI_Ireduce_scatter_block_c");
}

int PMPI_Gather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(GATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, NULL,
			"MPI_Gather_c");
}

int PMPI_Igather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(GATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, request,
			"MPI_Igather_c");
}

int PMPI_Scatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
	return vcoll(SCATTER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, NULL,
			"MPI_Scatter_c");
}

int PMPI_Iscatter_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request) {
	return vcoll(SCATTER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), root, comm, request,
			"MPI_Iscatter_c");
}

int PMPI_Allgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLGATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, NULL,
			"MPI_Allgather_c");
}

int PMPI_Iallgather_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
	return vcoll(ALLGATHER, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, request,
			"MPI_Iallgather_c");
}

int PMPI_Alltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
	return vcoll(ALLTOALL, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, NULL,
			"MPI_Alltoall_c");
}

int PMPI_Ialltoall_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf,
		MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
	return vcoll(ALLTOALL, ONE(sendbuf, sendcount, sendtype), ONE(recvbuf, recvcount, recvtype), 0, comm, request,
			"MPI_Ialltoall_c");
}

#define GOMPI_FILE_coll
#include "aliases_gen.h"
