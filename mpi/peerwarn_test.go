package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// records is a slog.Handler keeping every record at WARN and above, with
// its attributes, so a test can ask what the library warned about.
type records struct {
	mu    sync.Mutex
	lines []string
	attrs []slog.Attr
	root  *records
}

func newRecords() *records {
	r := &records{}
	r.root = r
	return r
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level < slog.LevelWarn {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
	for _, a := range r.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s", a)
		return true
	})
	r.root.mu.Lock()
	r.root.lines = append(r.root.lines, b.String())
	r.root.mu.Unlock()
	return nil
}

func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	return &records{attrs: append(append([]slog.Attr(nil), r.attrs...), as...), root: r.root}
}

func (r *records) WithGroup(string) slog.Handler { return r }

// warned returns the warnings whose text holds what.
func (r *records) warned(what string) []string {
	r.root.mu.Lock()
	defer r.root.mu.Unlock()
	var out []string
	for _, l := range r.root.lines {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	return out
}

// allToAll has every rank send to and receive from every other, so
// connections exist both ways between all of them.
func allToAll(w *mpi.Comm) error {
	for q := 0; q < w.Size(); q++ {
		if q == w.Rank() {
			continue
		}
		b := make([]byte, 1)
		if _, err := w.Sendrecv([]byte{byte(w.Rank())}, q, 7, b, q, 7); err != nil {
			return err
		}
	}
	return nil
}

// TestFinalizeIsNoFailure: peers that finalize close their connections;
// no rank takes that for a failure and warns.
func TestFinalizeIsNoFailure(t *testing.T) {
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			for range 5 {
				log := newRecords()
				mpitest.RunWith(t, mpitest.Config{N: 4, BTL: btl, Log: slog.New(log)}, func(p *mpi.Proc) error {
					return allToAll(p.World())
				})
				if w := log.warned("peer failed"); len(w) > 0 {
					t.Fatalf("finalizing peers reported as failed:\n%s", strings.Join(w, "\n"))
				}
			}
		})
	}
}

// TestKilledPeerWarnsFinalizingDoNot: one rank is killed and the others
// finalize (the job runs on after a failure, as with errmgr sustain): the
// killed rank is reported failed, the finalizing ones are not.
func TestKilledPeerWarnsFinalizingDoNot(t *testing.T) {
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			for range 5 {
				log := newRecords()
				const killed = 3
				mpitest.RunWith(t, mpitest.Config{N: 4, BTL: btl, Log: slog.New(log), AllowFailures: true}, func(p *mpi.Proc) error {
					if err := allToAll(p.World()); err != nil {
						return err
					}
					if p.Rank() == killed {
						mpi.Kill(p)
						return nil
					}
					// Each survivor learns of the failure before it finalizes.
					_, err := p.World().Recv(nil, killed, 8)
					return err
				})
				var others []string
				for _, w := range log.warned("peer failed") {
					if !strings.Contains(w, fmt.Sprintf("peer=%d", killed)) {
						others = append(others, w)
					}
				}
				if len(others) > 0 {
					t.Fatalf("finalizing peers reported as failed:\n%s", strings.Join(others, "\n"))
				}
				if w := log.warned("peer failed"); len(w) == 0 {
					t.Fatalf("the killed rank %d was reported by no one", killed)
				}
			}
		})
	}
}

// TestMigratingIsNoFailure: a migration's release has the ranks that stay
// drop their connections to the moving rank's old process (PeersMoved)
// while that process still runs, about to end. The old process takes the
// closed connections for what they are, not for failed peers; nor do the
// others when it then ends.
func TestMigratingIsNoFailure(t *testing.T) {
	const noNewProcess = "the test starts no new process for the moved rank"
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			const mover = 2
			log := newRecords()
			left := make(chan struct{})
			saved := holdAll(3)
			cfg := mpitest.Config{N: 3, BTL: btl, Log: slog.New(log), AllowFailures: true}
			mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
				if err := allToAll(p.World()); err != nil {
					return err
				}
				// The safe point: every rank learns who moves.
				if err := p.PeersMoving([]int{mover}); err != nil {
					return err
				}
				// The release comes once every rank is there (all saved).
				saved()
				if p.Rank() != mover {
					// The release: the moved rank's new endpoint (here
					// the same address; nothing is sent to it).
					if err := p.PeersMoved(map[int]map[string]string{mover: mpi.ModexEntry(p, mover)}); err != nil {
						return err
					}
					<-left
					// No new process follows in this test: the runtime would
					// say so, and Finalize then does not wait for the rank.
					p.MarkFailed(mover, errors.New(noNewProcess))
					return nil
				}
				// The old process reads its peers' connections to their end,
				// then ends without a goodbye, as a moved rank's process does.
				select {
				case <-mpi.ReadersDone(p):
				case <-time.After(2 * time.Minute):
					return fmt.Errorf("the others' connections to the moving rank did not end")
				}
				mpi.Kill(p)
				close(left)
				return nil
			})
			var bad []string
			for _, w := range log.warned("peer failed") {
				if !strings.Contains(w, noNewProcess) {
					bad = append(bad, w)
				}
			}
			if len(bad) > 0 {
				t.Errorf("a migration reported as a failure:\n%s", strings.Join(bad, "\n"))
			}
		})
	}
}
