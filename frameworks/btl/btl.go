// Package btl is the Byte Transfer Layer framework: the transports the mpi
// package moves messages over. A BTL module listens for connections from
// peers, publishes an address for the modex, dials peers it can reach, and
// gives back framed, ordered, reliable message connections. It knows
// nothing of matching, communicators or MPI semantics: that is package
// mpi's job (Open MPI's PML/BML over BTLs).
//
// Several modules may be selected at once (the framework is stacked); for
// each peer, package mpi uses the highest-priority module that says the
// peer is Reachable, as Open MPI's BML does. Connections are opened lazily
// on the first send to a peer, one per direction: a rank sends on the
// connection it dialed and reads on the ones it accepted, so two ranks that
// dial each other at once never race for a single socket. Package mpi
// authenticates every connection before it carries a message (its hello:
// a challenge-response proving both ranks know the job's secret), so a
// BTL need not; a BTL may refuse more (uds and sm refuse another user's
// process), logging refusals through Refusals.
//
// A module that needs more than its parameters implements
// mca.Provisioner[Host]: package mpi, which holds the job's data-plane
// secret, provisions every selected module before its Listen (tcp keys
// its optional TLS from the secret).
//
// A Conn may also implement Poller: while its owner has a goroutine
// blocked waiting for a message, reads busy-poll for a bounded time instead
// of sleeping at once, as MPI libraries do. Stream components build their
// Conns with NewStreamConn, which frames messages over a byte stream and
// implements Poller. Package btltest is the conformance kit.
//
// Components: tcp (any node), uds (Unix-domain sockets, same node only)
// and sm (shared memory, same node only).
package btl

import (
	"context"
	"errors"
)

// Name of the framework, and of its selection parameter.
const Name = "btl"

// ErrClosed is wrapped by Conn methods used after Close, and by Listen or
// Dial on a closed module.
var ErrClosed = errors.New("btl: closed")

// ErrFrame is wrapped when a peer sends bytes that are not a valid frame:
// the connection cannot be trusted any more and must be closed.
var ErrFrame = errors.New("btl: malformed frame")

// Host is what package mpi lends a module (mca.Provision) before Listen.
type Host struct {
	// Job is the job id (public).
	Job string
	// Secret is the job's data-plane secret (mpi.Bootstrap.Secret): the
	// same for every rank that runs together, known to no one else.
	Secret []byte
}

// Endpoint describes one process of a job as the modex saw it.
type Endpoint struct {
	Job  string // job id, the same for every rank of the job
	Rank int    // world rank
	Node string // node name; equal names mean the same node
	// Addr is what this module's Listen returned in that process ("" when
	// the process has no such module).
	Addr string
}

// Module is a selected transport of one process. Each Query of a component
// returns a fresh Module, so several processes can live in one address
// space (the test harness does that).
type Module interface {
	// Listen starts accepting connections for the process self and returns
	// the address peers dial, published through the modex. Each accepted
	// connection is handed to accept on a goroutine of the module's.
	Listen(ctx context.Context, self Endpoint, accept func(Conn)) (addr string, err error)
	// Reachable reports whether this module can connect self to peer
	// (peer.Addr is the peer's published address for this module).
	Reachable(self, peer Endpoint) bool
	// Dial opens a connection to peer.
	Dial(ctx context.Context, self, peer Endpoint) (Conn, error)
	// Close stops listening and removes what Listen created; connections
	// already handed out stay open until closed by their owner.
	Close() error
}

// Relistener is implemented by a module that can stop listening and
// listen again: package mpi's Suspend closes every socket the rank owns
// so the process can be dumped from outside, and its Resume listens anew.
// Unlisten closes the listener and removes what Listen created, as Close
// does, waits until accept is called no more, and leaves the module open:
// a later Listen starts a new listener (at a new address where the
// transport picks one). Connections already handed out stay open until
// closed by their owner. Without a listener it does nothing.
type Relistener interface {
	Unlisten() error
}

// Conn is a framed, ordered, reliable connection. A frame is a header and a
// payload, both opaque byte strings. Writes may not be concurrent with
// other writes, nor reads with reads; a write may run concurrently with a
// read.
type Conn interface {
	// WriteFrame sends one frame. hdr must not exceed MaxHeader bytes.
	WriteFrame(hdr, payload []byte) error
	// ReadHeader reads the next frame's header into hdr (which must hold
	// MaxHeader bytes) and returns the header and payload lengths. The
	// payload must then be consumed with ReadPayload and/or Discard before
	// the next ReadHeader.
	ReadHeader(hdr []byte) (hdrLen, payloadLen int, err error)
	// ReadPayload reads the next len(p) payload bytes of the current frame.
	ReadPayload(p []byte) error
	// Discard skips the next n payload bytes of the current frame.
	Discard(n int) error
	// CloseWrite tells the peer no more frames follow (it reads io.EOF
	// after the last one) while reads go on.
	CloseWrite() error
	// Close releases the connection; pending reads and writes fail.
	Close() error
}
