// Package coll is the collective-operations framework: how a
// communicator's Barrier, Bcast, Reduce and Allreduce are carried out, as
// Open MPI's coll framework chooses among its tuned, han and other
// components.
//
// Package mpi selects every available component at start-up (the
// framework is stacked, best first). For each communicator it asks every
// selected module for that communicator's operations (Module.Comm); a
// module that does not apply to the communicator (han on a communicator
// within one node) skips it. Each operation then runs on the first module,
// in priority order, that implements it (Barrierer, Bcaster, Reducer,
// Allreducer) and does not decline the call's arguments (ErrDecline, given
// before any message moves, from arguments every member passes alike).
// When no module takes an operation, package mpi runs the flat algorithm of
// this package itself, so excluding every component changes nothing.
//
// A module sees the communicator only through Comm, which package mpi
// implements: its rank, size, the node of each member, and point-to-point
// messages on the communicator's collective context under the tag of the
// one collective being run. Messages between two members with one tag are
// received in the order they were sent, so every phase of a collective may
// reuse the tag. Every message goes through the BTLs, which a checkpoint
// drains: a module keeps no state in shared memory of its own.
//
// Results must not depend on timing: each algorithm fixes the order in
// which it combines contributions. The flat algorithms (flat.go) fix it
// by the communicator's size and root alone. An algorithm whose order
// depends on where the members run (han) gives the same bits for integer
// reductions, which are exact in any order, but not for floating point, so
// it declines floating-point reductions unless the user asked for the
// layout-dependent order: a restarted or migrated job on another layout,
// or a replica on another node, must compute the same bits.
//
// Components: basic (the flat algorithms, the default) and han
// (hierarchical: node leaders over the network, members through their
// leader).
package coll

import (
	"context"
	"errors"
)

// Name of the framework, and of its selection parameter.
const Name = "coll"

// ErrDecline is returned (possibly wrapped) by an operation that does not
// take these arguments, before any message moved: the next module runs it.
var ErrDecline = errors.New("coll: declined")

// Comm is one communicator as package mpi lends it to a module.
type Comm interface {
	// Rank and Size are this member's rank in the communicator and how
	// many members it has.
	Rank() int
	Size() int
	// Node names the node member r runs on; equal names mean one node.
	// Every member sees the same names. Package mpi asks a module for a
	// communicator's operations once: members that asked on either side
	// of a change of layout (a restore on other nodes, a migration) would
	// disagree, so a module whose algorithm follows the layout does not
	// apply in a job with C/R (mca.ParamCREnabled).
	Node(r int) string
	// Send sends data to member dst under tag; it returns once data may
	// be reused.
	Send(ctx context.Context, dst, tag int, data []byte) error
	// Recv receives exactly len(buf) bytes from member src under tag; a
	// message of another length is an error.
	Recv(ctx context.Context, buf []byte, src, tag int) error
	// SendRecv sends sbuf to dst while receiving exactly len(rbuf) bytes
	// from src, so two members exchanging at once never wait on each
	// other.
	SendRecv(ctx context.Context, sbuf []byte, dst int, rbuf []byte, src, tag int) error
}

// Reduction is the element-wise reduction of a Reduce or Allreduce.
type Reduction struct {
	// Fn combines in into inout element by element (inout = inout op in).
	// Both are aligned for the element type. For a non-commutative
	// reduction, inout holds the combination of lower ranks than in's.
	Fn func(inout, in []byte)
	// Elem is the size of one element in bytes.
	Elem int
	// Float says the elements are floating point: the order of
	// combination changes the result's bits.
	Float bool
	// NonCommutative says op is only associative: the contributions must
	// be combined in rank order (rank 0's first), which the flat
	// algorithms do and a module must otherwise decline.
	NonCommutative bool
}

// Module is a component's module in one process.
type Module interface {
	// Comm returns the module's operations for c: a value implementing
	// some of Barrierer, Bcaster, Reducer and Allreducer. An error
	// wrapping mca.ErrSkip says the module does not apply to c. It must
	// not send or receive: every member decides alone, from what Comm
	// tells it, and all decide alike.
	Comm(c Comm) (any, error)
}

// Barrierer carries out Barrier.
type Barrierer interface {
	Barrier(ctx context.Context, c Comm, tag int) error
}

// Bcaster carries out Bcast: root's buf into every member's buf.
type Bcaster interface {
	Bcast(ctx context.Context, c Comm, tag int, buf []byte, root int) error
}

// Reducer carries out Reduce: every member's send combined into root's
// recv (nil elsewhere); send and recv may be the same bytes.
type Reducer interface {
	Reduce(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction, root int) error
}

// Allreducer carries out Allreduce: every member's send combined into
// every member's recv, the same bits everywhere; send and recv may be the
// same bytes.
type Allreducer interface {
	Allreduce(ctx context.Context, c Comm, tag int, send, recv []byte, red Reduction) error
}
