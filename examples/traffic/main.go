// Command traffic is a randomized message-passing program with no line of
// checkpoint/restart code (it never imports package cr): point-to-point
// (blocking sends and receives, non-blocking ones with requests left
// outstanding across rounds, AnySource), blocking and non-blocking
// collectives, and a goroutine per rank blocked in a receive for long
// stretches, in a pattern drawn from -seed. Every rank draws the same
// choices; each round one rank (the laggard, drawn too) is slowed by
// -pace, so the others spend the round blocked inside the library: in a
// receive, a Wait or a collective. That is where a transparent
// checkpoint (crs=criu) is meant to find them.
//
// Each message carries its stream's sequence number and content drawn
// from the seed: the receiver checks both on arrival (a message lost,
// duplicated or reordered fails the run at once, naming the stream and
// the sender), and folds it into a running hash per stream and sender.
// At the end the ranks exchange what each sent every other (count and
// running hash per stream) and compare it with what was received, then
// rank 0 prints
//
//	traffic: rounds=R messages=M digest=<16 hex digits>
//
// which depends on -seed and -rounds only: not on the number of nodes, the
// transport, the pacing, or how often the job was checkpointed, stopped
// or restarted. Every rank also prints the transport it reaches each peer
// with ("transports rank=R self uds tcp ..."), and how many times each
// part of a round (the laggard's hold, completing the lazy stream, each
// kind of operation) took a quarter of a second or more ("stalls rank=R
// hold=0 lazy=0 fan-in=1 ..."): something stopped the rank there, such as
// a checkpoint, which freezes it for about a second.
//
// With -out PREFIX, rank R also writes a line per round to the file
// PREFIX.R, which it keeps open for writing from start to end: what it
// holds at the end depends on -seed and -rounds only, like the digest
// (for tests of a checkpointed program's output files).
//
// With -pace-while PATH, a rank paces only while PATH exists: a test
// removes it once it has checkpointed the job enough, and a job restored
// later from one of those checkpoints runs its remaining rounds at full
// speed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"gompi/mpi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mpi.Init(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "traffic:", err)
		os.Exit(1)
	}
	_, err := run(mpi.Default(), os.Args[1:], os.Stdout)
	if ferr := mpi.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "traffic:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	seed      uint64
	rounds    int
	every     int
	pace      time.Duration
	paceWhile string
	out       string
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("traffic", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the pattern (the digest depends on it)")
	fs.IntVar(&o.rounds, "rounds", 500, "rounds of traffic")
	fs.IntVar(&o.every, "every", 0, "rank 0 prints \"round N\" every this many rounds (0: never)")
	fs.DurationVar(&o.pace, "pace", 0, "mean time the round's laggard is held before it joins (0: no pacing)")
	fs.StringVar(&o.paceWhile, "pace-while", "", "pace only while this file exists (empty: always)")
	fs.StringVar(&o.out, "out", "", "rank R writes a line per round to the file OUT.R (empty: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.rounds < 1:
		return o, fmt.Errorf("-rounds %d: want at least 1", o.rounds)
	case o.every < 0 || o.pace < 0:
		return o, fmt.Errorf("-every and -pace are not negative")
	}
	return o, nil
}

// run runs the traffic on p's world and returns the digest rank 0 prints
// (the empty string on other ranks).
func run(p *mpi.Proc, args []string, out io.Writer) (string, error) {
	o, err := parse(args, out)
	if err != nil {
		return "", err
	}
	t, err := newTraffic(p.World(), o)
	if err != nil {
		return "", err
	}
	file, err := outFile(o.out, t.me)
	if err != nil {
		return "", err
	}
	defer file.Close()
	for round := 0; round < o.rounds; round++ {
		if err := t.round(round); err != nil {
			return "", fmt.Errorf("rank %d, round %d: %w", t.me, round, err)
		}
		if err := file.line(round+1, t); err != nil {
			return "", err
		}
		if t.me == 0 && o.every > 0 && (round+1)%o.every == 0 {
			fmt.Fprintf(out, "round %d\n", round+1)
		}
	}
	digest, err := t.finish()
	if err != nil {
		return "", fmt.Errorf("rank %d: %w", t.me, err)
	}
	if err := file.Close(); err != nil {
		return "", err
	}
	ts := fmt.Sprintf("transports rank=%d", t.me)
	for q := 0; q < t.n; q++ {
		ts += " " + p.Transport(q)
	}
	fmt.Fprintln(out, ts)
	st := fmt.Sprintf("stalls rank=%d", t.me)
	for i, n := range t.stalls {
		st += fmt.Sprintf(" %s=%d", partNames[i], n)
	}
	fmt.Fprintln(out, st)
	if t.me == 0 {
		fmt.Fprintf(out, "traffic: rounds=%d messages=%d digest=%s\n", o.rounds, t.messages, digest)
	}
	return digest, nil
}

// output is -out's file of one rank; nil when there is none.
type output struct{ f *os.File }

func outFile(prefix string, rank int) (*output, error) {
	if prefix == "" {
		return nil, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", prefix, rank))
	if err != nil {
		return nil, err
	}
	return &output{f}, nil
}

// line writes round's line: the collectives' books and how many
// point-to-point messages arrived, as of the end of the round. One write
// per line, unbuffered: the file grows as the rank runs.
func (o *output) line(round int, t *traffic) error {
	if o == nil {
		return nil
	}
	_, err := fmt.Fprintf(o.f, "round %d coll %016x world %d\n", round, t.coll.Sum64(), t.recvdWorld())
	return err
}

// Close closes the file; again is a no-op.
func (o *output) Close() error {
	if o == nil || o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	return err
}
