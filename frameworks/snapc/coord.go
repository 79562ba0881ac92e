package snapc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// The coordinator levels of a SnapC component that coordinates (full):
// the global coordinator in gompirun drives one local coordinator per
// node (in gompid), which drives the application coordinators of its
// ranks (AppLink, app.go). A Module that coordinates implements
// Coordinator; gompirun and gompid find it by type assertion, so a
// component that does not (none) refuses every request through Module.
//
// One checkpoint, as the global coordinator runs it:
//
//	query   every rank's safe-point count and whether it can be saved; any
//	        rank that cannot fails the request for all, before anything
//	        is written
//	target  the next sequence number is recorded (uncommitted) in the
//	        global metadata; each node makes its ranks' local snapshot
//	        directories and asks the ranks to save at the target
//	local   each node reports its ranks' local snapshots written
//	sync    each node makes its local snapshots stable (SStore Sync)
//	commit  the global metadata gets the ranks' records and the commit
//	        mark, last, in one atomic replace
//
// Any failure before the commit cancels the request on every node and
// leaves the sequence uncommitted; earlier sequences are never touched.

// Coordinator is implemented by a Module that runs checkpoints.
type Coordinator interface {
	Module
	// NewGlobal starts the global coordinator of a job (in gompirun).
	NewGlobal(job JobSpec, link NodeLink) (Global, error)
	// NewLocal starts the local coordinator of a node (in gompid).
	NewLocal(node NodeSpec, port AppPort) (Local, error)
}

// JobSpec is what the global coordinator knows of its job, and what it
// records in the global metadata for gompi-restart.
type JobSpec struct {
	Job string
	// RankNodes is the node of every rank, by rank.
	RankNodes []string
	// Ref is where the job's sequences go: a fresh reference named after
	// the job, or, for a restarted job, the reference it restarted from
	// (its sequence numbers continue).
	Ref snapshot.Ref
	// Settings are the parameters the job runs with that did not come from
	// defaults (mca.Values.Changed); AMCA the sets it was started with.
	Settings []mca.Setting
	AMCA     []string
	Launch   crs.Launch
	// FromOutside says the job's CRS saves ranks from outside them (a
	// crs.Restorer): a checkpoint dumps every rank now (LocalDump)
	// instead of asking for a safe point.
	FromOutside bool
	// Meta reads and writes the reference's global metadata (nil: on this
	// node's file system; snapshot.MetaStoreFor gives the one for Ref).
	Meta snapshot.MetaStore
	// Values are the job's resolved parameters (components read their own).
	Values *mca.Values
	Log    *slog.Logger
}

// NodeLink is how a global coordinator reaches the daemons; gompirun
// implements it.
type NodeLink interface {
	// Send delivers req to the local coordinator of node. Its reply comes
	// back through Global.Deliver.
	Send(node string, req LocalRequest) error
	// Terminate says a checkpoint-and-terminate request was committed: the
	// ranks end themselves, and gompirun ends those that do not.
	Terminate()
}

// Global is a job's global coordinator.
type Global interface {
	// Checkpoint runs a checkpoint of the whole job (a tool's request; with
	// req.Ranks, a migration's, see Request) and
	// returns once its sequence is committed or has failed. progress, when
	// not nil, is called with every event of the request, in order, on the
	// caller's goroutine. Cancelling ctx stops the waiting, never the
	// request: a checkpoint whose requester went away still finishes (or
	// fails) by itself.
	Checkpoint(ctx context.Context, req Request, progress func(Event)) (Result, error)
	// AppCheckpoint is a rank's cr.Checkpoint: every rank asks for the same
	// safe point target, and the requests are merged into one checkpoint.
	AppCheckpoint(ctx context.Context, rank int, target uint64, opts crs.Options) (Result, error)
	// Deliver hands over a local coordinator's reply. It never blocks.
	Deliver(r LocalReply)
	// NodeLost fails the request in progress when it involves node, and
	// every later one. It never blocks.
	NodeLost(node, why string)
	// Close fails the request in progress and every later one with why
	// (the job is ending). It never blocks.
	Close(why error)
	// Ref is the job's global snapshot reference.
	Ref() snapshot.Ref
	// Release ends the migration checkpoint whose ranks are held (see
	// Request.Ranks): it sends rel to every node and returns; later
	// requests, queued meanwhile, run after it. It fails when no ranks
	// are held.
	Release(rel Release) error
	// Place says where the ranks run now (by rank), after a migration
	// moved some: later requests go to those nodes.
	Place(rankNodes []string)
}

