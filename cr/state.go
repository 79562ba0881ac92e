package cr

import (
	"bufio"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
)

// AppStateFile is the file of a local snapshot holding the values
// registered with Protect and the safe point the rank was saved at.
const AppStateFile = "app.state"

// registry holds what the program registered to be saved.
type stateRegistry struct {
	mu        sync.Mutex
	names     []string
	ptrs      []any
	dists     []distSpec // how each value is spread over the ranks (distribute.go)
	onCkpt    []func(dir string) error
	onCont    []func() error
	lastFiles []snapshot.FileRecord
	savingAt  uint64
}

// Protect registers *ptr, under name, to be saved at every checkpoint: a
// slice of fixed-size numbers as its memory, anything else with
// encoding/gob (numbers, strings, slices, arrays, maps, pointers and the
// exported fields of structs; unexported fields are not saved, empty
// slices and maps inside gob values come back nil; no channels or
// functions). On a restart,
// before the restart point, it first fills *ptr with the saved value (the
// value is zeroed, then decoded), so the program's own initial value is
// replaced. A name saved in the snapshot must be registered again before
// the restart point.
func (c *Coordinator) Protect(name string, ptr any) error {
	return c.protect(name, ptr, distSpec{})
}

// protect registers *ptr, spread over the ranks as d says, and fills it
// on a restart.
func (c *Coordinator) protect(name string, ptr any, d distSpec) error {
	if name == "" {
		return fmt.Errorf("cr: protect: empty name")
	}
	rv := reflect.ValueOf(ptr)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("cr: protect %q: want a non-nil pointer, got %T", name, ptr)
	}
	// A zero value of the type shows whether gob can encode it at all,
	// without encoding the program's (possibly large) value now.
	if err := gob.NewEncoder(io.Discard).EncodeValue(reflect.New(rv.Elem().Type())); err != nil {
		return fmt.Errorf("cr: protect %q: a %s cannot be saved: %w", name, rv.Elem().Type(), err)
	}
	r := &c.reg
	r.mu.Lock()
	if slices.Contains(r.names, name) {
		r.mu.Unlock()
		return fmt.Errorf("cr: protect %q: already registered", name)
	}
	r.names = append(r.names, name)
	r.ptrs = append(r.ptrs, ptr)
	r.dists = append(r.dists, d)
	r.mu.Unlock()

	c.mu.Lock()
	rs := c.restart
	fill := rs != nil && !rs.resumed
	c.mu.Unlock()
	if !fill {
		return nil
	}
	if rs.sources != nil {
		if err := rs.fillRepartitioned(name, ptr, d); err != nil {
			return fmt.Errorf("cr: protect %q: restart on %d ranks from %d: %w", name, c.p.Size(), len(rs.sources), err)
		}
		c.mu.Lock()
		rs.restored[name] = true
		c.mu.Unlock()
		return nil
	}
	i := slices.Index(rs.file.Names, name)
	if i < 0 {
		return fmt.Errorf("cr: protect %q: restart: the snapshot in %s holds no value of that name (it holds: %s)", name, rs.info.Dir, strings.Join(rs.names, ", "))
	}
	if err := d.fill(ptr, &rs.file.appHeader, i, rs.file.Values[i]); err != nil {
		return fmt.Errorf("cr: protect %q: restart: %w", name, err)
	}
	rs.file.Values[i] = nil // the program holds it now
	c.mu.Lock()
	rs.restored[name] = true
	c.mu.Unlock()
	return nil
}

