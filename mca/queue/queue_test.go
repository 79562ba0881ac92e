package queue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOrder(t *testing.T) {
	q := New[int]()
	for i := range 5 {
		if !q.Put(i) {
			t.Fatalf("Put(%d) on an open queue dropped it", i)
		}
	}
	if q.Len() != 5 {
		t.Fatalf("Len = %d, want 5", q.Len())
	}
	for want := range 5 {
		got, err := q.Pop(t.Context())
		if err != nil || got != want {
			t.Fatalf("Pop = %d, %v; want %d", got, err, want)
		}
	}
}

// Close keeps what was queued for the owner and drops what comes after.
func TestCloseDrains(t *testing.T) {
	q := New[string]()
	q.Put("a")
	q.Put("b")
	q.Close()
	q.Close()
	if q.Put("c") {
		t.Error("Put after Close kept the item")
	}
	var got []string
	for {
		v, err := q.Pop(t.Context())
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("drained %v, want [a b]", got)
	}
	if all, err := q.PopAll(t.Context()); all != nil || !errors.Is(err, ErrClosed) {
		t.Errorf("PopAll on a closed, empty queue = %v, %v", all, err)
	}
}

func TestPopBlocksUntilPut(t *testing.T) {
	q := New[int]()
	got := make(chan int)
	go func() {
		v, err := q.Pop(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("Pop returned %d from an empty queue", v)
	case <-time.After(20 * time.Millisecond):
	}
	q.Put(7)
	if v := <-got; v != 7 {
		t.Errorf("Pop = %d, want 7", v)
	}
}

func TestPopContext(t *testing.T) {
	q := New[int]()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := q.Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Pop on an empty queue at the deadline: %v", err)
	}
	if _, err := q.PopAll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PopAll on an empty queue at the deadline: %v", err)
	}
	// A queued item is returned even to a done context.
	q.Put(1)
	if v, err := q.Pop(ctx); err != nil || v != 1 {
		t.Errorf("Pop with an item queued = %d, %v", v, err)
	}
}

func TestCloseWakesPop(t *testing.T) {
	q := New[int]()
	errc := make(chan error)
	go func() { _, err := q.Pop(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	q.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Pop woken by Close: %v", err)
	}
}

// PopFunc skips items not ready, keeps their place, looks again on Wake,
// and hands every item back once the queue is closed.
func TestPopFunc(t *testing.T) {
	q := New[int]()
	var gate atomic.Int32 // items up to gate are ready
	ready := func(v int) bool { return int32(v) <= gate.Load() }
	q.Put(3)
	q.Put(1)
	q.Put(2)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	if _, err := q.PopFunc(ctx, ready); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PopFunc with nothing ready: %v", err)
	}
	cancel()
	got := make(chan int)
	go func() {
		v, err := q.PopFunc(context.Background(), ready)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(10 * time.Millisecond)
	gate.Store(2)
	q.Wake()
	if v := <-got; v != 1 {
		t.Errorf("PopFunc = %d, want 1 (the oldest ready)", v)
	}
	if v, _ := q.PopFunc(t.Context(), ready); v != 2 {
		t.Errorf("PopFunc = %d, want 2", v)
	}
	q.Put(5)
	q.Close()
	var rest []int
	for {
		v, err := q.PopFunc(t.Context(), ready)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				t.Fatal(err)
			}
			break
		}
		rest = append(rest, v)
	}
	if !slices.Equal(rest, []int{3, 5}) {
		t.Errorf("after Close PopFunc returned %v, want [3 5] (ready or not)", rest)
	}
}

// Many producers, one consumer: nothing is lost, each producer's items
// keep their order.
func TestConcurrent(t *testing.T) {
	const producers, each = 8, 500
	q := New[[2]int]()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				q.Put([2]int{p, i})
			}
		})
	}
	go func() { wg.Wait(); q.Close() }()
	next := make([]int, producers)
	n := 0
	for {
		batch, err := q.PopAll(t.Context())
		if errors.Is(err, ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range batch {
			if v[1] != next[v[0]] {
				t.Fatalf("producer %d: got item %d, want %d", v[0], v[1], next[v[0]])
			}
			next[v[0]]++
			n++
		}
	}
	if n != producers*each {
		t.Errorf("received %d items, want %d", n, producers*each)
	}
}
