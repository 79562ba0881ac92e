package mpi_test

import (
	"context"
	"sync"

	"gompi/mpi"
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

// quiesce is the bookmark exchange and drain a coordination protocol does
// at a checkpoint: afterwards every message sent to p is in its library.
func quiesce(p *mpi.Proc) error {
	ch := p.Channels()
	sentTo, _ := p.Counts()
	got, err := ch.Exchange(context.Background(), sentTo)
	if err != nil {
		return err
	}
	for r := range got {
		if r != p.Rank() {
			if err := ch.Drain(context.Background(), r, got[r]); err != nil {
				return err
			}
		}
	}
	return nil
}
