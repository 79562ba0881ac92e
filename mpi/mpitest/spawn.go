package mpitest

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"gompi/components/builtin"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"gompi/frameworks"
	"gompi/mca"
	"gompi/mpi"
)

// Jobs of separate processes: Spawn starts n copies of the test binary,
// each running one RankFunc as a rank (the test binary's TestMain hands
// control to RunChild), and relays their modex
// through its pipes (a rank writes its map as one line on stdout and reads
// everyone's as one line on stdin). It is how benchmarks measure ranks
// that each have a Go runtime of their own, as real jobs do, before the
// launcher exists; later tests can kill such ranks for real.

const (
	envRank = "GOMPI_MPITEST_RANK"
	envSize = "GOMPI_MPITEST_SIZE"
	envJob  = "GOMPI_MPITEST_JOB"
	// envSecret carries the job secret to the test's child ranks (hex):
	// test processes only, which live as long as one test.
	envSecret = "GOMPI_MPITEST_SECRET"
	envMCA    = "GOMPI_MPITEST_MCA"
	envFunc   = "GOMPI_MPITEST_FUNC"

	modexPrefix  = "gompi-mpitest-modex "
	outputPrefix = "gompi-mpitest-out "
)

// SpawnConfig describes a job of processes.
type SpawnConfig struct {
	N int
	// Rank names the RankFunc every rank runs (a key of the map the test
	// binary's TestMain gives RunChild).
	Rank string
	// Settings are MCA parameters for every rank ("btl" among them).
	Settings []mca.Setting
	// Env is added to every rank's environment (GOMAXPROCS=1, ...).
	Env []string
}

// Spawn runs the job and returns what each rank reported with Report, in
// rank order.
func Spawn(ctx context.Context, cfg SpawnConfig) ([][]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("mpitest: spawn: %w", err)
	}
	var mcaArg []string
	for _, s := range cfg.Settings {
		mcaArg = append(mcaArg, s.Name+"="+s.Value)
	}
	job := fmt.Sprintf("mpitest-%d-%d", os.Getpid(), jobs.Add(1))
	secret := hex.EncodeToString(newSecret())
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
		err strings.Builder
	}
	children := make([]*child, cfg.N)
	defer func() {
		for _, c := range children {
			if c != nil && c.cmd.Process != nil && c.cmd.ProcessState == nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	}()
	for r := range children {
		c := &child{cmd: exec.CommandContext(ctx, exe, "-test.run=^$", "-test.bench=^$")}
		c.cmd.Env = append(append(os.Environ(), cfg.Env...), envFunc+"="+cfg.Rank,
			envRank+"="+strconv.Itoa(r), envSize+"="+strconv.Itoa(cfg.N), envJob+"="+job, envSecret+"="+secret, envMCA+"="+strings.Join(mcaArg, "\n"))
		c.cmd.Stderr = &c.err
		if c.in, err = c.cmd.StdinPipe(); err != nil {
			return nil, err
		}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		c.out = bufio.NewScanner(stdout)
		c.out.Buffer(make([]byte, 64<<10), 16<<20)
		if err := c.cmd.Start(); err != nil {
			return nil, fmt.Errorf("mpitest: spawn rank %d: %w", r, err)
		}
		children[r] = c
	}
	all := make([]map[string]string, cfg.N)
	for r, c := range children {
		for {
			if !c.out.Scan() {
				c.cmd.Wait()
				return nil, fmt.Errorf("mpitest: rank %d ended before its modex: %s", r, c.err.String())
			}
			if line, ok := strings.CutPrefix(c.out.Text(), modexPrefix); ok {
				if err := json.Unmarshal([]byte(line), &all[r]); err != nil {
					return nil, fmt.Errorf("mpitest: rank %d modex: %w", r, err)
				}
				break
			}
		}
	}
	line, _ := json.Marshal(all)
	for _, c := range children {
		if _, err := fmt.Fprintf(c.in, "%s\n", line); err != nil {
			return nil, fmt.Errorf("mpitest: send modex: %w", err)
		}
	}
	outs := make([][]string, cfg.N)
	errs := make([]error, cfg.N)
	var wg sync.WaitGroup
	for r, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rest []string
			for c.out.Scan() {
				if line, ok := strings.CutPrefix(c.out.Text(), outputPrefix); ok {
					outs[r] = append(outs[r], line)
				} else {
					rest = append(rest, c.out.Text())
				}
			}
			if err := c.cmd.Wait(); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w\n%s%s", r, err, strings.Join(rest, "\n"), c.err.String())
			}
		}()
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// RankFunc is the body of a spawned rank: it starts a Proc from b,
// reports its results with Report and finalizes.
type RankFunc func(b mpi.Bootstrap) error

