// Package crcpnone is the CRCP component for C/R off: no coordination
// protocol. The mpi package does not call Sent or Received at all when
// crcp=none is selected (so the message path costs nothing); they are
// no-ops for any other caller. A checkpoint cannot be consistent without a
// protocol, so FTEvent refuses StateCheckpoint with ErrNoProtocol; every
// other state has nothing to resume and succeeds.
package crcpnone

import (
	"context"
	"errors"
	"fmt"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/mca"
)

// Priority is the component's default priority: the lowest of the shipped
// protocols, so any real protocol that is available wins.
const Priority = 1

// ErrNoProtocol is wrapped by FTEvent(StateCheckpoint).
var ErrNoProtocol = errors.New("channel state cannot be made consistent without a coordination protocol; select crcp=bkmrk or run with -am ft-enable-cr")

// New returns the none CRCP component.
func New() mca.Component[crcp.Module] {
	return mca.NewComponent(mca.ComponentInfo{Framework: crcp.Name, Name: "none",
		Description: "No coordination protocol (C/R off): the message path is not wrapped and checkpoints are refused",
		Priority:    Priority,
	}, mca.Module[crcp.Module](module{}))
}

type module struct{}

func (module) Sent(crcp.Envelope)     {}
func (module) Received(crcp.Envelope) {}

func (module) FTEvent(_ context.Context, state crs.State, _ crcp.Channels) error {
	if state == crs.StateCheckpoint {
		return fmt.Errorf("crcp/none: checkpoint: %w", ErrNoProtocol)
	}
	return nil
}

var (
	_ crcp.Module = module{}
)
