// Package colltest is the coll framework's conformance kit: Job runs the
// members of a communicator in one process, over in-memory messages with
// the ordering package mpi gives (per source, destination and tag, in the
// order sent), each member on a node of the caller's choosing; Check holds
// a module to the flat algorithms' results over random layouts, sizes,
// roots and reductions.
package colltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"gompi/frameworks/coll"
)

// Job is a communicator of len(nodes) members, member r on node nodes[r].
type Job struct {
	nodes []string

	mu    sync.Mutex
	boxes map[key]chan []byte
	// abandon is closed once a member of Run returned an error.
	abandon chan struct{}
	once    sync.Once
	// Sent counts the messages sent since the job was made.
	Sent atomic.Int64
}

type key struct{ src, dst, tag int }

// NewJob returns a job whose member r runs on nodes[r].
func NewJob(nodes []string) *Job {
	return &Job{nodes: nodes, boxes: map[key]chan []byte{}, abandon: make(chan struct{})}
}

// box is the queue of messages from src to dst under tag. Its capacity
// bounds the messages a collective leaves unreceived between two members
// under one tag, far above what any algorithm sends.
func (j *Job) box(k key) chan []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := j.boxes[k]
	if b == nil {
		b = make(chan []byte, 256)
		j.boxes[k] = b
	}
	return b
}

// errAbandoned is what a member waiting for a message gets once another
// member returned an error: the message may never come.
var errAbandoned = errors.New("colltest: another member failed")

// Run calls fn on every member at once, each on a goroutine it waits
// for, and returns each member's error. Once one member returns an error
// (a decline included), the others' waits for messages end with one too,
// so a module whose members disagree fails instead of hanging: a job
// runs once.
func (j *Job) Run(fn func(c coll.Comm) error) []error {
	errs := make([]error, len(j.nodes))
	var wg sync.WaitGroup
	for r := range j.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(&member{j: j, rank: r})
			if errs[r] != nil {
				j.once.Do(func() { close(j.abandon) })
			}
		}()
	}
	wg.Wait()
	return errs
}

// member is one member's coll.Comm.
type member struct {
	j    *Job
	rank int
}

func (m *member) Rank() int         { return m.rank }
func (m *member) Size() int         { return len(m.j.nodes) }
func (m *member) Node(r int) string { return m.j.nodes[r] }

func (m *member) Send(ctx context.Context, dst, tag int, data []byte) error {
	if dst < 0 || dst >= m.Size() {
		return fmt.Errorf("colltest: member %d sends to %d of %d", m.rank, dst, m.Size())
	}
	m.j.Sent.Add(1)
	select {
	case m.j.box(key{m.rank, dst, tag}) <- append([]byte(nil), data...):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *member) Recv(ctx context.Context, buf []byte, src, tag int) error {
	if src < 0 || src >= m.Size() {
		return fmt.Errorf("colltest: member %d receives from %d of %d", m.rank, src, m.Size())
	}
	select {
	case msg := <-m.j.box(key{src, m.rank, tag}):
		if len(msg) != len(buf) {
			return fmt.Errorf("colltest: member %d got %d bytes from %d, %d expected", m.rank, len(msg), src, len(buf))
		}
		copy(buf, msg)
		return nil
	case <-m.j.abandon:
		return errAbandoned
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *member) SendRecv(ctx context.Context, sbuf []byte, dst int, rbuf []byte, src, tag int) error {
	if err := m.Send(ctx, dst, tag, sbuf); err != nil {
		return err
	}
	return m.Recv(ctx, rbuf, src, tag)
}
