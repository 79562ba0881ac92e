package mpi

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"gompi/frameworks"
	"gompi/mca"
)

type fakeBoot struct{ rank, size int }

func (b fakeBoot) Rank() int                   { return b.rank }
func (b fakeBoot) Size() int                   { return b.size }
func (b fakeBoot) Job() string                 { return "fuzz" }
func (b fakeBoot) Node() string                { return "n" }
func (b fakeBoot) Secret() []byte              { return []byte("fake job secret, 32 bytes long.!") }
func (b fakeBoot) Frameworks() *frameworks.Set { return nil }
func (b fakeBoot) Values() *mca.Values         { return nil }
func (b fakeBoot) Modex(_ context.Context, m map[string]string) ([]map[string]string, error) {
	return nil, nil
}
func (b fakeBoot) Abort(int, string) {}

func sampleState() []byte {
	st := savedState{
		rank: 1, size: 3, nextCtx: 12,
		log: []LogEntry{
			{Op: OpDup, Parent: 0, Handle: 4, Members: []int{0, 1, 2}, NextCtx: 6},
			{Op: OpSplit, Parent: 4, Color: 1, Key: -3, Handle: 6, Members: []int{2, 1}, NextCtx: 8},
			{Op: OpSplit, Parent: 0, Color: Undefined, NextCtx: 10},
			{Op: OpFree, Parent: 4, NextCtx: 10},
			{Op: OpInter, Parent: 0, Handle: 10, Members: []int{1}, Remote: []int{2, 0}, NextCtx: 12},
		},
		collSeq: []handleSeq{{0, 3}, {2, 1}, {6, 2}},
		seqs:    []ctxSeqs{{ctx: 0, send: []peerSeq{{0, 2}}, recv: []peerSeq{{2, 5}}}},
		sent:    []uint64{2, 0, 0},
		recvd:   []uint64{0, 0, 5},
		msgs:    []savedMsg{{ctx: 0, src: 2, tag: 4, seq: 5, data: []byte("hello")}, {ctx: 6, src: 2, tag: 0, seq: 1}},
	}
	return st.encode()
}

func TestStateEncodeDecode(t *testing.T) {
	b := sampleState()
	st, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.encode(), b) {
		t.Fatal("decode then encode changed the bytes")
	}
	p, err := newProc(fakeBoot{1, 3}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.restore(b); err != nil {
		t.Fatal(err)
	}
	c, ok := p.Comm(6)
	if !ok || c.Rank() != 1 || c.Size() != 2 || c.WorldRank(0) != 2 || c.collSeq != 2 || p.world.collSeq != 3 {
		t.Fatalf("restored communicator 6: %+v", c)
	}
	if _, ok := p.Comm(4); ok || p.nextCtx != 12 || len(p.CreationLog()) != 5 {
		t.Fatalf("freed communicator or next context wrong")
	}
	if ic, ok := p.Comm(10); !ok || !ic.IsInter() || ic.Rank() != 0 || ic.Size() != 1 || ic.RemoteSize() != 2 || ic.commRank(0) != 1 {
		t.Fatalf("restored intercommunicator 10: %+v", ic)
	}
	if cs := p.ctxs[0]; len(cs.unexp) != 1 || string(cs.unexp[0].data) != "hello" || cs.recvSeq[2] != 5 || cs.sendSeq[0] != 2 {
		t.Fatalf("restored matching state of context 0 wrong")
	}
	tests := []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"bad magic", func(b []byte) []byte { b[0] = 'x'; return b }},
		{"bad checksum", func(b []byte) []byte { b[len(b)-1]++; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-9] }},
		{"future version", func(b []byte) []byte { b[len(stateMagic)] = 9; return withSum(b[:len(b)-4]) }},
	}
	for _, tt := range tests {
		if _, err := decodeState(tt.mut(bytes.Clone(b))); err == nil {
			t.Errorf("%s: decoded", tt.name)
		}
	}
}

// TestStateVersion1 reads a snapshot written before intercommunicators
// (version 1: no remote lists), as one a user kept would be.
func TestStateVersion1(t *testing.T) {
	want := &savedState{rank: 1, size: 2, nextCtx: 6,
		log:  []LogEntry{{Op: OpSplit, Parent: 0, Color: 3, Key: -1, Handle: 4, NextCtx: 6, Members: []int{0, 1}}},
		sent: []uint64{1, 2}, recvd: []uint64{3, 4}}
	got, err := decodeState(want.encodeAs(1))
	if err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if !reflect.DeepEqual(got.log, want.log) || got.nextCtx != 6 || !slices.Equal(got.recvd, want.recvd) {
		t.Fatalf("version 1 decoded as %+v, want %+v", got, want)
	}
	if v2, err := decodeState(want.encode()); err != nil || !reflect.DeepEqual(v2.log, got.log) {
		t.Fatalf("version 2 of the same state: %+v, %v", v2, err)
	}
}

func withSum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}

// FuzzDecodeState feeds arbitrary bodies (with a valid checksum, or the
// fuzzer would never get past it) to the decoder and to restore: neither
// may panic, and whatever decodes must encode back to the same bytes when
// its numbers were written canonically.
func FuzzDecodeState(f *testing.F) {
	b := sampleState()
	f.Add(b[:len(b)-4])
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, body []byte) {
		in := withSum(body)
		st, err := decodeState(in)
		if err != nil {
			return
		}
		if st.size > 64 {
			return
		}
		p, err := newProc(fakeBoot{st.rank, st.size}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("newProc for a decoded state: %v", err)
		}
		_ = p.restore(in)
	})
}

// TestHelloKeyAtEpoch: each in-job rollback epoch has a hello key of its
// own, and epoch 0 is the job's key.
func TestHelloKeyAtEpoch(t *testing.T) {
	secret := make([]byte, 32)
	k0, err0 := helloKeyAt(secret, "j", 0)
	k, err := helloKey(secret, "j")
	k1, err1 := helloKeyAt(secret, "j", 1)
	k2, err2 := helloKeyAt(secret, "j", 2)
	if err0 != nil || err != nil || err1 != nil || err2 != nil {
		t.Fatal(err0, err, err1, err2)
	}
	if !bytes.Equal(k0, k) || bytes.Equal(k0, k1) || bytes.Equal(k1, k2) {
		t.Errorf("keys: epoch 0 %x (job %x), 1 %x, 2 %x", k0, k, k1, k2)
	}
}
