package mpi_test

import (
	"context"
	"sync"
)

func contextCanceled() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx, cancel
}

// holdAll returns a one-shot rendezvous of n goroutines outside the
// library: what a checkpoint coordinator does when it holds every rank
// until all are saved, so no rank sends anything (Finalize's barrier
// included) that another would capture before its own save.
func holdAll(n int) func() {
	var mu sync.Mutex
	count := 0
	ch := make(chan struct{})
	return func() {
		mu.Lock()
		count++
		if count == n {
			close(ch)
		}
		mu.Unlock()
		<-ch
	}
}
