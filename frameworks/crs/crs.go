// Package crs is the Checkpoint/Restart Service framework: capturing and
// restoring one process. A CRS component writes a process's state into a
// directory it is given and, on restart, says how to bring the process back
// from that directory. It never moves snapshot bytes anywhere else: storage
// is SStore's job and transport FileM's.
//
// Components: self (application callbacks and registered state, saved by
// the rank itself at a safe point; -am ft-enable-cr selects it), none
// (the process cannot be checkpointed; C/R off) and criu (transparent: the
// node's daemon dumps and restores the rank's whole process tree with
// CRIU; it lives in the plugin binary gompi-plugin-criu, so no rank links
// it). Open MPI's opal/mca/crs is the model, criu standing where its blcr
// stood; its "none" silently saved nothing, ours refuses with
// ErrNotCheckpointable. A self snapshot restarts by running the program
// again (gompid relaunches the Launch Restart returns and package cr
// restores it).
//
// Restart comes in two forms, and a daemon bringing a rank back asks for
// the second when the module has it:
//
//   - Module.Restart returns a Launch: the daemon starts the process
//     itself, as it starts a fresh rank (self: the program, run again,
//     restores itself).
//   - Restorer.Restore (an optional interface, checked with a type
//     assertion on the selected module) brings the process back itself
//     and returns it running, as a Process the daemon waits on
//     (criu: CRIU restores the image). The daemon hands in the write ends
//     of the pipes it reads the rank's output from and the descriptors
//     the rank inherits from 3 on, as it would give them to a fresh rank;
//     the restored process finds them where the original had them. Such
//     a module's Restart refuses (it has no Launch to give) unless the
//     directory holds none of its snapshots (ErrNoSnapshot).
package crs

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Name of the framework, and of its selection parameter.
const Name = "crs"

// State is where a process stands in a checkpoint (Open MPI's
// opal_crs_state_type_t).
type State int

const (
	StateNone       State = iota
	StateCheckpoint       // about to be saved
	StateRestartPre       // restarted, before the library is back
	StateRestart          // restarted, library back
	StateContinue         // saved, carrying on
	StateTerm             // saved, about to exit (checkpoint-and-terminate)
	StateRunning
	StateError
)

var stateNames = [...]string{"none", "checkpoint", "restart-pre", "restart", "continue", "term", "running", "error"}

func (s State) String() string {
	if int(s) >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Options change what happens after a checkpoint.
type Options struct {
	Term bool `json:"term,omitempty"` // exit once saved
	Stop bool `json:"stop,omitempty"` // stop (SIGSTOP) once saved
}

// Launch is how a process is started: what a daemon executes. It is also
// how a job's ranks were started, as a reference's global metadata records
// it for gompi-restart (package snapshot: Argv[0] the program, Env the -x
// exports, Dir the working directory).
type Launch struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
}

// CheckpointRequest asks a CRS to save one process.
type CheckpointRequest struct {
	// PID is the process to save; in-process components (self) are given
	// their own PID.
	PID int `json:"pid"`
	// Dir is an existing, empty directory for the snapshot's files.
	Dir     string  `json:"dir"`
	Options Options `json:"options"`
}

// CheckpointResult is what a CRS wrote.
type CheckpointResult struct {
	// State is StateContinue (saved, running on), StateTerm, or StateRestart
	// when a transparent CRS returns inside a restarted image.
	State State `json:"state"`
	// Files are the files written, relative to Dir, in a stable order.
	Files []string `json:"files"`
	// Meta is component data stored in the local snapshot metadata and
	// handed back to Restart.
	Meta map[string]string `json:"meta,omitempty"`
}

// RestartRequest asks a CRS how to bring back a saved process.
type RestartRequest struct {
	Dir  string            `json:"dir"`
	Meta map[string]string `json:"meta,omitempty"`
	// Launch is how the process was started originally (program, arguments,
	// environment); a CRS adapts it rather than inventing one.
	Launch Launch `json:"launch"`
}

// Module is a selected CRS.
type Module interface {
	// Checkpoint saves the process into req.Dir. It returns an error
	// wrapping ErrNotCheckpointable when this component cannot save it, and
	// ErrNoProcess when the PID does not exist.
	Checkpoint(ctx context.Context, req CheckpointRequest) (CheckpointResult, error)
	// Restart returns how to launch the process so that it resumes from the
	// snapshot in req.Dir; ErrNoSnapshot when the directory holds none of
	// this component's.
	Restart(ctx context.Context, req RestartRequest) (Launch, error)
}

// RestoreRequest asks a Restorer to bring a saved process back. The
// files are the caller's: Restore hands the process its own copies and
// closes none of them.
type RestoreRequest struct {
	// Rank is the job rank the process is, for messages and logs.
	Rank int
	// Dir, Meta and Launch are as in RestartRequest: the snapshot's
	// directory, the Meta its Checkpoint returned, the original launch.
	Dir    string
	Meta   map[string]string
	Launch Launch
	// Stdin is the read end of the rank's standard input, nil for none;
	// Stdout and Stderr are the write ends of the pipes the daemon reads
	// the rank's output from. They take the place of what the original
	// had as descriptors 0, 1 and 2; a Restorer may refuse a nil one where
	// the original had a pipe (criu does: the restored process would
	// write into a pipe nobody reads).
	Stdin, Stdout, Stderr *os.File
	// Files take the place of the original's descriptors from 3 on, in
	// order (as exec.Cmd.ExtraFiles): the rank's lifeline pipe and
	// whatever else the daemon gave the original.
	Files []*os.File
}

// Restorer is a Module that restores a process itself rather than
// returning a Launch for the daemon to start (a transparent CRS: the
// process's image is brought back, not its program run again).
type Restorer interface {
	// Restore brings back the process saved in req.Dir and returns it
	// running. The Process is the caller's to wait on: Wait reports its
	// exit status or the signal that ended it, as for a child the
	// caller started. ErrNoSnapshot when the directory holds none of
	// this component's snapshots.
	Restore(ctx context.Context, req RestoreRequest) (Process, error)
}

var (
	// ErrNotCheckpointable: this component cannot save this process.
	ErrNotCheckpointable = errors.New("process cannot be checkpointed")
	// ErrNoProcess: the PID does not name a live process.
	ErrNoProcess = errors.New("no such process")
	// ErrNoSnapshot: the directory holds no snapshot this component made.
	ErrNoSnapshot = errors.New("no snapshot")
)