// NodeSpec is what a local coordinator knows of its node.
type NodeSpec struct {
	Node  string
	Ranks []int
	Store sstore.Module
	// Notify, when set, sends a reply ahead of Handle's (LocalProgress);
	// it must not block.
	Notify func(LocalReply)
	// Values are the job's resolved parameters.
	Values *mca.Values
	Log    *slog.Logger
	// Dumper is set when the job's CRS saves ranks from outside.
	Dumper Dumper
}

// Dumper saves a node's ranks from outside them. gompid implements it and
// sets NodeSpec.Dumper when the job's CRS is transparent (a crs.Restorer
// such as criu: a rank is dumped whatever it is doing, with no safe point
// and no C/R code in the program); it is nil otherwise. A local
// coordinator takes a LocalDump with it instead of asking the ranks to
// save themselves.
type Dumper interface {
	// Quiesce asks rank to suspend itself now for request id, saving
	// sequence seq (an AppRequest{ID: id, Kind: Quiesce, Seq: seq}: the
	// rank's library numbers its suspensions by the sequence, which only
	// grows, across restarts too) and returns once the rank said on its
	// lifeline that it is quiet and holds no socket, or with why it
	// cannot be (it refused, ended, or ctx ended). Quiesce is collective
	// among the job's ranks (they drain their channels together): the
	// local coordinator asks all its ranks at once.
	Quiesce(ctx context.Context, rank int, id uint64, seq int) error
	// Dump saves the quiesced rank with the job's CRS into dir, an
	// existing empty directory, and writes the local snapshot's metadata
	// there (snapshot.WriteLocal: every file's size and checksum, the
	// CRS's meta). With opts.Term the rank ends once dumped; with
	// opts.Stop it stays stopped until continued.
	Dump(ctx context.Context, rank int, dir string, opts crs.Options) error
	// Resume gives a quiesced rank the word to go on (request id): after
	// its dump, or when the request is given up before. A rank that is
	// still suspending is withdrawn with an AppRequest Cancel instead.
	Resume(rank int, id uint64) error
	// End ends a rank a checkpoint-and-terminate dump (request id) held
	// quiesced, once its sequence is committed, or a migration's moving
	// rank at the migration's release (it runs again elsewhere, restored
	// from its dump): it is saved, so its end is no fault.
	End(rank int, id uint64) error
}

// AppPort is how a local coordinator reaches the application coordinators
// of its node's ranks; gompid implements it.
type AppPort interface {
	// Send queues req for rank's application coordinator, in order. It
	// returns an error wrapping ErrNoApp when the rank has none connected.
	Send(rank int, req AppRequest) error
}

// Local is a node's local coordinator.
type Local interface {
	// Handle runs one request of the global coordinator on this node and
	// returns the node's reply. Cancel and Done return at once; the others
	// wait for the node's ranks (a Cancel of the same request ends the
	// wait).
	Handle(ctx context.Context, req LocalRequest) LocalReply
	// AppReply hands over a rank's answer. It never blocks.
	AppReply(rank int, r AppReply)
	// AppGone says rank's application coordinator is gone (the rank
	// finalized or ended); requests waiting for it fail with why.
	AppGone(rank int, why string)
	// SetRanks says which ranks the node runs now (a migration moved
	// some in or out); later requests are for those.
	SetRanks(ranks []int)
}

// LocalKind is what the global coordinator asks of a node.
type LocalKind int

const (
	LocalQuery   LocalKind = iota + 1 // count and checkpointability of each rank
	LocalTarget                       // save at Target into Ref's sequence Seq
	LocalSync                         // make the local snapshots of Seq stable
	LocalCancel                       // withdraw request ID
	LocalDone                         // request ID is over (committed)
	LocalRelease                      // a held migration: Leave end, the others resume (Peers)
	// LocalDump saves every rank of the node now, from outside, into
	// Ref's sequence Seq (a transparent CRS: NodeSpec.Dumper): each is
	// quiesced wherever it is, dumped, and resumed (or ended, Term).
	LocalDump
	// LocalProgress is a reply only: how far a node's sync has got, sent
	// (through NodeSpec.Notify) while the sync runs.
	LocalProgress
)

