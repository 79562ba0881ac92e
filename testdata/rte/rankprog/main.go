// Command rankprog is the rank program of the runtime's tests: it uses
// the rank client directly (no mpi package) and behaves as its flags say.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"gompi/rte/rankclient"
)

func main() {
	var (
		noInit     = flag.Bool("no-init", false, "do not connect to the runtime (a plain program)")
		exitRank   = flag.Int("exit-rank", -1, "this rank exits with -exit-code after the modex, without finalizing")
		exitCode   = flag.Int("exit-code", 0, "status for -exit-rank")
		sleep      = flag.Bool("sleep", false, "after the modex, print ready and wait until killed")
		sleepRank  = flag.Int("sleep-rank", -1, "only this rank sleeps; the others finalize and exit (with -sleep)")
		stderr     = flag.Bool("stderr", false, "also print a line on stderr")
		env        = flag.String("env", "", "print the value of these comma-separated variables")
		noFinalize = flag.Bool("no-finalize", false, "exit 0 without finalizing")
		abortRank  = flag.Int("abort-rank", -1, "this rank calls Abort with -exit-code")
		barriers   = flag.Int("barriers", 0, "run this many barriers after the modex")
		partial    = flag.Bool("partial", false, "end stdout with a line without a newline")
		procs      = flag.Bool("gomaxprocs", false, "print the Go runtime's GOMAXPROCS")
	)
	flag.Parse()
	if *noInit {
		fmt.Printf("plain program, rank env %q\n", os.Getenv("GOMPI_RANK"))
		return
	}
	ctx := context.Background()
	c, err := rankclient.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(99)
	}
	r := c.Rank()
	all, err := c.Modex(ctx, map[string]string{"rank": fmt.Sprint(r), "node": c.Node(), "pid": fmt.Sprint(os.Getpid())})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rankprog: modex:", err)
		os.Exit(98)
	}
	var seen []string
	for i, m := range all {
		if m["rank"] != fmt.Sprint(i) || m["node"] != c.NodeOf(i) {
			fmt.Fprintf(os.Stderr, "rankprog: modex entry %d is %v\n", i, m)
			os.Exit(97)
		}
		seen = append(seen, m["node"])
	}
	sort.Strings(seen)
	fmt.Printf("rank %d of %d on %s: modex saw %s\n", r, c.Size(), c.Node(), strings.Join(seen, ","))
	if *stderr {
		fmt.Fprintf(os.Stderr, "rank %d says hello on stderr\n", r)
	}
	if *env != "" {
		for _, k := range strings.Split(*env, ",") {
			fmt.Printf("rank %d env %s=%s\n", r, k, os.Getenv(k))
		}
	}
	if *procs {
		fmt.Printf("rank %d GOMAXPROCS %d\n", r, runtime.GOMAXPROCS(0))
	}
	for i := range *barriers {
		if err := c.Barrier(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "rankprog: barrier %d: %v\n", i, err)
			os.Exit(96)
		}
	}
	if r == *abortRank {
		c.Abort(*exitCode, fmt.Sprintf("rank %d gives up", r))
	}
	if r == *exitRank {
		os.Exit(*exitCode)
	}
	if *sleep && (*sleepRank < 0 || *sleepRank == r) {
		fmt.Printf("ready rank=%d pid=%d\n", r, os.Getpid())
		for {
			time.Sleep(time.Hour)
		}
	}
	if *noFinalize {
		os.Exit(0)
	}
	if *partial {
		fmt.Printf("rank %d no newline", r)
	}
	if err := c.Finalize(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rankprog: finalize:", err)
		os.Exit(95)
	}
}
