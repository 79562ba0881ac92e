package capi

/*
#include "gompi.h"
*/
import "C"

import (
	"gompi/mpi"
)

//export gompi_go_topo_test
func gompi_go_topo_test(ch C.uintptr_t, status *C.int) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	switch c.TopoTest() {
	case mpi.TopoCart:
		*status = C.MPI_CART
	case mpi.TopoGraph:
		*status = C.MPI_GRAPH
	case mpi.TopoDistGraph:
		*status = C.MPI_DIST_GRAPH
	default:
		*status = undefinedABI
	}
	return 0
}

//export gompi_go_graph_create
func gompi_go_graph_create(ch C.uintptr_t, nnodes C.int, index, edges *C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	var idx, e []int
	if nnodes > 0 {
		idx = ints(index, int(nnodes))
		if n := idx[len(idx)-1]; n > 0 {
			e = ints(edges, n)
		}
	}
	nc, err := c.GraphCreate(idx, e)
	return newComm(nc, err, ch, out)
}

// graph returns the graph topology of a communicator handle.
func graph(ch C.uintptr_t) (*mpi.Graph, C.int) {
	t, rc := topology(ch)
	if rc != 0 {
		return nil, rc
	}
	if t == nil || t.Graph == nil {
		return nil, errTopology
	}
	return t.Graph, 0
}

//export gompi_go_graphdims_get
func gompi_go_graphdims_get(ch C.uintptr_t, nnodes, nedges *C.int) C.int {
	g, rc := graph(ch)
	if rc != 0 {
		return rc
	}
	*nnodes, *nedges = C.int(len(g.Index)), C.int(len(g.Edges))
	return 0
}

// gompi_go_graph_neighbors answers MPI_Graph_neighbors_count (nb NULL)
// and MPI_Graph_neighbors (up to maxn of them).
//
//export gompi_go_graph_neighbors
func gompi_go_graph_neighbors(ch C.uintptr_t, rank C.int, count *C.int, maxn C.int, nb *C.int) C.int {
	g, rc := graph(ch)
	if rc != 0 {
		return rc
	}
	ns, err := g.Neighbors(int(rank))
	if err != nil {
		return errRank
	}
	if count != nil {
		*count = C.int(len(ns))
	}
	putInts(nb, int(maxn), ns)
	return 0
}

//export gompi_go_dist_graph_create_adjacent
func gompi_go_dist_graph_create_adjacent(ch C.uintptr_t, indeg C.int, srcs *C.int, outdeg C.int, dsts *C.int, out *C.uintptr_t) C.int {
	c, err := comm(ch)
	if err != nil {
		return errComm
	}
	var s, d []int
	if indeg > 0 {
		s = ints(srcs, int(indeg))
	}
	if outdeg > 0 {
		d = ints(dsts, int(outdeg))
	}
	nc, err := c.DistGraphCreateAdjacent(s, d)
	return newComm(nc, err, ch, out)
}

// gompi_go_dist_graph_neighbors answers MPI_Dist_graph_neighbors_count
// (indeg and outdeg set) and MPI_Dist_graph_neighbors (up to maxin
// sources and maxout destinations).
//
//export gompi_go_dist_graph_neighbors
func gompi_go_dist_graph_neighbors(ch C.uintptr_t, indeg, outdeg *C.int, maxin C.int, srcs *C.int, maxout C.int, dsts *C.int) C.int {
	t, rc := topology(ch)
	if rc != 0 {
		return rc
	}
	if t == nil || t.DistGraph == nil {
		return errTopology
	}
	if indeg != nil {
		*indeg, *outdeg = C.int(len(t.DistGraph.Sources)), C.int(len(t.DistGraph.Dests))
		return 0
	}
	putInts(srcs, int(maxin), t.DistGraph.Sources)
	putInts(dsts, int(maxout), t.DistGraph.Dests)
	return 0
}
