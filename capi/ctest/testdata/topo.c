/* Topologies: Dims_create, Cart_create/coords/rank/shift/sub/get,
 * Cartdim_get, Topo_test, Graph_create with its neighbour queries,
 * Dist_graph_create_adjacent with its neighbour queries. */
#include "ctest.h"

static const char *topo_name(int t)
{
	return t == MPI_CART ? "cart" : t == MPI_GRAPH ? "graph" : t == MPI_DIST_GRAPH ? "dist_graph" : t == MPI_UNDEFINED ? "undefined" : "?";
}

static void dims(void)
{
	int n, d[3];
	for (n = 1; n <= 12; n++) {
		d[0] = d[1] = d[2] = 0;
		MPI_Dims_create(n, 3, d);
		ct_out("dims %d: %d %d %d", n, d[0], d[1], d[2]);
	}
	d[0] = 0, d[1] = 2;
	MPI_Dims_create(8, 2, d);
	ct_out("dims 8 with 2 fixed: %d %d", d[0], d[1]);
}

static void cart(void)
{
	int d[2] = {0, 0}, per[2] = {1, 0}, coords[2], r, src, dst, t, nd, rd[2], gd[2], gp[2], gc[2], keep[2] = {0, 1}, n;
	MPI_Comm c, sub;
	MPI_Dims_create(ct_size, 2, d);
	MPI_Cart_create(MPI_COMM_WORLD, 2, d, per, 0, &c);
	MPI_Topo_test(c, &t);
	MPI_Cartdim_get(c, &nd);
	MPI_Comm_rank(c, &r);
	MPI_Cart_coords(c, r, 2, coords);
	ct_out("cart %s ndims %d rank %d coords %d %d", topo_name(t), nd, r, coords[0], coords[1]);
	MPI_Cart_rank(c, coords, &n);
	ct_out("cart_rank back %d", n);
	rd[0] = coords[0] + d[0], rd[1] = coords[1];
	MPI_Cart_rank(c, rd, &n);
	ct_out("cart_rank periodic wrap %d", n);
	MPI_Cart_shift(c, 0, 1, &src, &dst);
	ct_out("shift dim0 %d %d", src, dst);
	MPI_Cart_shift(c, 1, 1, &src, &dst);
	ct_out("shift dim1 %d %d", src == MPI_PROC_NULL ? -1 : src, dst == MPI_PROC_NULL ? -1 : dst);
	MPI_Cart_get(c, 2, gd, gp, gc);
	ct_out("cart_get %d %d periods %d %d coords %d %d", gd[0], gd[1], gp[0], gp[1], gc[0], gc[1]);
	MPI_Cart_sub(c, keep, &sub);
	MPI_Comm_size(sub, &n);
	MPI_Comm_rank(sub, &r);
	ct_out("cart_sub size %d rank %d", n, r);
	MPI_Comm_free(&sub);
	MPI_Comm_free(&c);
	MPI_Topo_test(MPI_COMM_WORLD, &t);
	ct_out("world topo %s", topo_name(t));
}

static void graphs(void)
{
	int s = ct_size, i, *index = malloc(s * sizeof(int)), *edges = malloc(2 * s * sizeof(int)), n, nn, ne, t,
	    nb[8], r = ct_rank, srcs[2], dsts[2], indeg, outdeg, weighted, k = 0;
	MPI_Comm g, dg;
	/* a ring: each node's neighbours are the next and the previous */
	for (i = 0; i < s; i++) {
		edges[k++] = (i + 1) % s;
		edges[k++] = (i + s - 1) % s;
		index[i] = k;
	}
	MPI_Graph_create(MPI_COMM_WORLD, s, index, edges, 0, &g);
	MPI_Topo_test(g, &t);
	MPI_Graphdims_get(g, &nn, &ne);
	MPI_Graph_neighbors_count(g, r, &n);
	MPI_Graph_neighbors(g, r, 8, nb);
	ct_out("graph %s nodes %d edges %d neighbours %d: %d %d", topo_name(t), nn, ne, n, nb[0], nb[1]);
	MPI_Comm_free(&g);
	srcs[0] = (r + s - 1) % s, dsts[0] = (r + 1) % s;
	MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED,
	                               MPI_INFO_NULL, 0, &dg);
	MPI_Topo_test(dg, &t);
	MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted);
	MPI_Dist_graph_neighbors(dg, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED);
	ct_out("dist_graph %s in %d out %d weighted %d src %d dst %d", topo_name(t), indeg, outdeg, weighted, srcs[0], dsts[0]);
	MPI_Comm_free(&dg);
	free(index), free(edges);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	ct_begin(argc, argv);
	dims();
	cart();
	graphs();
	return ct_end();
}
