// Package crcp is the Checkpoint/Restart Coordination Protocol framework:
// it makes the channels between ranks consistent at a checkpoint, so that no
// message is lost, duplicated or reordered across checkpoint, continue and
// restart. Every send and every delivered receive of the mpi package passes
// through the selected module (the PML wrapper of Hursey's section 3.4.1).
//
// Components: bkmrk (bookmark exchange and drain; -am ft-enable-cr
// selects it), flag (MVAPICH2-CR's flags, for transparent checkpoints
// only) and none (C/R off: the mpi package does not call it at all).
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
// channels consistent. Exchange and Agree are collective: every rank
// calls them, in the same order.
type Channels interface {
	Rank() int
	Size() int
	// Exchange gives every peer this rank's per-peer counts of messages
	// sent and returns each peer's count of messages sent to this rank. A
	// zero count says nothing: the mpi library's exchange moves only the
	// non-zero ones (along a tree, O(N) messages in all), so it costs the
	// pairs of ranks that never exchanged a message nothing, and a rank
	// that only receives still learns what it must wait for.
	Exchange(ctx context.Context, sentTo []uint64) (sentToMe []uint64, err error)
	// Drain receives from peer into the library's buffers until total
	// messages from peer have arrived.
	Drain(ctx context.Context, peer int, total uint64) error
	// Agree reports whether ok holds on every rank; it returns once every
	// rank called it (a barrier too).
	Agree(ctx context.Context, ok bool) (all bool, err error)
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

// Quiesce is how the mpi library makes a rank's channels quiet for a
// transparent checkpoint (a CRS that dumps the rank from outside, such as
// criu: mpi.Proc.Suspend), where the library, not the module's FTEvent,
// drains the channels and then closes every connection.
type Quiesce int

const (
	// QuiesceCounts: every rank tells every peer it sent messages to how
	// many (through the library's exchange, which tells a rank that only
	// receives too) and waits until it has received what each peer
	// counted (bkmrk's bookmarks).
	QuiesceCounts Quiesce = iota + 1
	// QuiesceFlags: every rank writes a flag down every connection it
	// opened, behind its last message, and reads each connection to it up
	// to that peer's flag; no counts are exchanged (channels are FIFO),
	// only which ranks will send a flag to which.
	QuiesceFlags
)

func (q Quiesce) String() string {
	switch q {
	case QuiesceCounts:
		return "counts"
	case QuiesceFlags:
		return "flags"
	}
	return "unknown"
}

// Transparent is implemented by a protocol that can quiesce a rank for a
// transparent checkpoint: it says which way the library does it. Every
// rank of a job selects the same protocol (the job's parameters reach
// every rank), so both ends of every connection agree.
type Transparent interface {
	TransparentQuiesce() Quiesce
}
