package mpi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gompi/frameworks"
	"gompi/mca"
	"gompi/rte/rankclient"
)

// Bootstrap is what the runtime gives a rank to start: who it is, the
// job's parameters, and a way to exchange addresses with the other ranks.
// gompid's rank-side runtime implements it; so do the singleton start and
// the test harness (package mpitest).
type Bootstrap interface {
	Rank() int
	Size() int
	// Job is the job id, the same for every rank.
	Job() string
	// Node names this rank's node; ranks with equal names share a host
	// (same-node transports such as uds depend on it).
	Node() string
	// Frameworks holds the process's framework registries with the
	// built-in components registered; Values were resolved against its
	// parameters. mpi selects its transports from Frameworks().BTL.
	Frameworks() *frameworks.Set
	Values() *mca.Values
	// Modex publishes this rank's key/value pairs and returns every
	// rank's, indexed by rank, once all ranks published. It is
	// collective over the job: every rank calls it exactly once. A rank
	// the runtime declared failed before it published has a nil map (the
	// job runs on without it).
	Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error)
	// Abort ends the whole job with code, reporting msg.
	Abort(code int, msg string)
	// Secret is the job's data-plane secret: the same bytes for every
	// rank running together and known to no one else (at least 16
	// bytes). Ranks prove to each other that they know it before a
	// connection carries a message (hello.go); the job id alone, which
	// anyone can see, does not let a process connect as a rank. Under
	// gompirun it is new for each launch generation (the first launch,
	// each recovery that relaunches the ranks), so no rank of an ended
	// generation can connect to the ranks of the next.
	Secret() []byte
}

// FailureNotifier is implemented by a Bootstrap whose runtime reports
// failed ranks unasked (gompirun's rank client, when the job runs on
// after a failure with errmgr sustain). Init registers the Proc's
// MarkFailed with it, so a rank learns of a failure even when none of its
// operations waits on the failed rank; fn is called once per rank. The
// application hears of those failures, with the broken connections,
// through Proc.NotifyFailures (events.go).
type FailureNotifier interface {
	OnFailed(fn func(rank int, why string))
}

// Restorer is implemented by a Bootstrap that restarts a rank from a
// checkpoint: RestoreState returns the bytes SaveState produced (nil when
// this start is not a restart).
type Restorer interface {
	RestoreState() ([]byte, error)
}

var (
	defMu       sync.Mutex
	defaultProc *Proc
)

// Init starts the default Proc of an application. Started by gompirun, it
// bootstraps through the job's daemon (rte/rankclient); started alone, the
// program runs as a singleton (rank 0 of 1) that reads its parameters like
// any gompi process, so `go run` works. ctx bounds start-up and, when it
// ends, stops the Proc.
func Init(ctx context.Context) error {
	defMu.Lock()
	defer defMu.Unlock()
	if defaultProc != nil {
		return fmt.Errorf("mpi: init: already initialized")
	}
	var b Bootstrap
	var err error
	switch {
	case rankclient.InJob():
		if b, err = rankclient.Init(ctx); err != nil {
			return fmt.Errorf("mpi: init: %w", err)
		}
	default:
		if b, err = rankclient.Singleton(ctx, mca.SourceOptions{}); err != nil {
			return fmt.Errorf("mpi: init: %w", err)
		}
	}
	p, err := InitWith(ctx, b)
	if err != nil {
		return err
	}
	if n, ok := b.(FailureNotifier); ok {
		n.OnFailed(func(rank int, why string) { p.MarkFailed(rank, errors.New(why)) })
	}
	defaultProc = p
	return nil
}

// Default returns the Proc started by Init, or nil.
func Default() *Proc {
	defMu.Lock()
	defer defMu.Unlock()
	return defaultProc
}

func mustDefault() *Proc {
	p := Default()
	if p == nil {
		panic("mpi: Init has not been called")
	}
	return p
}

// Finalize ends the default Proc.
func Finalize() error {
	p := Default()
	if p == nil {
		return errors.New("mpi: finalize: Init has not been called")
	}
	return p.Finalize()
}

// World returns MPI_COMM_WORLD of the default Proc; it panics before Init.
func World() *Comm { return mustDefault().World() }

// Rank returns the world rank of the default Proc; it panics before Init.
func Rank() int { return mustDefault().Rank() }

// Size returns the world size of the default Proc; it panics before Init.
func Size() int { return mustDefault().Size() }

// Abort asks the runtime to end the job; it panics before Init.
func Abort(code int, msg string) { mustDefault().Abort(code, msg) }

// singleton is the Bootstrap of a program started without a launcher.
// The runtime's rank client is the Bootstrap of every rank gompirun starts
// and of a lone program (a singleton reads parameters like any process).
var (
	_ Bootstrap       = (*rankclient.Client)(nil)
	_ FailureNotifier = (*rankclient.Client)(nil)
	_ Rejoiner        = (*rankclient.Client)(nil)
	_ Pauser          = (*rankclient.Client)(nil)
	_ RollbackEpocher = (*rankclient.Client)(nil)
)
