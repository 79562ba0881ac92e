package crs

import (
	"context"
	"log/slog"
	"syscall"
)

// Host is what a CRS module is provisioned with (mca.Provisioner[Host]) in
// the process that runs it. A CRS runs in one of two places, and exactly
// one of Rank and Daemon is set, by that process:
//
//   - inside the rank it saves (self): package cr provisions the rank's
//     selected module once the program asks for checkpoints, with the
//     rank's registered state (Rank);
//   - in gompid, or in a plugin child of gompid, saving and restoring the
//     node's ranks from outside (a transparent CRS such as criu, dumping
//     and restoring through CRIU's RPC): gompid provisions it with the
//     node it serves (Daemon), and restores ranks through Restorer.Restore,
//     handing each restored rank its descriptors in the call.
//
// A module that cannot work where it is provisioned returns an error
// wrapping ErrNotCheckpointable (self in gompid, criu in a rank), so the
// host can say why its ranks cannot be saved. Close (io.Closer) ends the
// provisioning: self drops the rank's state source, a transparent CRS its
// connection to the checkpointing service.
//
// Across the plugin bridge the host is all that crosses besides the
// module's calls: Rank.Save is called back over the bridge. A Restore's
// descriptors travel as descriptors (SCM_RIGHTS on the plugin's
// descriptor socket), and a process a plugin's CRS restored stays the
// plugin's: the plugin waits on it, and the daemon's Process.Wait is a
// call to the plugin. Whoever runs the CRS must be able to wait on what it
// restores: criu restores the process tree as a child of the process that
// runs it (CRIU's restore-sibling mode).
type Host struct {
	Rank   *RankHost
	Daemon *DaemonHost
	Log    *slog.Logger
}

// RankHost is a rank's side of a CRS that runs inside it.
type RankHost struct {
	// Save writes the rank's registered state (package cr: values given to
	// cr.Protect, files of cr.OnCheckpoint callbacks) into dir and returns
	// the names of the files written, relative to dir, in a stable order.
	Save func(ctx context.Context, dir string) ([]string, error)
}

// DaemonHost is gompid's side of a CRS that saves and restores the node's
// ranks from outside them.
type DaemonHost struct {
	// Node is the node the daemon serves.
	Node string
}

// Process is a rank a CRS restored, for the daemon to wait on.
type Process interface {
	// PID is the restored process's id in the daemon's PID namespace.
	PID() int
	// Wait returns once the process has ended, with how it ended, or
	// with ctx's error.
	Wait(ctx context.Context) (Exit, error)
}

// Exit is how a process ended: its exit status, or the signal that
// killed it (Signal non-zero).
type Exit struct {
	Code   int
	Signal syscall.Signal
}