// OnCheckpoint registers f to run at every checkpoint, after the library
// quiesced: it writes files of its own into dir, the local snapshot
// directory (regular files only, not named app.state, library.state or
// snapshot_meta). Their sizes and checksums are recorded and checked at
// restart.
func (c *Coordinator) OnCheckpoint(f func(dir string) error) error {
	if f == nil {
		return fmt.Errorf("cr: OnCheckpoint: nil callback")
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	c.reg.onCkpt = append(c.reg.onCkpt, f)
	return nil
}

// OnContinue registers f to run after each checkpoint this rank saved
// and runs on from (not after one that failed, nor with --term).
func (c *Coordinator) OnContinue(f func() error) error {
	if f == nil {
		return fmt.Errorf("cr: OnContinue: nil callback")
	}
	c.reg.mu.Lock()
	defer c.reg.mu.Unlock()
	c.reg.onCont = append(c.reg.onCont, f)
	return nil
}

// OnRestart runs f at once when the rank was restarted and has not yet
// reached its restart point, with the local snapshot's directory (its
// files verified): the callback reads back what its OnCheckpoint wrote.
// Otherwise it does nothing.
func (c *Coordinator) OnRestart(f func(dir string) error) error {
	if f == nil {
		return fmt.Errorf("cr: OnRestart: nil callback")
	}
	c.mu.Lock()
	rs := c.restart
	run := rs != nil && !rs.resumed
	c.mu.Unlock()
	if !run {
		return nil
	}
	if err := f(rs.info.Dir); err != nil {
		return fmt.Errorf("cr: OnRestart callback: %w", err)
	}
	return nil
}

var reservedFiles = []string{AppStateFile, snapc.LibraryStateFile, snapshot.LocalMetaFile}

// saveFiles is the rank's state source a CRS that runs inside the rank
// (self) is provisioned with (crs.RankHost.Save): saveState's file names.
func (c *Coordinator) saveFiles(ctx context.Context, dir string) ([]string, error) {
	recs, err := c.saveState(ctx, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(recs))
	for i, r := range recs {
		names[i] = r.Name
	}
	return names, nil
}

// saveState writes the rank's registered state into dir: the files of the
// OnCheckpoint callbacks, then app.state.
func (c *Coordinator) saveState(ctx context.Context, dir string) ([]snapshot.FileRecord, error) {
	r := &c.reg
	r.mu.Lock()
	names, ptrs, dists := slices.Clone(r.names), slices.Clone(r.ptrs), slices.Clone(r.dists)
	cbs := slices.Clone(r.onCkpt)
	at := r.savingAt
	r.mu.Unlock()

	var recs []snapshot.FileRecord
	if len(cbs) > 0 {
		before, err := dirNames(dir)
		if err != nil {
			return nil, fmt.Errorf("cr: %w", err)
		}
		for i, f := range cbs {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("cr: %w", err)
			}
			if err := f(dir); err != nil {
				return nil, fmt.Errorf("cr: OnCheckpoint callback %d: %w", i+1, err)
			}
		}
		after, err := dirNames(dir)
		if err != nil {
			return nil, fmt.Errorf("cr: %w", err)
		}
		for _, name := range after {
			if slices.Contains(before, name) {
				continue
			}
			path := filepath.Join(dir, name)
			fi, err := os.Lstat(path)
			if err != nil {
				return nil, fmt.Errorf("cr: %w", err)
			}
			switch {
			case slices.Contains(reservedFiles, name):
				return nil, fmt.Errorf("cr: an OnCheckpoint callback wrote %s: that name is the library's; choose another", path)
			case strings.HasPrefix(name, "."):
				return nil, fmt.Errorf("cr: an OnCheckpoint callback wrote %s: hidden names are reserved for files being written", path)
			case !fi.Mode().IsRegular():
				return nil, fmt.Errorf("cr: an OnCheckpoint callback made %s, which is not a regular file: a snapshot holds regular files only, directly in its directory", path)
			}
			size, sum, err := snapshot.ChecksumFile(path)
			if err != nil {
				return nil, fmt.Errorf("cr: %s: %w", path, err)
			}
			recs = append(recs, snapshot.FileRecord{Name: name, Size: size, Checksum: sum})
		}
	}

	w, err := snapshot.CreateFile(dir, AppStateFile)
	if err != nil {
		return nil, fmt.Errorf("cr: %w", err)
	}
	if err := writeAppStateOf(w, c.p.Rank(), at, names, ptrs, dists); err != nil {
		w.Abort()
		return nil, fmt.Errorf("cr: write %s: %w", filepath.Join(dir, AppStateFile), err)
	}
	rec, err := w.Close()
	if err != nil {
		return nil, fmt.Errorf("cr: %w", err)
	}
	recs = append(recs, rec)
	r.mu.Lock()
	r.lastFiles = slices.Clone(recs)
	r.mu.Unlock()
	return recs, nil
}

func dirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}

// loadRestart verifies the local snapshot of a restart and reads its
// app.state; the safe-point count resumes just before the saved one.
func (c *Coordinator) loadRestart(info snapc.RestartInfo) error {
	rank := c.p.Rank()
	meta, err := snapshot.ReadLocal(info.Dir)
	if err != nil {
		return fmt.Errorf("cr: rank %d: restart: %w", rank, err)
	}
	if n, err := fromRanks(meta); n > 0 || err != nil {
		if err != nil {
			return fmt.Errorf("cr: rank %d: restart: %s: %w", rank, info.Dir, err)
		}
		if meta.Rank != rank {
			return fmt.Errorf("cr: rank %d: restart: %s is rank %d's snapshot", rank, info.Dir, meta.Rank)
		}
		return c.loadRepartition(info, meta, n)
	}
	if err := meta.Verify(info.Dir); err != nil {
		return fmt.Errorf("cr: rank %d: restart: %w", rank, err)
	}
	if meta.Rank != rank {
		return fmt.Errorf("cr: rank %d: restart: %s is rank %d's snapshot", rank, info.Dir, meta.Rank)
	}
	path := filepath.Join(info.Dir, AppStateFile)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cr: rank %d: restart: %w (was the snapshot taken with crs=self? it says crs=%s)", rank, err, meta.CRS)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cr: rank %d: restart: %w", rank, err)
	}
	af, err := decodeAppState(bufio.NewReaderSize(f, 1<<20), fi.Size())
	if err != nil {
		return fmt.Errorf("cr: rank %d: restart: %s: %w", rank, path, err)
	}
	if af.Rank != rank {
		return fmt.Errorf("cr: rank %d: restart: %s: %w: saved by rank %d", rank, path, snapshot.ErrCorrupt, af.Rank)
	}
	rs := &restartState{info: info, at: af.SafePoint, file: af, names: af.Names, restored: map[string]bool{}}
	c.restart = rs
	c.count = af.SafePoint - 1
	c.attempted = af.SafePoint
	c.signalRequestedLocked()
	return nil
}
