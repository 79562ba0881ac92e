/*
 * topo.c: virtual topologies (Cartesian, graph, distributed graph) over
 * package mpi's CartCreate, GraphCreate and DistGraphCreateAdjacent. Ranks
 * are never reordered (reorder is a hint MPI lets an implementation
 * ignore); edge weights are not kept, so only MPI_UNWEIGHTED and
 * MPI_WEIGHTS_EMPTY are accepted.
 */
#include "_cgo_export.h"
#include "gompi.h"

int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
	gompi_check_init("MPI_Dims_create");
	if (nnodes < 0 || ndims < 0) return gompi_error(MPI_COMM_WORLD, MPI_ERR_ARG, "MPI_Dims_create");
	return gompi_error(MPI_COMM_WORLD, gompi_go_dims_create(nnodes, ndims, dims), "MPI_Dims_create");
}

int PMPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *comm_cart) {
	(void)reorder;
	CHECK_COMM(comm, "MPI_Cart_create");
	if (ndims < 0) return gompi_error(comm, MPI_ERR_DIMS, "MPI_Cart_create");
	uintptr_t h;
	int rc = gompi_go_cart_create((uintptr_t)comm, ndims, (int *)dims, (int *)periods, &h);
	if (rc == MPI_SUCCESS) *comm_cart = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Cart_create");
}

int PMPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm) {
	CHECK_COMM(comm, "MPI_Cart_sub");
	uintptr_t h;
	int rc = gompi_go_cart_sub((uintptr_t)comm, (int *)remain_dims, &h);
	if (rc == MPI_SUCCESS) *newcomm = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Cart_sub");
}

int PMPI_Cartdim_get(MPI_Comm comm, int *ndims) {
	CHECK_COMM(comm, "MPI_Cartdim_get");
	return gompi_error(comm, gompi_go_cart_get((uintptr_t)comm, ndims, 0, NULL, NULL, NULL), "MPI_Cartdim_get");
}

int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
	CHECK_COMM(comm, "MPI_Cart_get");
	return gompi_error(comm, gompi_go_cart_get((uintptr_t)comm, NULL, maxdims, dims, periods, coords), "MPI_Cart_get");
}

int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
	CHECK_COMM(comm, "MPI_Cart_coords");
	return gompi_error(comm, gompi_go_cart_coords((uintptr_t)comm, rank, maxdims, coords), "MPI_Cart_coords");
}

int PMPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank) {
	CHECK_COMM(comm, "MPI_Cart_rank");
	return gompi_error(comm, gompi_go_cart_rank((uintptr_t)comm, (int *)coords, rank), "MPI_Cart_rank");
}

int PMPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest) {
	CHECK_COMM(comm, "MPI_Cart_shift");
	return gompi_error(comm, gompi_go_cart_shift((uintptr_t)comm, direction, disp, rank_source, rank_dest), "MPI_Cart_shift");
}

int PMPI_Topo_test(MPI_Comm comm, int *status) {
	CHECK_COMM(comm, "MPI_Topo_test");
	return gompi_error(comm, gompi_go_topo_test((uintptr_t)comm, status), "MPI_Topo_test");
}

int PMPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm *comm_graph) {
	(void)reorder;
	CHECK_COMM(comm, "MPI_Graph_create");
	if (nnodes < 0) return gompi_error(comm, MPI_ERR_ARG, "MPI_Graph_create");
	uintptr_t h;
	int rc = gompi_go_graph_create((uintptr_t)comm, nnodes, (int *)index, (int *)edges, &h);
	if (rc == MPI_SUCCESS) *comm_graph = (MPI_Comm)h;
	return gompi_error(comm, rc, "MPI_Graph_create");
}

int PMPI_Graphdims_get(MPI_Comm comm, int *nnodes, int *nedges) {
	CHECK_COMM(comm, "MPI_Graphdims_get");
	return gompi_error(comm, gompi_go_graphdims_get((uintptr_t)comm, nnodes, nedges), "MPI_Graphdims_get");
}

int PMPI_Graph_neighbors_count(MPI_Comm comm, int rank, int *nneighbors) {
	CHECK_COMM(comm, "MPI_Graph_neighbors_count");
	return gompi_error(comm, gompi_go_graph_neighbors((uintptr_t)comm, rank, nneighbors, 0, NULL),
			   "MPI_Graph_neighbors_count");
}

int PMPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
	CHECK_COMM(comm, "MPI_Graph_neighbors");
	return gompi_error(comm, gompi_go_graph_neighbors((uintptr_t)comm, rank, NULL, maxneighbors, neighbors),
			   "MPI_Graph_neighbors");
}

static int unweighted(const int *w) { return w == MPI_UNWEIGHTED || w == MPI_WEIGHTS_EMPTY; }

int PMPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
				    int outdegree, const int destinations[], const int destweights[], MPI_Info info,
				    int reorder, MPI_Comm *comm_dist_graph) {
	(void)info, (void)reorder;
	CHECK_COMM(comm_old, "MPI_Dist_graph_create_adjacent");
	if (indegree < 0 || outdegree < 0)
		return gompi_error(comm_old, MPI_ERR_ARG, "MPI_Dist_graph_create_adjacent");
	if (!unweighted(sourceweights) || !unweighted(destweights))
		return gompi_error(comm_old, MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Dist_graph_create_adjacent");
	uintptr_t h;
	int rc = gompi_go_dist_graph_create_adjacent((uintptr_t)comm_old, indegree, (int *)sources, outdegree,
						     (int *)destinations, &h);
	if (rc == MPI_SUCCESS) *comm_dist_graph = (MPI_Comm)h;
	return gompi_error(comm_old, rc, "MPI_Dist_graph_create_adjacent");
}

int PMPI_Dist_graph_neighbors_count(MPI_Comm comm, int *indegree, int *outdegree, int *weighted) {
	CHECK_COMM(comm, "MPI_Dist_graph_neighbors_count");
	int rc = gompi_go_dist_graph_neighbors((uintptr_t)comm, indegree, outdegree, 0, NULL, 0, NULL);
	if (rc == MPI_SUCCESS) *weighted = 0;
	return gompi_error(comm, rc, "MPI_Dist_graph_neighbors_count");
}

int PMPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree,
			      int destinations[], int destweights[]) {
	(void)sourceweights, (void)destweights; /* unweighted: nothing to give */
	CHECK_COMM(comm, "MPI_Dist_graph_neighbors");
	return gompi_error(comm,
			   gompi_go_dist_graph_neighbors((uintptr_t)comm, NULL, NULL, maxindegree, sources, maxoutdegree,
							 destinations),
			   "MPI_Dist_graph_neighbors");
}

#define GOMPI_FILE_topo
#include "aliases_gen.h"
