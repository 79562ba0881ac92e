package cr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/frameworks/inc"
	"gompi/frameworks/snapc"
	"gompi/mca"
	"gompi/mpi"
)

// Options change what happens after a checkpoint (crs.Options).
type Options = crs.Options

// Result is a committed global snapshot (snapc.Result).
type Result = snapc.Result

var (
	// ErrTerminated is returned by SafePoint and Checkpoint when a
	// checkpoint with Term was taken and the terminate function given
	// with WithTerminate returned (by default the process exits instead).
	ErrTerminated = errors.New("cr: checkpointed with --term: the job ends here")
	// ErrNotSupported is wrapped by calls this implementation does not
	// offer (Restart from inside a running job).
	ErrNotSupported = errors.New("not supported")
	// ErrNoCoordinator is wrapped when the rank has no link to a job's
	// checkpoint coordinator (not started by gompirun).
	ErrNoCoordinator = errors.New("no checkpoint coordinator: run the program under gompirun -am ft-enable-cr")
)

// Option changes how For attaches a coordinator.
type Option func(*config)

type config struct {
	terminate func() error
	leave     func() error
	log       *slog.Logger
}

// WithTerminate replaces what a rank does once a checkpoint with Term is
// taken (by default: finalize, then exit with status 0). When f returns,
// the SafePoint or Checkpoint that took the checkpoint returns
// ErrTerminated. In-process tests use it.
func WithTerminate(f func() error) Option { return func(c *config) { c.terminate = f } }

// WithLeave replaces what a rank does once a migration moved it: by
// default the process exits (its new process runs elsewhere); with f,
// SafePoint returns ErrMigrated after f. In-process tests use it.
func WithLeave(f func() error) Option { return func(c *config) { c.leave = f } }

// WithLogger sets the logger; records add the rank. By default package cr
// logs through its Proc's logger (mpi.Proc.Logger), in the job's format.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

var (
	regMu    sync.Mutex
	registry = map[*mpi.Proc]*Coordinator{}
)

