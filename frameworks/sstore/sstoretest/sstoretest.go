// Package sstoretest is the conformance kit every SStore component must
// pass. Ranks' local snapshots are written the way a rank writes them (into
// the directory LocalDir gives, files and local metadata with checksums);
// the kit checks what the framework promises: a sequence synced can be
// fetched back with identical bytes that verify; a damaged local snapshot
// is refused with ErrCorrupt; a sync cancelled, or a later sequence
// removed from the node, leaves an earlier sequence intact; LocalDir gives an empty
// directory even where an attempt that never committed left files. A
// component that stores nothing (C/R off) refuses every call with
// ErrDisabled.
package sstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
)

// Options describe the component under test.
type Options struct {
	// Disabled is set for a component that stores nothing: every call
	// must fail with sstore.ErrDisabled.
	Disabled bool
}

// Run runs the kit. newModule returns a fresh module, ready for use (as
// gompid provisions it), on each call.
func Run(t *testing.T, newModule func(t *testing.T) sstore.Module, opts Options) {
	t.Helper()
	if opts.Disabled {
		t.Run("disabled", func(t *testing.T) { testDisabled(t, newModule(t)) })
		return
	}
	t.Run("write-sync-fetch", func(t *testing.T) { testRoundTrip(t, newModule(t)) })
	t.Run("corrupt-refused", func(t *testing.T) { testCorrupt(t, newModule(t)) })
	t.Run("cancelled-sync-keeps-earlier", func(t *testing.T) { testCancelled(t, newModule(t)) })
	t.Run("remove-keeps-others", func(t *testing.T) { testRemove(t, newModule(t)) })
	t.Run("local-dir-empty", func(t *testing.T) { testLocalDirEmpty(t, newModule(t)) })
}

const ranks = 3

// NewRef returns a reference in a fresh folder, created as gompirun
// creates it before the first checkpoint.
func NewRef(t *testing.T) snapshot.Ref {
	t.Helper()
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("kit")}
	if err := os.MkdirAll(ref.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	return ref
}

// content is rank's file data in seq: different per rank and sequence,
// and large enough to span several writes.
func content(seq, rank int) map[string][]byte {
	big := make([]byte, 300<<10+rank)
	for i := range big {
		big[i] = byte(i*7 + seq*13 + rank)
	}
	return map[string][]byte{
		"app.state":     big,
		"library.state": fmt.Appendf(nil, "library of rank %d at seq %d", rank, seq),
		"empty":         nil,
	}
}

// write writes rank's local snapshot of seq where the module says.
func write(t *testing.T, m sstore.Module, ref snapshot.Ref, seq, rank int) sstore.Local {
	t.Helper()
	dir, err := m.LocalDir(t.Context(), ref, seq, rank)
	if err != nil {
		t.Fatalf("local dir of rank %d seq %d: %v", rank, seq, err)
	}
	var recs []snapshot.FileRecord
	for name, data := range content(seq, rank) {
		w, err := snapshot.CreateFile(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		rec, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	meta := &snapshot.LocalMeta{Rank: rank, PID: 4711, Node: "n0", CRS: "self", Created: time.Unix(1_700_000_000, 0), Files: recs}
	if err := snapshot.WriteLocal(dir, meta); err != nil {
		t.Fatal(err)
	}
	return sstore.Local{Rank: rank, Dir: dir}
}

// writeSeq writes every rank's local snapshot of seq and syncs them.
func writeSeq(t *testing.T, m sstore.Module, ref snapshot.Ref, seq int) []sstore.Local {
	t.Helper()
	var locals []sstore.Local
	for rank := range ranks {
		locals = append(locals, write(t, m, ref, seq, rank))
	}
	if err := m.Sync(t.Context(), ref, seq, locals); err != nil {
		t.Fatalf("sync seq %d: %v", seq, err)
	}
	return locals
}

// fetched fetches every rank's snapshot of seq and checks it is what was
// written: the same metadata, files that verify, identical bytes.
func fetched(t *testing.T, m sstore.Module, ref snapshot.Ref, seq int) {
	t.Helper()
	for rank := range ranks {
		dir, err := m.Fetch(t.Context(), ref, seq, rank)
		if err != nil {
			t.Errorf("fetch rank %d seq %d: %v", rank, seq, err)
			continue
		}
		meta, err := snapshot.ReadLocal(dir)
		if err != nil {
			t.Errorf("fetched rank %d seq %d: %v", rank, seq, err)
			continue
		}
		if meta.Rank != rank {
			t.Errorf("fetched rank %d seq %d: metadata of rank %d", rank, seq, meta.Rank)
		}
		if err := meta.Verify(dir); err != nil {
			t.Errorf("fetched rank %d seq %d does not verify: %v", rank, seq, err)
		}
		for name, want := range content(seq, rank) {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("fetched rank %d seq %d: %s differs from what was written (%d bytes, want %d; %v)", rank, seq, name, len(got), len(want), err)
			}
		}
	}
}

func testRoundTrip(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	writeSeq(t, m, ref, 0)
	writeSeq(t, m, ref, 1)
	fetched(t, m, ref, 0)
	fetched(t, m, ref, 1)
	fetched(t, m, ref, 1) // a second fetch (from a cache, say) is the same
}

func testCorrupt(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	var locals []sstore.Local
	for rank := range ranks {
		locals = append(locals, write(t, m, ref, 0, rank))
	}
	if err := os.Truncate(filepath.Join(locals[1].Dir, "app.state"), 100); err != nil {
		t.Fatal(err)
	}
	if err := m.Sync(t.Context(), ref, 0, locals); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Errorf("sync of a truncated local snapshot: %v, want snapshot.ErrCorrupt", err)
	}
}

