package mpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"gompi/components/btl/tcp"
	"gompi/components/btl/uds"
	"gompi/frameworks"
	"gompi/mca"
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
	// collective over the job: every rank calls it exactly once.
	Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error)
	// Abort ends the whole job with code, reporting msg.
	Abort(code int, msg string)
}

// Restorer is implemented by a Bootstrap that restarts a rank from a
// checkpoint: RestoreState returns the bytes SaveState produced (nil when
// this start is not a restart).
type Restorer interface {
	RestoreState() ([]byte, error)
}

// Bootstrapper makes the Bootstrap of this process. The runtime package
// linked into ranks registers one with SetBootstrapper.
type Bootstrapper func(ctx context.Context) (Bootstrap, error)

var (
	defMu        sync.Mutex
	bootstrapper Bootstrapper
	defaultProc  *Proc
)

// SetBootstrapper registers how Init finds the runtime. The runtime
// package calls it (from its own Init function, or explicitly in a
// program's main) before the application calls Init.
func SetBootstrapper(b Bootstrapper) {
	defMu.Lock()
	defer defMu.Unlock()
	bootstrapper = b
}

// EnvRank is the environment variable the launcher sets for every rank; a
// process without it and without a registered runtime is a singleton.
const EnvRank = "GOMPI_RANK"

// Init starts the default Proc of an application. With a registered
// runtime it bootstraps through it; without one, and with GOMPI_RANK unset,
// the program runs as a singleton (rank 0 of 1), so `go run` works. ctx
// bounds start-up and, when it ends, stops the Proc.
func Init(ctx context.Context) error {
	defMu.Lock()
	defer defMu.Unlock()
	if defaultProc != nil {
		return fmt.Errorf("mpi: init: already initialized")
	}
	var b Bootstrap
	var err error
	switch {
	case bootstrapper != nil:
		if b, err = bootstrapper(ctx); err != nil {
			return fmt.Errorf("mpi: init: runtime: %w", err)
		}
	case os.Getenv(EnvRank) != "":
		return fmt.Errorf("mpi: init: %s is set (started by gompirun?) but no runtime is linked into this program: import the runtime package that registers one with mpi.SetBootstrapper", EnvRank)
	default:
		if b, err = Singleton(); err != nil {
			return err
		}
	}
	p, err := InitWith(ctx, b)
	if err != nil {
		return err
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
type singleton struct {
	set  *frameworks.Set
	vals *mca.Values
	node string
}

// Singleton returns the Bootstrap of a lone rank (0 of 1): the built-in
// transports are registered, every parameter takes its default (no
// parameter files or environment are read: there is nothing to tune), and
// Abort exits the process.
func Singleton() (Bootstrap, error) {
	params := mca.NewParams()
	set := frameworks.New(params)
	RegisterTransports(set)
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		return nil, fmt.Errorf("mpi: singleton: %w", err)
	}
	node, _ := os.Hostname()
	return &singleton{set: set, vals: vals, node: node}, nil
}

// RegisterTransports adds the built-in BTL components (tcp, uds) to set;
// for harnesses that build their own registries.
func RegisterTransports(set *frameworks.Set) {
	set.BTL.Register(tcp.New())
	set.BTL.Register(uds.New())
}

func (s *singleton) Rank() int                   { return 0 }
func (s *singleton) Size() int                   { return 1 }
func (s *singleton) Job() string                 { return fmt.Sprintf("singleton-%d", os.Getpid()) }
func (s *singleton) Node() string                { return s.node }
func (s *singleton) Frameworks() *frameworks.Set { return s.set }
func (s *singleton) Values() *mca.Values         { return s.vals }
func (s *singleton) Modex(_ context.Context, mine map[string]string) ([]map[string]string, error) {
	return []map[string]string{mine}, nil
}
func (s *singleton) Abort(code int, msg string) {
	fmt.Fprintf(os.Stderr, "mpi: abort (code %d): %s\n", code, msg)
	os.Exit(code)
}

var _ Bootstrap = (*singleton)(nil)