// For returns the app coordinator of p, attaching it on first use: it
// selects the INC stack and the CRS from p's frameworks, restores what a
// restart saved, and takes over the checkpoint requests of p's runtime
// link. Options apply only when it attaches.
func For(p *mpi.Proc, opts ...Option) (*Coordinator, error) {
	if p == nil {
		return nil, errors.New("cr: nil mpi.Proc")
	}
	regMu.Lock()
	defer regMu.Unlock()
	if c := registry[p]; c != nil {
		return c, nil
	}
	if p.Finalizing() {
		return nil, fmt.Errorf("cr: rank %d: %w: finalized", p.Rank(), mpi.ErrStopped)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	c, err := attach(p, cfg)
	if err != nil {
		return nil, err
	}
	registry[p] = c
	return c, nil
}

// Default returns the coordinator of the Proc mpi.Init started.
func Default() (*Coordinator, error) {
	p := mpi.Default()
	if p == nil {
		return nil, errors.New("cr: mpi.Init has not been called")
	}
	return For(p)
}

// Coordinator is the app coordinator of one rank: it counts safe points,
// answers the job's coordinator, and saves and restores the rank.
type Coordinator struct {
	p       *mpi.Proc
	link    snapc.AppLink // nil: no job coordinator
	cfg     config
	log     *slog.Logger
	stack   inc.Module
	crs     crs.Module
	crsName string
	// provisioned: crs holds this coordinator's state source (undo closes it).
	provisioned bool
	// reason is why this rank cannot be checkpointed ("" when it can).
	reason string
	reg    stateRegistry

	mu         sync.Mutex
	count      uint64 // safe points reached
	atPoint    bool   // the program is inside safe point count
	hold       bool   // a query was answered: hold at the next safe point
	holdID     uint64
	pending    *target // targeted, not reached yet
	active     *target // being taken
	attempted  uint64  // the last safe point a checkpoint ran at
	drainedAt  uint64  // the last safe point the channels were drained at
	finalizing bool
	quiesceAt  uint64 // QuiesceStart's point while it serves it: a target there waits for the quiesce
	quiesce    *quiesceState
	restart    *restartState
	ch         crcp.Channels         // of the checkpoint running
	release    chan snapc.AppRequest // a migration's hold waits for its release
	releaseID  uint64
	wake       chan struct{} // closed (and replaced) when something changes
	requested  chan struct{} // closed while the program is wanted at a safe point
	reqClosed  bool
	rolling    *snapc.AppRequest // the runtime's Rollback, until Run restores the rank
}

type target struct {
	req       snapc.AppRequest
	queryID   uint64
	resave    bool // saved at this point already: save again as is
	cancelled bool
	cancel    context.CancelFunc
}

type quiesceState struct {
	epoch        uint64
	ch           crcp.Channels
	sent, recvd  []uint64
	restartShown bool
}

type restartState struct {
	info     snapc.RestartInfo
	at       uint64
	file     *appFile // the saved values, each dropped once Protect hands it over
	names    []string
	restored map[string]bool
	resumed  bool
	// sources are the old ranks' values of a restart on another rank
	// count (repartition.go); nil otherwise.
	sources []*appSource
}

func attach(p *mpi.Proc, cfg config) (*Coordinator, error) {
	if cfg.log == nil {
		cfg.log = p.Logger()
	} else {
		cfg.log = cfg.log.With("rank", p.Rank())
	}
	c := &Coordinator{
		p: p, link: p.AppLink(), cfg: cfg, log: cfg.log,
		wake: make(chan struct{}), requested: make(chan struct{}),
	}
	if c.cfg.terminate == nil {
		c.cfg.terminate = func() error {
			if err := p.Finalize(); err != nil {
				c.log.Warn("finalize after a checkpoint with --term", "err", err)
			}
			os.Exit(0)
			return nil
		}
	}
	if c.cfg.leave == nil {
		// No Finalize: the job goes on without this process, and its
		// peers expect its connections to close.
		c.cfg.leave = func() error {
			os.Exit(0)
			return nil
		}
	}
	// The rank's modules were selected when it started (boot.AssembleApp);
	// the CRS is the job's, chosen once by gompirun.
	mods := p.Modules()
	if mods == nil {
		return nil, fmt.Errorf("cr: rank %d: the rank has no modules (not started by mpi.InitWith)", p.Rank())
	}
	if mods.INCErr != nil {
		return nil, fmt.Errorf("cr: rank %d: select the INC stack: %w", p.Rank(), mods.INCErr)
	}
	c.stack = mods.INC.Module
	ctx := context.Background()
	switch cc := mods.CRS; {
	case mods.CRSErr != nil:
		c.reason = fmt.Sprintf("rank %d: no CRS can save it (%v); run with -am ft-enable-cr (crs=self)", p.Rank(), mods.CRSErr)
	default:
		c.crs, c.crsName = cc.Module, cc.Info.Name
		host := crs.Host{Rank: &crs.RankHost{Save: c.saveFiles}, Log: c.log}
		ok, err := mca.Provision(ctx, cc.Module, host)
		switch {
		case !ok || errors.Is(err, crs.ErrNotCheckpointable):
			c.reason = fmt.Sprintf("rank %d: crs=%s cannot save a rank at its safe points; run with -am ft-enable-cr (crs=self)", p.Rank(), cc.Info.Name)
		case err != nil:
			return nil, fmt.Errorf("cr: rank %d: %w", p.Rank(), err)
		default:
			c.provisioned = true
		}
	}
	if c.reason == "" && p.CRCP() == nil && p.Size() > 1 {
		c.reason = fmt.Sprintf("rank %d: crcp=none: the channels between ranks cannot be made consistent; run with -am ft-enable-cr (crcp=bkmrk)", p.Rank())
	}
	if c.link != nil {
		if info, ok := c.link.Restart(); ok {
			if err := c.loadRestart(info); err != nil {
				c.undo()
				return nil, err
			}
		}
	}
	c.stack.RegisterLayer(inc.LayerMPI, "mpi", c.mpiLayer)
	p.OnFinalize(c.onFinalize)
	if c.link != nil {
		if err := p.HandleApp(c.handle); err != nil {
			c.undo()
			return nil, fmt.Errorf("cr: rank %d: %w", p.Rank(), err)
		}
	}
	return c, nil
}

// undo ends the CRS's provisioning with this rank's state.
func (c *Coordinator) undo() {
	if c.provisioned {
		if err := mca.Close(c.crs); err != nil {
			c.log.Warn("close the CRS", "crs", c.crsName, "err", err)
		}
	}
}

// mpiLayer is the mpi layer of the INC stack: the coordination protocol.
func (c *Coordinator) mpiLayer(ctx context.Context, state crs.State) error {
	m := c.p.CRCP()
	if m == nil {
		if state == crs.StateCheckpoint && c.p.Size() > 1 {
			return errors.New("mpi: no coordination protocol (crcp=none): the channels cannot be made consistent; run with -am ft-enable-cr")
		}
		return nil
	}
	c.mu.Lock()
	ch := c.ch
	c.mu.Unlock()
	if ch == nil {
		ch = c.p.ChannelsAt(checkpointEpoch(c.SafePoints()))
	}
	return m.FTEvent(ctx, state, ch)
}

// Exchanges of a checkpoint and of a quiesce at the same safe point never
// share tags.
func checkpointEpoch(n uint64) uint64 { return 2 * n }
func quiesceEpoch(n uint64) uint64    { return 2*n + 1 }

// Proc returns the rank the coordinator serves.
func (c *Coordinator) Proc() *mpi.Proc { return c.p }

// SafePoints returns the number of safe points the rank has reached.
func (c *Coordinator) SafePoints() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// IsRestart reports whether this rank was restarted from a snapshot.
func (c *Coordinator) IsRestart() bool { return c.restart != nil }

// RestartInfo says what the rank was restarted from.
func (c *Coordinator) RestartInfo() (snapc.RestartInfo, bool) {
	if c.restart == nil {
		return snapc.RestartInfo{}, false
	}
	return c.restart.info, true
}

// Requested returns a channel that is closed while the job's coordinator
// wants the rank at a safe point (a query awaits its target, a target is
// pending, or a restart has not reached its safe point yet). A program
// that idles calls SafePoint when it fires, so it can be saved without
// polling.
func (c *Coordinator) Requested() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requested
}

