package sstore

import (
	"context"
	"log/slog"
	"time"

	"gompi/frameworks/filem"
)

// Progress is how far one node's Sync has got moving its local snapshots
// to global storage. A Module whose Sync moves bytes (stage) reports it;
// one that only checks files (central) need not.
type Progress struct {
	Node      string        `json:"node,omitempty"`
	Files     int           `json:"files"`      // files to establish on global storage
	FilesDone int           `json:"files_done"` // files established so far
	Bytes     int64         `json:"bytes"`      // their bytes, as the ranks wrote them
	BytesDone int64         `json:"bytes_done"` // bytes of the files read and moved so far
	Stored    int64         `json:"stored"`     // bytes written to global storage (compressed)
	Elapsed   time.Duration `json:"elapsed"`
}

// Rate is the drain's throughput so far, in bytes of snapshot per second.
func (p Progress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.BytesDone) / p.Elapsed.Seconds()
}

// ETA estimates the time left at the rate so far (0 when unknown or done).
func (p Progress) ETA() time.Duration {
	r := p.Rate()
	if r <= 0 || p.BytesDone >= p.Bytes {
		return 0
	}
	return time.Duration(float64(p.Bytes-p.BytesDone) / r * float64(time.Second))
}

// Like net/http/httptrace, the progress callback of a Sync travels in its
// context: it is optional, and the Module interface stays as it is.
type progressKey struct{}

// WithProgress returns a context whose Sync calls report to fn. fn must
// not block; it may be called from several goroutines, never at once.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress calls the progress callback of ctx, if any.
func ReportProgress(ctx context.Context, p Progress) {
	if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok && fn != nil {
		fn(p)
	}
}

// Host is what a Module is provisioned with (mca.Provisioner[Host]) by
// the process that runs it: gompid, once, after selection and before any
// other call (package boot's assembly). stage needs it (the node's name for
// its local folder, FileM for the drain); central and none do not. A Sync's
// progress reporting is not part of it: it travels in the Sync's context
// (WithProgress), since it belongs to one request.
type Host struct {
	// Node is the node the process serves ("" outside a job: a tool).
	Node string
	// FileM moves files to and from global storage (the process's
	// selected FileM module; nil in a process that only writes local
	// snapshots).
	FileM filem.Module
	Log   *slog.Logger
}
