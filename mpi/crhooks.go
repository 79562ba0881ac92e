package mpi

import (
	"context"
	"errors"
	"fmt"
	"gompi/boot"
	"gompi/frameworks/sstore/snapshot"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"gompi/frameworks/snapc"
)

// What the checkpoint/restart layer (package cr) needs from a Proc: the
// runtime's link to the job's checkpoint coordinators, the coordination
// protocol chosen at Init, channels for one checkpoint's exchanges, the
// library state of a restart, and the replay of communicator creations.

// replyTimeout bounds an answer to the job's coordinator.
const replyTimeout = 30 * time.Second

// Bootstrap returns the runtime bootstrap the Proc started with.
func (p *Proc) Bootstrap() Bootstrap { return p.boot }

// Done is closed when the Proc stops (Finalize, Abort, or its Init
// context ended).
func (p *Proc) Done() <-chan struct{} { return p.done }

// Logger is the Proc's own logger, whose records name its rank and node
// (package cr logs through it).
func (p *Proc) Logger() *slog.Logger { return p.log }

// Finalizing reports whether Finalize has begun.
func (p *Proc) Finalizing() bool { return p.finalizing.Load() }

// AppLink returns the Bootstrap's link to the job's checkpoint
// coordinators, nil when the runtime gives none.
func (p *Proc) AppLink() snapc.AppLink {
	l, _ := p.boot.(snapc.AppLink)
	return l
}

// appState routes the coordinators' requests. Until package cr takes them
// over (HandleApp), the library answers for itself: a program that never
// reaches a safe point cannot be saved, so a query is told so, and a
// target waits for cr (the program may attach later) or for Finalize.
type appState struct {
	mu         sync.Mutex
	handler    func(snapc.AppRequest)
	held       []snapc.AppRequest
	finalizing bool
	onFinalize []func()
}

func (p *Proc) startAppResponder() {
	l := p.AppLink()
	if l == nil {
		return
	}
	reqs := l.Requests()
	if reqs == nil {
		return
	}
	// What the runtime sent before Init is dispatched now, in order, so
	// package cr finds it when it attaches.
	for len(reqs) > 0 {
		r, ok := <-reqs
		if !ok {
			return
		}
		if !p.handleQuiesce(r) {
			p.handleRollback(r)
			p.dispatchApp(l, r)
		}
	}
	// The goroutine reads until the link closes (the runtime closes it
	// once the rank finalized), so every request is answered, even one
	// that arrives while the rank is stopping.
	go func() {
		for r := range reqs {
			if p.handleQuiesce(r) {
				continue
			}
			if p.isStopped() {
				p.replyStopped(l, r)
				continue
			}
			p.handleRollback(r)
			p.dispatchApp(l, r)
		}
	}()
}

// replyStopped answers a request that reaches a stopped Proc.
func (p *Proc) replyStopped(l snapc.AppLink, r snapc.AppRequest) {
	why := fmt.Sprintf("rank %d has stopped (finalized or aborted)", p.rank)
	switch r.Kind {
	case snapc.Query:
		p.replyApp(l, snapc.AppReply{ID: r.ID, Kind: snapc.Query, Reason: why})
	case snapc.Target:
		p.replyApp(l, snapc.AppReply{ID: r.ID, Kind: snapc.Target, Err: fmt.Sprintf("%s before safe point %d", why, r.Target)})
	}
}

func (p *Proc) dispatchApp(l snapc.AppLink, r snapc.AppRequest) {
	a := &p.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.handler != nil {
		a.handler(r)
		return
	}
	switch r.Kind {
	case snapc.Query:
		reason := fmt.Sprintf("rank %d: the program has no safe points (crs=self needs cr.SafePoint or cr.Checkpoint); it has not called package cr", p.rank)
		if a.finalizing {
			reason = fmt.Sprintf("rank %d is finalizing", p.rank)
		}
		p.replyApp(l, snapc.AppReply{ID: r.ID, Kind: snapc.Query, Reason: reason})
	case snapc.Target:
		if a.finalizing {
			p.replyApp(l, snapc.AppReply{ID: r.ID, Kind: snapc.Target, Err: fmt.Sprintf("rank %d finished before safe point %d", p.rank, r.Target)})
			return
		}
		a.held = append(a.held, r)
	case snapc.Cancel:
		a.held = slices.DeleteFunc(a.held, func(h snapc.AppRequest) bool {
			if h.ID != r.ID {
				return false
			}
			p.replyApp(l, snapc.AppReply{ID: h.ID, Kind: snapc.Target, Err: fmt.Sprintf("rank %d: checkpoint at safe point %d cancelled", p.rank, h.Target)})
			return true
		})
	}
}

func (p *Proc) replyApp(l snapc.AppLink, r snapc.AppReply) {
	ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
	defer cancel()
	if err := l.Reply(ctx, r); err != nil {
		p.log.Warn("could not answer the checkpoint coordinator", "request", r.ID, "err", err)
	}
}

// HandleApp hands the coordinators' requests to h, package cr's app
// coordinator, from now on, after the targets that arrived earlier and
// still wait. h runs on the library's responder goroutine, one request at
// a time and in order; it must not block for long. Only one handler may
// be installed.
func (p *Proc) HandleApp(h func(snapc.AppRequest)) error {
	a := &p.app
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.handler != nil {
		return errors.New("mpi: the checkpoint requests already have a handler")
	}
	a.handler = h
	held := a.held
	a.held = nil
	for _, r := range held {
		h(r)
	}
	return nil
}