// RegisterINC adds an application callback to the INC stack: called with
// PRE_CRS_PRE_MPI and PRE_CRS_POST_MPI before a checkpoint, and with
// POST_CRS_PRE_MPI and POST_CRS_POST_MPI after it (CONTINUE, ERROR) or
// at the restart point (RESTART). The returned func removes it.
func (c *Coordinator) RegisterINC(name string, cb inc.AppCallback) (remove func(), err error) {
	if cb == nil {
		return nil, fmt.Errorf("cr: register INC callback %q: nil callback", name)
	}
	return c.stack.RegisterApp(name, cb), nil
}

// Restart would restart the job from a snapshot from inside the running
// job; it is not supported: stop the job and run gompi-restart.
func (c *Coordinator) Restart(ref string, seq int) error {
	return fmt.Errorf("cr: restart from %s sequence %d inside a running job: %w; end the job and run gompi-restart", ref, seq, ErrNotSupported)
}

// --- package-level API on the default Proc ------------------------------------

// SafePoint marks a point where the rank may be saved; see Coordinator.SafePoint.
func SafePoint() error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.SafePoint()
}

// Checkpoint takes a checkpoint of the whole job; see Coordinator.Checkpoint.
func Checkpoint(ctx context.Context, opts Options) (Result, error) {
	c, err := Default()
	if err != nil {
		return Result{}, err
	}
	return c.Checkpoint(ctx, opts)
}

// Restart is not supported from inside a running job; see Coordinator.Restart.
func Restart(ref string, seq int) error {
	return fmt.Errorf("cr: restart from %s sequence %d inside a running job: %w; end the job and run gompi-restart", ref, seq, ErrNotSupported)
}

// QuiesceStart quiesces the job; see Coordinator.QuiesceStart.
func QuiesceStart(ctx context.Context) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.QuiesceStart(ctx)
}

// QuiesceEnd ends a quiesce; see Coordinator.QuiesceEnd.
func QuiesceEnd(ctx context.Context) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.QuiesceEnd(ctx)
}

// QuiesceCheckpoint checkpoints a quiesced job; see Coordinator.QuiesceCheckpoint.
func QuiesceCheckpoint(ctx context.Context, opts Options) (Result, error) {
	c, err := Default()
	if err != nil {
		return Result{}, err
	}
	return c.QuiesceCheckpoint(ctx, opts)
}

// RegisterINC adds an application callback to the INC stack; see Coordinator.RegisterINC.
func RegisterINC(name string, cb inc.AppCallback) (remove func(), err error) {
	c, err := Default()
	if err != nil {
		return nil, err
	}
	return c.RegisterINC(name, cb)
}

// Protect registers a value to be saved; see Coordinator.Protect.
func Protect(name string, ptr any) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.Protect(name, ptr)
}

// OnCheckpoint registers a checkpoint callback; see Coordinator.OnCheckpoint.
func OnCheckpoint(f func(dir string) error) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.OnCheckpoint(f)
}

// OnContinue registers a continue callback; see Coordinator.OnContinue.
func OnContinue(f func() error) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.OnContinue(f)
}

// OnRestart registers a restart callback; see Coordinator.OnRestart.
func OnRestart(f func(dir string) error) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.OnRestart(f)
}

// IsRestart reports whether the default Proc was restarted from a snapshot.
func IsRestart() bool {
	c, err := Default()
	return err == nil && c.IsRestart()
}

// Requested returns the default coordinator's Requested channel (nil,
// never ready, before mpi.Init).
func Requested() <-chan struct{} {
	c, err := Default()
	if err != nil {
		return nil
	}
	return c.Requested()
}
