// Package mpitest runs whole MPI jobs inside a test: n Procs on their own
// goroutines, bootstrapped through an in-memory runtime (a real modex over
// channels) and talking over real tcp, uds or sm connections on this
// host, or through memory (btl mem, package membtl: no descriptor per
// connection, for jobs of a thousand ranks).
package mpitest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"gompi/components/builtin"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gompi/frameworks"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest/membtl"
)

// Config describes a job.
type Config struct {
	N int
	// Replicas runs the first Replicas ranks twice (a replicated job,
	// mpi's replica.go): the job has N+Replicas processes, process N+i
	// the second copy of rank i. Nodes, States, Register and Wrap are
	// then indexed by process, and fn runs in every process.
	Replicas int
	// BTL is the value of the btl parameter: "tcp", "uds", "tcp,uds",
	// "mem", or "" for every transport (but mem).
	BTL string
	// Net is the memory btl mem connects the ranks through (a test holds
	// frames in it); nil gives the job one of its own when BTL names mem.
	Net *membtl.Network
	// Nodes names each rank's node (default: all on one node). Ranks on
	// different names are treated as different hosts (uds cannot join
	// them) although all run here.
	Nodes []string
	// Settings are further MCA parameters for every rank.
	Settings []mca.Setting
	// States, when set, restores rank i from States[i] (nil: fresh start).
	States [][]byte
	// AllowFailures accepts errors wrapping mpi.ErrProcFailed or
	// mpi.ErrStopped from fn and Finalize: the test kills ranks on purpose.
	AllowFailures bool
	// Register adds components to rank's framework registries after the
	// built-in ones (components under test), before its parameters are
	// resolved.
	Register func(rank int, set *frameworks.Set)
	// Wrap replaces rank's bootstrap, e.g. with one that also links the
	// rank to a checkpoint coordinator (package cr/crtest).
	Wrap func(rank int, b mpi.Bootstrap) mpi.Bootstrap
	// Log is every rank's library logger (mpi.WithLogger; each rank's
	// records carry its rank); nil keeps the library's default.
	Log *slog.Logger
}

var jobs atomic.Int64

// Run runs fn on n ranks over the btl transports and fails t with every
// rank's error. Each rank is finalized after fn returns.
func Run(t testing.TB, n int, btl string, fn func(p *mpi.Proc) error) {
	t.Helper()
	RunWith(t, Config{N: n, BTL: btl}, fn)
}

// RunWith runs fn on every rank of the job cfg describes.
func RunWith(t testing.TB, cfg Config, fn func(p *mpi.Proc) error) {
	t.Helper()
	for _, err := range Start(cfg, fn) {
		t.Error(err)
	}
}

// Start runs a job and returns its ranks' errors (nil entries dropped),
// each prefixed with its rank. When one rank fails the job's context is
// cancelled so the others stop instead of waiting forever; their
// consequent ErrStopped errors are left out when a root cause exists.
func Start(cfg Config, fn func(p *mpi.Proc) error) []error {
	if cfg.N < 1 || cfg.Replicas < 0 || cfg.Replicas > cfg.N {
		return []error{fmt.Errorf("mpitest: %d ranks, %d of them replicated", cfg.N, cfg.Replicas)}
	}
	procs := cfg.N + cfg.Replicas
	j := &job{
		name:   fmt.Sprintf("mpitest-%d-%d", os.Getpid(), jobs.Add(1)),
		n:      procs,
		ranks:  cfg.N,
		reps:   cfg.Replicas,
		modex:  make([]map[string]string, procs),
		ready:  make(chan struct{}),
		secret: newSecret(),
	}
	if cfg.Net == nil && slices.Contains(strings.Split(cfg.BTL, ","), membtl.Name) {
		cfg.Net = membtl.NewNetwork()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j.stopped, j.cancel = ctx.Done(), cancel
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for r := 0; r < procs; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runRank(ctx, j, cfg, r, fn)
			if err != nil && !(cfg.AllowFailures && expected(err)) {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	var out, stopped []error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, mpi.ErrStopped):
			stopped = append(stopped, err)
		default:
			out = append(out, err)
		}
	}
	if j.abort != nil {
		out = append([]error{j.abort}, out...)
	}
	if len(out) == 0 {
		out = stopped
	}
	return out
}

func expected(err error) bool {
	return errors.Is(err, mpi.ErrProcFailed) || errors.Is(err, mpi.ErrStopped)
}

