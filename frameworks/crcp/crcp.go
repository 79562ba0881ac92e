// Package crcp is the Checkpoint/Restart Coordination Protocol framework:
// it makes the channels between ranks consistent at a checkpoint, so that no
// message is lost, duplicated or reordered across checkpoint, continue and
// restart. Every send and every delivered receive of the mpi package passes
// through the selected module (the PML wrapper of Hursey's section 3.4.1).
//
// Components: bkmrk (bookmark exchange and drain; -am ft-enable-cr
// selects it) and none (C/R off: the mpi package does not call it at all).
// Modules run inside a rank, on its message path, so the framework stays
// in process: it is no plugin framework. Package crcptest is the
// conformance kit.
package crcp

import (
	"context"

	"gompi/frameworks/crs"
)

// Name of the framework, and of its selection parameter.
const Name = "crcp"

// Envelope identifies one message on the message path.
type Envelope struct {
	Context uint64 // communicator context id
	Src     int    // world rank of the sender
	Dst     int    // world rank of the receiver
	Tag     int
	Seq     uint64 // per (Context, Src, Dst) sequence number
	Size    int
}

// Channels is what a protocol needs from the messaging layer to make the
// channels consistent.
type Channels interface {
	Rank() int
	Size() int
	// Exchange gives every peer this rank's per-peer counts of messages
	// sent and returns each peer's count of messages sent to this rank.
	Exchange(ctx context.Context, sentTo []uint64) (sentToMe []uint64, err error)
	// Drain receives from peer into the library's buffers until total
	// messages from peer have arrived.
	Drain(ctx context.Context, peer int, total uint64) error
}

// Module is a selected protocol.
type Module interface {
	// Sent is called once per message handed to the transport.
	Sent(e Envelope)
	// Received is called once per message taken off the transport
	// (delivered or buffered).
	Received(e Envelope)
	// FTEvent runs the protocol for a C/R state: at StateCheckpoint it
	// makes the channels consistent; at StateContinue or StateRestart it
	// resumes them.
	FTEvent(ctx context.Context, state crs.State, ch Channels) error
}