// OnFinalize registers f to run when Finalize begins, before its barrier,
// on the goroutine that called Finalize: the app coordinator answers the
// checkpoint targets this rank can no longer reach.
func (p *Proc) OnFinalize(f func()) {
	a := &p.app
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onFinalize = append(a.onFinalize, f)
}

func (p *Proc) finalizeApp() {
	a := &p.app
	a.mu.Lock()
	a.finalizing = true
	held := a.held
	a.held = nil
	fs := a.onFinalize
	if l := p.AppLink(); l != nil {
		for _, r := range held {
			p.replyApp(l, snapc.AppReply{ID: r.ID, Kind: snapc.Target, Err: fmt.Sprintf("rank %d finished before safe point %d", p.rank, r.Target)})
		}
	}
	a.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// installCRCP installs the coordination protocol the rank's assembly
// selected. crcp=none installs nothing, so the message path stays free.
func (p *Proc) installCRCP() {
	c := p.modset.CRCP
	if c == nil {
		return
	}
	p.SetCRCP(c.Module)
	p.log.Debug("coordination protocol installed", "crcp", c.Info.Name)
}

// Modules returns the modules the rank selected (boot.AssembleApp):
// package cr takes its INC stack and CRS from them.
func (p *Proc) Modules() *boot.App { return p.modset }

// ReadLibraryState reads the library state of the local snapshot in dir
// (snapc.LibraryStateFile) after checking its size and checksum against
// the snapshot's metadata; an error names the file and what is wrong.
func ReadLibraryState(dir string) ([]byte, error) {
	meta, err := snapshot.ReadLocal(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, snapc.LibraryStateFile)
	i := slices.IndexFunc(meta.Files, func(f snapshot.FileRecord) bool { return f.Name == snapc.LibraryStateFile })
	if i < 0 {
		return nil, fmt.Errorf("%s: %w: not recorded in %s; the snapshot holds no library state", path, snapshot.ErrCorrupt, snapshot.LocalMetaFile)
	}
	rec := meta.Files[i]
	if rec.Compression != "" {
		return nil, fmt.Errorf("%s: stored compressed (%s); the runtime must decompress a snapshot before a rank restarts from it", path, rec.Compression)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h := snapshot.NewChecksum()
	h.Write(data)
	if sum := snapshot.FormatChecksum(h.Sum32()); int64(len(data)) != rec.Size || sum != rec.Checksum {
		return nil, fmt.Errorf("%s: %w: %d bytes with checksum %s, %s records %d bytes with %s",
			path, snapshot.ErrCorrupt, len(data), sum, snapshot.LocalMetaFile, rec.Size, rec.Checksum)
	}
	return data, nil
}

// --- replay of communicator creation at a restart ----------------------------

// replayState is the creation log of a restart that the program's own
// creation calls are matched against: the program re-runs the code that
// made its communicators, and gets the same ones back without any
// communication (the agreements were made before the checkpoint and their
// messages counted then).
type replayState struct {
	entries []LogEntry
	comms   []*Comm // per entry: the rebuilt communicator (nil: none)
	next    int
	done    bool
}

func (e LogEntry) call() string {
	switch e.Op {
	case OpSplit:
		return fmt.Sprintf("split of communicator %d (color %d, key %d)", e.Parent, e.Color, e.Key)
	default:
		return fmt.Sprintf("%v of communicator %d", e.Op, e.Parent)
	}
}

// replayCreate returns the communicator the saved log holds for a Dup or
// Split while a restart replays (ok), an error when the call is not the
// one the log holds next, and !ok when nothing is replayed.
func (p *Proc) replayCreate(want LogEntry) (*Comm, bool, error) {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	r := p.replay
	if r == nil || r.done || r.next >= len(r.entries) {
		return nil, false, nil
	}
	e := r.entries[r.next]
	if e.Op != want.Op || e.Parent != want.Parent || ((e.Op == OpSplit || e.Op == OpMerge) && (e.Color != want.Color || e.Key != want.Key)) {
		return nil, false, p.replayMismatch(want)
	}
	c := r.comms[r.next]
	r.next++
	return c, true, nil
}

func (p *Proc) replayMismatch(want LogEntry) error {
	r := p.replay
	return fmt.Errorf("mpi: %v: restart: communicator call %d differs from the saved creation log: the program now makes a %s, the log holds a %s; a restarted program must create and free its communicators in the same order as before its checkpoint",
		want.Op, r.next+1, want.call(), r.entries[r.next].call())
}

// replayFree frees c as the saved log says, during a replay.
func (p *Proc) replayFree(c *Comm) (bool, error) {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	r := p.replay
	if r == nil || r.done || r.next >= len(r.entries) {
		return false, nil
	}
	want := LogEntry{Op: OpFree, Parent: c.handle}
	if e := r.entries[r.next]; e.Op != OpFree || e.Parent != c.handle {
		return false, p.replayMismatch(want)
	}
	r.next++
	c.freed.Store(true)
	delete(p.comms, c.handle)
	return true, nil
}

// Replaying reports whether communicator calls are still matched against
// a restart's creation log.
func (p *Proc) Replaying() bool {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	return p.replay != nil && !p.replay.done
}

// EndReplay ends a restart's replay, at the program point of the
// checkpoint: the communicators the log frees beyond what the program
// replayed are freed, and later creations make new communicators as
// usual. Communicators made after the program's last replayed call and
// still alive at the checkpoint stay reachable with Proc.Comm.
func (p *Proc) EndReplay() {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	r := p.replay
	if r == nil || r.done {
		return
	}
	r.done = true
	for i := r.next; i < len(r.entries); i++ {
		if e := r.entries[i]; e.Op == OpFree {
			r.comms[i].freed.Store(true)
			delete(p.comms, e.Parent)
		}
	}
}
