// Package crcpflag is MVAPICH2-CR's way to quiesce channels (Gao et al.,
// "Application-transparent checkpoint/restart for MPI programs over
// InfiniBand", 2006), for transparent checkpoints: at a checkpoint every
// rank writes a flag down every connection behind its last message and
// reads each peer's connection up to that peer's flag; channels are FIFO,
// so everything the peer sent before its flag has then arrived, and no
// counts are exchanged. Then the connections are torn down. The mpi
// library runs it itself when the job's CRS dumps ranks from outside
// (crs criu: mpi.Proc.Suspend, which asks TransparentQuiesce); the
// module's message hooks count nothing.
//
// A checkpoint at a safe point (crs self: cr.Checkpoint, migration) goes
// through FTEvent, which refuses it (ErrTransparentOnly): that path keeps
// its connections open across the checkpoint and drains by bookmarks, so
// such jobs select crcp bkmrk (the default).
package crcpflag

import (
	"context"
	"errors"
	"fmt"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// Name of the component.
const Name = "flag"

// Priority is the component's default priority: below bkmrk's, so bkmrk
// stays the default and flag runs only when named (--mca crcp flag).
const Priority = 10

// ErrTransparentOnly is wrapped by FTEvent(StateCheckpoint).
var ErrTransparentOnly = errors.New("crcp flag quiesces channels only for transparent checkpoints (crs criu, where the library suspends the rank and tears its connections down); a checkpoint at a safe point (crs self, cr.Checkpoint, migration) needs crcp bkmrk")

// New returns the flag CRCP component.
func New() mca.Component[crcp.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crcp.Name, Name: Name,
		Description: "Flags down every connection, read up to each peer's flag, then teardown (MVAPICH2-CR); no counts. Use with crs criu (--mca crs criu --mca crcp flag) for transparent checkpoints; checkpoints at safe points (crs self) need bkmrk",
		Version:     "1.0.0",
		Priority:    Priority,
	}, query)
}

// query answers in ranks of a job with checkpoint/restart on, as bkmrk.
func query(_ context.Context, q mca.Query) (crcp.Module, int, error) {
	if err := q.SkipUnlessRankCR(crcp.Name, Name, "the protocol runs in ranks"); err != nil {
		return nil, 0, err
	}
	return module{}, q.Priority, nil
}

// module is the protocol of one rank: it keeps no state (the library's
// connections carry the flags), so one value serves every rank.
type module struct{}

func (module) Sent(crcp.Envelope)     {}
func (module) Received(crcp.Envelope) {}

// TransparentQuiesce tells the library to quiesce by flags.
func (module) TransparentQuiesce() crcp.Quiesce { return crcp.QuiesceFlags }

// FTEvent refuses a checkpoint: only the library's transparent quiesce
// can run this protocol. Every other state has nothing to resume.
func (module) FTEvent(_ context.Context, state crs.State, _ crcp.Channels) error {
	if state == crs.StateCheckpoint {
		return fmt.Errorf("crcp/flag: checkpoint at a safe point: %w", ErrTransparentOnly)
	}
	return nil
}

var (
	_ crcp.Module      = module{}
	_ crcp.Transparent = module{}
)