func runRank(ctx context.Context, j *job, cfg Config, r int, fn func(p *mpi.Proc) error) error {
	params := mca.NewParams()
	set := frameworks.New(params)
	builtin.Register(set)
	if cfg.Net != nil {
		set.BTL.Register(cfg.Net.Component())
	}
	if cfg.Register != nil {
		cfg.Register(r, set)
	}
	settings := append([]mca.Setting{{Name: "btl", Value: cfg.BTL}}, cfg.Settings...)
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		return err
	}
	node := "node0"
	if r < len(cfg.Nodes) {
		node = cfg.Nodes[r]
	}
	var b mpi.Bootstrap = &boot{rank: r, job: j, set: set, vals: vals, node: node}
	if cfg.Wrap != nil {
		b = cfg.Wrap(r, b)
	}
	var opts []mpi.Option
	if cfg.Log != nil {
		opts = append(opts, mpi.WithLogger(cfg.Log))
	}
	if cfg.States != nil && cfg.States[r] != nil {
		opts = append(opts, mpi.WithState(cfg.States[r]))
	}
	p, err := mpi.InitWith(ctx, b, opts...)
	if err != nil {
		return err
	}
	ferr := fn(p)
	if ferr != nil && !(cfg.AllowFailures && expected(ferr)) {
		// Stop the job before finalizing: the others may wait for us.
		j.cancel()
	}
	return errors.Join(ferr, p.Finalize())
}

type job struct {
	name string
	n    int // processes
	// ranks and reps are a replicated job's ranks and how many run twice
	// (reps 0: not replicated, ranks == n).
	ranks, reps int
	mu          sync.Mutex
	modex       []map[string]string
	got         int
	ready       chan struct{}
	cancel      context.CancelFunc
	// stopped closes when a rank failed: modex rounds give up then,
	// whatever context their caller passed, so the failure is reported
	// instead of the others waiting for a rank that will never come.
	stopped <-chan struct{}
	abort   error
	secret  []byte // the job's, shared by its ranks
	// rounds are the modex rounds after suspensions, by epoch.
	rounds map[uint64]*round
}

// round is one modex: every rank's entries, complete when ready closes.
type round struct {
	modex []map[string]string
	got   int
	ready chan struct{}
}

// newSecret returns a fresh random job secret.
func newSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// boot is the in-memory runtime of one rank.
type boot struct {
	rank int
	job  *job
	set  *frameworks.Set
	vals *mca.Values
	node string
}

func (b *boot) Rank() int                   { return b.rank }
func (b *boot) Size() int                   { return b.job.n }
func (b *boot) Job() string                 { return b.job.name }
func (b *boot) Node() string                { return b.node }
func (b *boot) Secret() []byte              { return b.job.secret }
func (b *boot) Frameworks() *frameworks.Set { return b.set }
func (b *boot) Values() *mca.Values         { return b.vals }

func (b *boot) Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error) {
	j := b.job
	j.mu.Lock()
	if j.modex[b.rank] != nil {
		j.mu.Unlock()
		return nil, fmt.Errorf("mpitest: rank %d called modex twice", b.rank)
	}
	j.modex[b.rank] = maps.Clone(mine)
	j.got++
	if j.got == j.n {
		close(j.ready)
	}
	j.mu.Unlock()
	select {
	case <-j.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("mpitest: modex: %w", ctx.Err())
	case <-j.stopped:
		return nil, fmt.Errorf("mpitest: modex: %w: another rank failed", mpi.ErrStopped)
	}
	out := make([]map[string]string, j.n)
	for i, m := range j.modex {
		out[i] = maps.Clone(m)
	}
	return out, nil
}

// Remodex implements mpi.Rejoiner: the modex again, once per suspension
// epoch, after the ranks listened anew.
func (b *boot) Remodex(ctx context.Context, epoch uint64, mine map[string]string) ([]map[string]string, error) {
	j := b.job
	j.mu.Lock()
	if j.rounds == nil {
		j.rounds = map[uint64]*round{}
	}
	rd := j.rounds[epoch]
	if rd == nil {
		rd = &round{modex: make([]map[string]string, j.n), ready: make(chan struct{})}
		j.rounds[epoch] = rd
	}
	// A rank whose earlier call gave up (its context ended) calls again:
	// it is counted once, and its entries are replaced until the round
	// is complete.
	if rd.modex[b.rank] == nil {
		rd.got++
		rd.modex[b.rank] = maps.Clone(mine)
		if rd.got == j.n {
			close(rd.ready)
		}
	} else if rd.got < j.n {
		rd.modex[b.rank] = maps.Clone(mine)
	}
	j.mu.Unlock()
	select {
	case <-rd.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("mpitest: modex of epoch %d: %w", epoch, ctx.Err())
	case <-j.stopped:
		return nil, fmt.Errorf("mpitest: modex of epoch %d: %w: another rank failed", epoch, mpi.ErrStopped)
	}
	out := make([]map[string]string, j.n)
	for i, m := range rd.modex {
		out[i] = maps.Clone(m)
	}
	return out, nil
}

func (b *boot) Abort(code int, msg string) {
	j := b.job
	j.mu.Lock()
	if j.abort == nil {
		j.abort = fmt.Errorf("rank %d aborted the job (code %d): %s", b.rank, code, msg)
	}
	j.mu.Unlock()
	j.cancel()
}

// Replication implements mpi.Replicator.
func (b *boot) Replication() (ranks, replicated int) { return b.job.ranks, b.job.reps }

var (
	_ mpi.Bootstrap  = (*boot)(nil)
	_ mpi.Rejoiner   = (*boot)(nil)
	_ mpi.Replicator = (*boot)(nil)
)
