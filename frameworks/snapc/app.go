package snapc

import (
	"context"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore/snapshot"
)

// The application level of SnapC: the protocol between a rank's app
// coordinator (package cr, inside the rank) and the job's coordinators
// (the local one in gompid, the global one in gompirun), carried by the
// runtime's rank client. With crs=self a rank is saved only at a safe
// point: a checkpoint first asks every rank for its safe-point count
// (Query), targets max+1 (no rank is asked to stop at a point it already
// passed), and each rank saves itself when its count reaches the target.

// LibraryStateFile is the file of a local snapshot that holds the mpi
// library's own state (drained messages, sequence numbers, communicator
// log, collective counters); a restarted rank's mpi.Init reads it.
const LibraryStateFile = "library.state"

// AppRequestKind says what the job's coordinator asks of a rank.
type AppRequestKind int

const (
	// Query asks for the rank's safe-point count and whether it can be
	// checkpointed at all.
	Query AppRequestKind = iota
	// Target asks the rank to save itself when its safe-point count
	// reaches Target, into Dir.
	Target
	// Cancel withdraws the request ID: the rank does not save, or, if it
	// is waiting for its peers inside the checkpoint, resumes unsaved.
	Cancel
	// ReleaseHold ends a migration's hold (request ID): the rank ends (Leave)
	// or resumes, reaching the moved ranks at Peers.
	ReleaseHold
	// Quiesce asks the rank to suspend itself now, wherever its program
	// is, for a dump from outside (a transparent CRS, Dumper): its
	// library drains its channels with every other rank's, closes its
	// sockets, and says so on its lifeline, where it then waits for
	// gompid's word. A Cancel of the same ID withdraws it.
	Quiesce
	// Rollback tells a surviving rank that the job rolls back in place
	// (errmgr rollback) to sequence Seq, whose local snapshot for this rank
	// is in Dir (its node's cached copy, or fetched from global storage);
	// Target is the rollback's epoch. The library interrupts every call
	// at once (mpi.Proc.RollBack); package cr restores the rank from Dir
	// when the program returns to its re-entry point (cr.Run). It is not
	// answered: the rank shows it is back by joining the rollback's
	// address exchange.
	Rollback
)

// AppRequest is one request from the job's coordinator to a rank.
type AppRequest struct {
	ID      uint64         `json:"id"`
	Kind    AppRequestKind `json:"kind"`
	Target  uint64         `json:"target,omitempty"` // safe point to save at (Target)
	Seq     int            `json:"seq,omitempty"`
	Dir     string         `json:"dir,omitempty"` // empty existing directory for the local snapshot (Target)
	Options crs.Options    `json:"options"`
	// Migrate: a migration's Target. The ranks in it save into Dir, the
	// others only drain their channels and hold (Dir empty); every rank
	// then waits for the Release (or Cancel) of request ID.
	Migrate []int `json:"migrate,omitempty"`
	// Leave, Peers: a ReleaseHold (see Release).
	Leave bool                      `json:"leave,omitempty"`
	Peers map[int]map[string]string `json:"peers,omitempty"`
}

// AppReply is a rank's answer to a request.
type AppReply struct {
	ID   uint64         `json:"id"`
	Kind AppRequestKind `json:"kind"`
	// Query: the rank's safe-point count, and whether it can be saved
	// (Reason says why not: crs=none, no safe points in the program,
	// finalizing...).
	Count          uint64 `json:"count,omitempty"`
	Checkpointable bool   `json:"checkpointable,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Target: the local snapshot was written and its snapshot_meta is in
	// Dir (Err empty), or the rank could not save (Err says why).
	Err string `json:"err,omitempty"`
}

// RestartInfo describes a start from a snapshot.
type RestartInfo struct {
	Ref snapshot.Ref `json:"ref"`
	Seq int          `json:"seq"`
	// Dir is this rank's local snapshot, readable on this node.
	Dir string `json:"dir"`
}

// AppLink is a rank's connection to the job's coordinators. The runtime's
// rank client implements it; package cr uses it.
type AppLink interface {
	// Requests delivers the coordinator's requests, in order. The channel
	// closes when the rank finalizes or loses its daemon.
	Requests() <-chan AppRequest
	// Reply answers a request.
	Reply(ctx context.Context, r AppReply) error
	// Checkpoint asks the global coordinator for a checkpoint of the whole
	// job at safe point target (cr.Checkpoint, called by every rank at the
	// same point) and returns once the sequence is committed or has failed.
	Checkpoint(ctx context.Context, target uint64, opts crs.Options) (Result, error)
	// Restart says whether this start is a restart, and from what.
	Restart() (RestartInfo, bool)
}