var localKindNames = map[LocalKind]string{LocalQuery: "query", LocalTarget: "target", LocalSync: "sync", LocalCancel: "cancel", LocalDone: "done", LocalProgress: "progress", LocalRelease: "release", LocalDump: "dump"}

func (k LocalKind) String() string {
	if n, ok := localKindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("LocalKind(%d)", int(k))
}

// LocalRequest is one request of the global coordinator to a node.
type LocalRequest struct {
	ID      uint64       `json:"id"`
	Kind    LocalKind    `json:"kind"`
	Seq     int          `json:"seq"`
	Ref     snapshot.Ref `json:"ref"`
	Target  uint64       `json:"target,omitempty"`
	Options crs.Options  `json:"options"`
	// Ranks: a migration's Target or Sync, the ranks saved (the node's
	// others are held unsaved).
	Ranks []int `json:"ranks,omitempty"`
	// Leave and Peers: a LocalRelease (see Release).
	Leave []int                     `json:"leave,omitempty"`
	Peers map[int]map[string]string `json:"peers,omitempty"`
}

// LocalReply is a node's answer to a request.
type LocalReply struct {
	ID    uint64      `json:"id"`
	Kind  LocalKind   `json:"kind"`
	Node  string      `json:"node"`
	Ranks []RankReply `json:"ranks,omitempty"`
	// Err is a failure of the node itself (its storage, its daemon).
	Err string `json:"err,omitempty"`
	// Progress is set on LocalProgress replies.
	Progress *sstore.Progress `json:"progress,omitempty"`
}

// RankReply is one rank's part of a node's reply.
type RankReply struct {
	Rank int `json:"rank"`
	// Query
	Count          uint64 `json:"count,omitempty"`
	Checkpointable bool   `json:"checkpointable,omitempty"`
	Reason         string `json:"reason,omitempty"`
	// Target, Sync: the local snapshot's directory and CRS, or why not.
	Dir string `json:"dir,omitempty"`
	CRS string `json:"crs,omitempty"`
	Err string `json:"err,omitempty"`
}

// Phase is a step of a global checkpoint as gompi-checkpoint --status
// shows it; an Event is reported when a phase ends.
type Phase string

const (
	PhaseRequested  Phase = "requested"   // the global coordinator took the request
	PhaseQuery      Phase = "query"       // every rank answered and can be saved
	PhaseTarget     Phase = "target"      // sequence recorded, ranks asked to save
	PhaseLocalWrite Phase = "local_write" // one node's local snapshots are written
	PhaseDrain      Phase = "drain"       // progress of one node's move to global storage (not a phase's end)
	PhaseSync       Phase = "sync"        // every local snapshot is stable
	PhaseCommit     Phase = "commit"      // the sequence is committed
	PhaseFailed     Phase = "failed"      // the request failed; nothing was committed
)

var phaseTitles = map[Phase]string{
	PhaseRequested: "Requested", PhaseQuery: "Query", PhaseTarget: "Target", PhaseLocalWrite: "Local Write", PhaseDrain: "Drain",
	PhaseSync: "Sync", PhaseCommit: "Commit", PhaseFailed: "Error",
}

// Title is the phase as a status line shows it.
func (p Phase) Title() string {
	if t, ok := phaseTitles[p]; ok {
		return t
	}
	return string(p)
}

// Event is the end of one phase of a checkpoint.
type Event struct {
	Phase Phase `json:"phase"`
	// Node is set for PhaseLocalWrite.
	Node string `json:"node,omitempty"`
	// Seq is the sequence number, -1 before it is chosen.
	Seq    int       `json:"seq"`
	Detail string    `json:"detail,omitempty"`
	Time   time.Time `json:"time"`
	// Progress is set for PhaseDrain.
	Progress *sstore.Progress `json:"progress,omitempty"`
}

var (
	// ErrRefused: a rank cannot be checkpointed (its reason follows);
	// nothing was written and no rank was affected.
	ErrRefused = errors.New("checkpoint refused")
	// ErrFailed: the checkpoint started but was not committed; its
	// sequence stays uncommitted and earlier ones are intact.
	ErrFailed = errors.New("checkpoint failed")
	// ErrNoApp: a rank has no application coordinator connected.
	ErrNoApp = errors.New("no application coordinator")
)