// RunChild runs this process as the rank Spawn started it as, when it is
// one: call it first in TestMain and exit with the code it returns.
//
//	func TestMain(m *testing.M) {
//		if code, ok := mpitest.RunChild(ranks); ok {
//			os.Exit(code)
//		}
//		os.Exit(m.Run())
//	}
func RunChild(ranks map[string]RankFunc) (code int, isChild bool) {
	name := os.Getenv(envFunc)
	if name == "" {
		return 0, false
	}
	fn, ok := ranks[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "mpitest: no rank function %q\n", name)
		return 2, true
	}
	b, err := child()
	if err == nil {
		err = fn(b)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpitest: rank %s: %v\n", os.Getenv(envRank), err)
		return 1, true
	}
	return 0, true
}

func child() (mpi.Bootstrap, error) {
	rank, err1 := strconv.Atoi(os.Getenv(envRank))
	size, err2 := strconv.Atoi(os.Getenv(envSize))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("mpitest: child environment: %w", err)
	}
	params := mca.NewParams()
	set := frameworks.New(params)
	builtin.Register(set)
	var settings []mca.Setting
	for _, kv := range strings.Split(os.Getenv(envMCA), "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			settings = append(settings, mca.Setting{Name: k, Value: v})
		}
	}
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		return nil, err
	}
	secret, err := hex.DecodeString(os.Getenv(envSecret))
	if err != nil {
		return nil, fmt.Errorf("mpitest: child environment: %s: %w", envSecret, err)
	}
	return &childBoot{rank: rank, size: size, job: os.Getenv(envJob), secret: secret, set: set, vals: vals}, nil
}

// Report sends a line to the parent's result for this rank.
func Report(format string, a ...any) {
	fmt.Printf(outputPrefix+format+"\n", a...)
}

type childBoot struct {
	rank, size int
	job        string
	secret     []byte
	set        *frameworks.Set
	vals       *mca.Values
}

func (b *childBoot) Rank() int                   { return b.rank }
func (b *childBoot) Size() int                   { return b.size }
func (b *childBoot) Job() string                 { return b.job }
func (b *childBoot) Node() string                { return "node0" }
func (b *childBoot) Secret() []byte              { return b.secret }
func (b *childBoot) Frameworks() *frameworks.Set { return b.set }
func (b *childBoot) Values() *mca.Values         { return b.vals }
func (b *childBoot) Abort(code int, msg string) {
	fmt.Fprintf(os.Stderr, "mpitest: rank %d aborts the job (code %d): %s\n", b.rank, code, msg)
	os.Exit(code)
}

func (b *childBoot) Modex(ctx context.Context, mine map[string]string) ([]map[string]string, error) {
	line, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	fmt.Printf("%s%s\n", modexPrefix, line)
	type result struct {
		all []map[string]string
		err error
	}
	done := make(chan result, 1)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 64<<10), 16<<20)
		var r result
		if !in.Scan() {
			r.err = fmt.Errorf("mpitest: modex: parent closed stdin: %v", in.Err())
		} else {
			r.err = json.Unmarshal(in.Bytes(), &r.all)
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.all) != b.size {
			r.err = fmt.Errorf("mpitest: modex: %d entries for %d ranks", len(r.all), b.size)
		}
		return r.all, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var _ mpi.Bootstrap = (*childBoot)(nil)
