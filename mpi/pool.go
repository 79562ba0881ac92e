package mpi

import (
	"math/bits"
	"sync"
)

// Unexpected messages and their buffers come from per-size-class pools
// (powers of two from 64 B to 64 MiB), so a steady stream of messages
// allocates nothing; larger ones are allocated and left to the collector.
const (
	minClass = 6
	maxClass = 26
)

var msgPools [maxClass + 1]sync.Pool

func class(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// message is a message taken off the transport and not yet matched.
type message struct {
	src  int // world rank
	tag  int
	seq  uint64
	data []byte
}

// getMsg returns a message whose data has length n.
func getMsg(n int) *message {
	c := class(n)
	if c > maxClass {
		return &message{data: make([]byte, n)}
	}
	if v := msgPools[c].Get(); v != nil {
		m := v.(*message)
		m.data = m.data[:n]
		return m
	}
	return &message{data: make([]byte, n, 1<<c)}
}

// putMsg returns a message from getMsg to its pool.
func putMsg(m *message) {
	c := bits.Len(uint(cap(m.data))) - 1
	if c < minClass || c > maxClass || cap(m.data) != 1<<c {
		return
	}
	msgPools[c].Put(m)
}
