package filem

import (
	"context"
	"errors"
	"sync"
)

// Batch runs one(ctx, i) for i in [0, n), at most max at a time (max < 1
// means one), and joins their errors in batch order: the shape every
// module's Put, Get and Remove returns.
func Batch(ctx context.Context, max, n int, one func(ctx context.Context, i int) error) error {
	if max < 1 {
		max = 1
	}
	errs := make([]error, n)
	sem := make(chan struct{}, max)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = one(ctx, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