func testCancelled(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	writeSeq(t, m, ref, 0)
	var locals []sstore.Local
	for rank := range ranks {
		locals = append(locals, write(t, m, ref, 1, rank))
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Sync(ctx, ref, 1, locals); !errors.Is(err, context.Canceled) {
		t.Errorf("sync with a cancelled context: %v, want context.Canceled", err)
	}
	fetched(t, m, ref, 0)
}

func testRemove(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	writeSeq(t, m, ref, 0)
	locals := writeSeq(t, m, ref, 1)
	if err := m.Remove(t.Context(), ref, 1); err != nil {
		t.Fatalf("remove seq 1: %v", err)
	}
	fetched(t, m, ref, 0)
	// This node's copies of seq 1 are gone (a copy on global storage
	// may stay: Remove is about this node).
	for _, l := range locals {
		if _, err := os.Stat(l.Dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rank %d's local snapshot of seq 1 is still at %s after Remove: %v", l.Rank, l.Dir, err)
		}
	}
}

func testLocalDirEmpty(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	l := write(t, m, ref, 3, 1) // an attempt that never committed
	dir, err := m.LocalDir(t.Context(), ref, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("LocalDir gave %s holding %d entries left by an attempt that never committed (was %s)", dir, len(ents), l.Dir)
	}
}

func testDisabled(t *testing.T, m sstore.Module) {
	ref := NewRef(t)
	ctx := t.Context()
	if _, err := m.LocalDir(ctx, ref, 0, 0); !errors.Is(err, sstore.ErrDisabled) {
		t.Errorf("LocalDir: %v, want sstore.ErrDisabled", err)
	}
	if err := m.Sync(ctx, ref, 0, []sstore.Local{{Rank: 0, Dir: t.TempDir()}}); !errors.Is(err, sstore.ErrDisabled) {
		t.Errorf("Sync: %v, want sstore.ErrDisabled", err)
	}
	if _, err := m.Fetch(ctx, ref, 0, 0); !errors.Is(err, sstore.ErrDisabled) {
		t.Errorf("Fetch: %v, want sstore.ErrDisabled", err)
	}
	if err := m.Remove(ctx, ref, 0); !errors.Is(err, sstore.ErrDisabled) {
		t.Errorf("Remove: %v, want sstore.ErrDisabled", err)
	}
	if ents, _ := os.ReadDir(ref.Path()); len(ents) != 0 {
		t.Errorf("a disabled store wrote %d entries into the reference", len(ents))
	}
}
