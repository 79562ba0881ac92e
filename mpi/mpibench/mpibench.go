// Package mpibench holds the OSU-style measurement loops between ranks 0
// and 1 that the bench program (examples/bench) and mpi's process
// benchmarks both time, so the two measure the same thing.
package mpibench

import (
	"time"

	"gompi/mpi"
)

// PingPong bounces a size-byte message between ranks 0 and 1: warmup
// untimed round trips, then iters timed ones. It returns the time of the
// timed ones.
func PingPong(w *mpi.Comm, size, warmup, iters int) (time.Duration, error) {
	buf := make([]byte, size)
	other := 1 - w.Rank()
	var start time.Time
	for i := 0; i < warmup+iters; i++ {
		if i == warmup {
			start = time.Now()
		}
		if w.Rank() == 0 {
			if err := w.Send(buf, other, 1); err != nil {
				return 0, err
			}
			if _, err := w.Recv(buf, other, 1); err != nil {
				return 0, err
			}
		} else {
			if _, err := w.Recv(buf, other, 1); err != nil {
				return 0, err
			}
			if err := w.Send(buf, other, 1); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// Stream sends iters size-byte messages from rank 0 to rank 1, window at a
// time, after an untimed batch of min(warmup, window); rank 1's
// acknowledgement ends the timing.
func Stream(w *mpi.Comm, size, window, warmup, iters int) (time.Duration, error) {
	bufs := make([][]byte, window)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	reqs := make([]*mpi.Request, 0, window)
	batch := func(n int) error {
		for i := 0; i < n; i += window {
			reqs = reqs[:0]
			for k := 0; k < window && i+k < n; k++ {
				var rq *mpi.Request
				var err error
				if w.Rank() == 0 {
					rq, err = w.Isend(bufs[k], 1, 2)
				} else {
					rq, err = w.Irecv(bufs[k], 0, 2)
				}
				if err != nil {
					return err
				}
				reqs = append(reqs, rq)
			}
			if _, err := mpi.Waitall(reqs); err != nil {
				return err
			}
		}
		if w.Rank() == 0 {
			_, err := w.Recv(nil, 1, 3)
			return err
		}
		return w.Send(nil, 0, 3)
	}
	if err := batch(min(warmup, window)); err != nil {
		return 0, err
	}
	start := time.Now()
	err := batch(iters)
	return time.Since(start), err
}
