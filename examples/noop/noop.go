package main

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"time"

	"gompi/cr"
	"gompi/mpi"
)

// makeState returns n bytes of state: random bytes (incompressible) or a
// text-like pattern that compresses well. Each rank's random state differs.
func makeState(n int, kind string, rank int) ([]byte, error) {
	b := make([]byte, n)
	switch kind {
	case "random":
		rng := rand.NewChaCha8([32]byte{byte(rank), byte(rank >> 8), 'g', 'o', 'm', 'p', 'i'})
		rng.Read(b)
	case "compressible":
		const text = "gompi noop state: the same line again and again, so it compresses well. "
		for i := range b {
			b[i] = text[i%len(text)]
		}
		// A few varying bytes per 4 KiB page so pages are not identical.
		for i := 0; i < len(b); i += 4096 {
			b[i] = byte(i >> 12)
		}
	default:
		return nil, fmt.Errorf("-state %q: want random or compressible", kind)
	}
	return b, nil
}

// run allocates the state and idles until ctx ends or -seconds pass; it
// returns the state so callers (and C/R registration) can reach it.
func run(ctx context.Context, p *mpi.Proc, args []string, out io.Writer) ([]byte, error) {
	fs := flag.NewFlagSet("noop", flag.ContinueOnError)
	fs.SetOutput(out)
	mib := fs.Int("mib", 16, "MiB of state to hold")
	kind := fs.String("state", "random", "random or compressible")
	seconds := fs.Float64("seconds", 0, "stop after this many seconds (0: only on SIGTERM/SIGINT)")
	spread := fs.Bool("spread", false, "-mib is the job's total, block-distributed over the ranks (cr.ProtectDistributed): the job can be restarted on another rank count")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *mib < 0 || *seconds < 0 {
		return nil, fmt.Errorf("-mib and -seconds must be >= 0")
	}
	total, lo := *mib<<20, 0
	if *spread {
		lo, total = p.Rank()*total/p.Size(), (p.Rank()+1)*total/p.Size()-p.Rank()*total/p.Size()
	}
	state, err := makeState(total, *kind, p.Rank())
	if err != nil {
		return nil, err
	}
	// Checkpoint/restart: the state is registered (a restart fills it
	// from the snapshot), and the idle loop comes to a safe point whenever
	// a checkpoint wants one, without polling.
	c, err := cr.For(p)
	if err != nil {
		return nil, err
	}
	if err := protectState(c, &state, *spread, lo, *mib<<20); err != nil {
		return nil, err
	}
	restarted := ""
	if c.IsRestart() {
		restarted = ", restarted"
	}
	fmt.Fprintf(out, "noop: rank %d of %d holds %d MiB of %s state (crc32 %08x)%s\n", p.Rank(), p.Size(), len(state)>>20, *kind, crc32.ChecksumIEEE(state), restarted)
	if *seconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*seconds*float64(time.Second)))
		defer cancel()
	}
	for {
		select {
		case <-ctx.Done():
			return state, nil
		case <-c.Requested():
			if err := c.SafePoint(); err != nil {
				return nil, err
			}
		}
	}
}

// protectState registers the state: this rank's own, or with spread its
// run, from byte lo, of a block-distributed array of global bytes.
func protectState(c *cr.Coordinator, state *[]byte, spread bool, lo, global int) error {
	if spread {
		return c.ProtectDistributed("state", state, cr.Block{Global: global, Lo: lo})
	}
	return c.Protect("state", state)
}
