// Command failwatch checks that failure events reach an application that
// computes: rank 0 subscribes with mpi.NotifyFailures and then computes
// without any MPI call, watching its channel between steps; rank 1 says
// its pid and waits, for the test to stop or kill it from outside; the
// other ranks finalize. Rank 0 prints
//
//	failwatch: rank 0 heard while computing: rank R failed: CAUSE
//
// and finalizes once it heard of every rank the -expect flag names.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"

	"gompi/mpi"
)

func main() {
	expect := flag.Int("expect", 1, "how many failures rank 0 waits to hear of")
	flag.Parse()
	if err := mpi.Init(context.Background()); err != nil {
		fail(err)
	}
	failures := make(chan mpi.Failure)
	if mpi.Rank() == 0 {
		mpi.NotifyFailures(failures)
	}
	// Every rank is up (and rank 0 subscribed) before rank 1 offers itself.
	if err := mpi.World().Barrier(); err != nil {
		fail(err)
	}
	switch mpi.Rank() {
	case 0:
		compute(failures, *expect)
	case 1:
		fmt.Printf("failwatch: rank 1 pid %d waiting\n", os.Getpid())
		select {}
	}
	if err := mpi.Finalize(); err != nil {
		fail(err)
	}
}

// compute works until it heard of n failures, calling no MPI function.
func compute(failures <-chan mpi.Failure, n int) {
	x := 1.0
	for heard := 0; heard < n; {
		for i := 0; i < 1e5; i++ {
			x = math.Sqrt(x + float64(i))
		}
		select {
		case f := <-failures:
			fmt.Printf("failwatch: rank 0 heard while computing: %v\n", f)
			heard++
		default:
		}
	}
	if x < 0 {
		fmt.Println(x) // keeps the work from being optimized away
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "failwatch:", err)
	os.Exit(1)
}
