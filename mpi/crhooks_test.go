package mpi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

// link is a minimal snapc.AppLink: requests go in through a channel,
// replies are collected.
type link struct {
	reqs    chan snapc.AppRequest
	restart snapc.RestartInfo
	mu      sync.Mutex
	replies []snapc.AppReply
	got     chan struct{}
}

func newLink() *link {
	return &link{reqs: make(chan snapc.AppRequest, 16), got: make(chan struct{}, 16)}
}

func (l *link) Requests() <-chan snapc.AppRequest { return l.reqs }
func (l *link) Reply(_ context.Context, r snapc.AppReply) error {
	l.mu.Lock()
	l.replies = append(l.replies, r)
	l.mu.Unlock()
	l.got <- struct{}{}
	return nil
}
func (l *link) Checkpoint(context.Context, uint64, crs.Options) (snapc.Result, error) {
	return snapc.Result{}, errors.New("not in this test")
}
func (l *link) Restart() (snapc.RestartInfo, bool) { return l.restart, l.restart.Dir != "" }

func (l *link) wait(t testing.TB) snapc.AppReply {
	t.Helper()
	<-l.got
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replies[len(l.replies)-1]
}

type linked struct {
	mpi.Bootstrap
	*link
}

// TestAppResponder: before package cr takes the requests over, the
// library answers queries for itself, keeps targets for cr, and answers
// them with an error when the rank finalizes.
func TestAppResponder(t *testing.T) {
	l := newLink()
	// Sent before Init: found when the handler attaches.
	l.reqs <- snapc.AppRequest{ID: 1, Kind: snapc.Target, Target: 4, Dir: "/x"}
	var handled []snapc.AppRequest
	mpitest.RunWith(t, mpitest.Config{N: 1, BTL: "tcp", Wrap: func(_ int, b mpi.Bootstrap) mpi.Bootstrap { return linked{b, l} }}, func(p *mpi.Proc) error {
		if p.AppLink() == nil {
			return errors.New("no AppLink")
		}
		l.reqs <- snapc.AppRequest{ID: 2, Kind: snapc.Query}
		if r := l.wait(t); r.ID != 2 || r.Checkpointable || !strings.Contains(r.Reason, "rank 0: the program has no safe points (crs=self needs cr.SafePoint or cr.Checkpoint)") {
			return fmt.Errorf("query answered %+v", r)
		}
		l.reqs <- snapc.AppRequest{ID: 3, Kind: snapc.Target, Target: 9, Dir: "/y"}
		l.reqs <- snapc.AppRequest{ID: 3, Kind: snapc.Cancel}
		if r := l.wait(t); r.ID != 3 || r.Kind != snapc.Target || !strings.Contains(r.Err, "cancelled") {
			return fmt.Errorf("cancelled target answered %+v", r)
		}
		var mu sync.Mutex
		got := make(chan struct{})
		if err := p.HandleApp(func(r snapc.AppRequest) {
			mu.Lock()
			handled = append(handled, r)
			if len(handled) == 2 {
				close(got)
			}
			mu.Unlock()
		}); err != nil {
			return err
		}
		if err := p.HandleApp(func(snapc.AppRequest) {}); err == nil {
			return errors.New("a second handler was installed")
		}
		l.reqs <- snapc.AppRequest{ID: 5, Kind: snapc.Query}
		<-got
		return nil
	})
	if len(handled) != 2 || handled[0].ID != 1 || handled[1].ID != 5 {
		t.Fatalf("handler got %+v, want the early target then the query", handled)
	}

	// A target still waiting when the rank finalizes is answered.
	l = newLink()
	var ran bool
	mpitest.RunWith(t, mpitest.Config{N: 1, BTL: "tcp", Wrap: func(_ int, b mpi.Bootstrap) mpi.Bootstrap { return linked{b, l} }}, func(p *mpi.Proc) error {
		l.reqs <- snapc.AppRequest{ID: 7, Kind: snapc.Target, Target: 3, Dir: "/z"}
		l.reqs <- snapc.AppRequest{ID: 8, Kind: snapc.Query}
		l.wait(t) // the query's answer: the target was dispatched before it
		p.OnFinalize(func() { ran = !ran })
		return nil // the harness finalizes the rank
	})
	if !ran {
		t.Fatal("the finalize hook did not run once")
	}
	if r := l.wait(t); r.ID != 7 || !strings.Contains(r.Err, "rank 0 finished before safe point 3") {
		t.Fatalf("target at finalize answered %+v", r)
	}
}

// writeSnapshot writes a local snapshot holding state as library.state.
func writeSnapshot(t *testing.T, state []byte) string {
	t.Helper()
	dir := t.TempDir()
	w, err := snapshot.CreateFile(dir, snapc.LibraryStateFile)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(state)
	rec, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, CRS: "self", Created: time.Now(), Files: []snapshot.FileRecord{rec}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadLibraryState(t *testing.T) {
	dir := writeSnapshot(t, []byte("library bytes"))
	b, err := mpi.ReadLibraryState(dir)
	if err != nil || string(b) != "library bytes" {
		t.Fatalf("read %q, %v", b, err)
	}
	path := filepath.Join(dir, snapc.LibraryStateFile)
	tests := []struct {
		name string
		mut  func(t *testing.T, dir string)
		want string
	}{
		{"flipped byte", func(t *testing.T, dir string) { os.WriteFile(path, []byte("library bytez"), 0o644) }, "library.state: snapshot is damaged: 13 bytes with checksum"},
		{"truncated", func(t *testing.T, dir string) { os.WriteFile(path, []byte("library"), 0o644) }, "records 13 bytes"},
		{"missing", func(t *testing.T, dir string) { os.Remove(path) }, "no such file"},
		{"not recorded", func(t *testing.T, dir string) {
			snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, CRS: "self", Created: time.Now()})
		}, "not recorded in snapshot_meta"},
		{"compressed", func(t *testing.T, dir string) {
			snapshot.WriteLocal(dir, &snapshot.LocalMeta{Rank: 0, CRS: "self", Created: time.Now(), Files: []snapshot.FileRecord{{Name: snapc.LibraryStateFile, Checksum: "crc32c:00000000", Compression: "zstd", Stored: "x.zst"}}})
		}, "stored compressed (zstd)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir = writeSnapshot(t, []byte("library bytes"))
			path = filepath.Join(dir, snapc.LibraryStateFile)
			tt.mut(t, dir)
			if _, err := mpi.ReadLibraryState(dir); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("read: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRestartReplaysCreations: a rank restarted through its runtime link
// gets back the communicators it created before the checkpoint by making
// the same calls, without communicating; a different call is an error;
// creations after the replay make new communicators.
func TestRestartReplaysCreations(t *testing.T) {
	states := make([][]byte, 2)
	logs := make([][]mpi.LogEntry, 2)
	handles := make([][]uint64, 2)
	hold := holdAll(2)
	create := func(p *mpi.Proc) ([]*mpi.Comm, error) {
		w := p.World()
		a, err := w.Dup()
		if err != nil {
			return nil, err
		}
		tmp, err := a.Split(w.Rank(), 0)
		if err != nil {
			return nil, err
		}
		if err := tmp.Free(); err != nil {
			return nil, err
		}
		none, err := w.Split(mpi.Undefined, 0)
		if err != nil || none != nil {
			return nil, fmt.Errorf("split with no color: %v, %v", none, err)
		}
		b, err := a.Split(0, -w.Rank())
		return []*mpi.Comm{a, b}, err
	}
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		cs, err := create(p)
		if err != nil {
			return err
		}
		later, err := p.World().Dup() // made after the program's safe point
		if err != nil {
			return err
		}
		r := p.Rank()
		handles[r] = []uint64{cs[0].Handle(), cs[1].Handle(), later.Handle()}
		if err := cs[1].Send([]byte("in flight"), 1-cs[1].Rank(), 3); err != nil {
			return err
		}
		if err := quiesce(p); err != nil {
			return err
		}
		if states[r], err = p.SaveState(); err != nil {
			return err
		}
		logs[r] = p.CreationLog()
		hold()
		return nil
	})
	if t.Failed() {
		return
	}
	dirs := []string{writeSnapshot(t, states[0]), writeSnapshot(t, states[1])}
	restartCfg := func() mpitest.Config {
		return mpitest.Config{N: 2, BTL: "uds", Wrap: func(r int, b mpi.Bootstrap) mpi.Bootstrap {
			l := newLink()
			l.restart = snapc.RestartInfo{Seq: 0, Dir: dirs[r]}
			return linked{b, l}
		}}
	}
	mpitest.RunWith(t, restartCfg(), func(p *mpi.Proc) error {
		r := p.Rank()
		if !p.Replaying() {
			return errors.New("not replaying after a restart")
		}
		sent, _ := p.Counts()
		cs, err := create(p)
		if err != nil {
			return err
		}
		if s2, _ := p.Counts(); !reflect.DeepEqual(sent, s2) {
			return fmt.Errorf("the replay sent messages: %v then %v", sent, s2)
		}
		if cs[0].Handle() != handles[r][0] || cs[1].Handle() != handles[r][1] {
			return fmt.Errorf("replayed handles %d %d, saved %v", cs[0].Handle(), cs[1].Handle(), handles[r])
		}
		p.EndReplay()
		if p.Replaying() {
			return errors.New("still replaying after EndReplay")
		}
		if !reflect.DeepEqual(p.CreationLog(), logs[r]) {
			return fmt.Errorf("creation log %+v, saved %+v", p.CreationLog(), logs[r])
		}
		if later, ok := p.Comm(handles[r][2]); !ok || later.Size() != 2 {
			return errors.New("the communicator made after the replayed calls is gone")
		}
		buf := make([]byte, 16)
		st, err := cs[1].Recv(buf, 1-cs[1].Rank(), 3)
		if err != nil || string(buf[:st.Count]) != "in flight" {
			return fmt.Errorf("the message in flight: %q, %v", buf[:st.Count], err)
		}
		fresh, err := p.World().Dup()
		if err != nil {
			return err
		}
		if fresh.Handle() <= handles[r][2] {
			return fmt.Errorf("a new communicator reuses handle %d", fresh.Handle())
		}
		x := []int32{1}
		return mpi.Allreduce(cs[1], x, x, mpi.Sum)
	})
	errs := mpitest.Start(restartCfg(), func(p *mpi.Proc) error {
		_, err := p.World().Split(0, 0) // the log starts with a Dup
		return err
	})
	if len(errs) == 0 || !strings.Contains(errs[0].Error(), "the program now makes a split of communicator 0 (color 0, key 0), the log holds a dup of communicator 0") {
		t.Fatalf("a different creation at restart: %v", errs)
	}
}

// TestEpochExchange: exchanges of one checkpoint never match another's,
// and one given up half-way leaves nothing posted (the state can be saved)
// and its leftovers are dropped by the next.
func TestEpochExchange(t *testing.T) {
	mpitest.Run(t, 3, "tcp", func(p *mpi.Proc) error {
		r := p.Rank()
		if r == 2 {
			// Rank 2 takes no part in epoch 1: the others give up.
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := p.ChannelsAt(1).Exchange(ctx, []uint64{1, 1, 1})
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("exchange without rank 2: %v", err)
			}
			if _, err := p.SaveState(); err != nil {
				return fmt.Errorf("save after a cancelled exchange: %w", err)
			}
		}
		ch := p.ChannelsAt(2)
		for k := range 3 {
			mine := []uint64{uint64(10*r + k), uint64(10*r + k), uint64(10*r + k)}
			got, err := ch.Exchange(context.Background(), mine)
			if err != nil {
				return err
			}
			for q, v := range got {
				if v != uint64(10*q+k) {
					return fmt.Errorf("exchange %d: rank %d gave %d", k, q, v)
				}
			}
		}
		return p.World().Barrier()
	})
}

// TestWriterIdleAfterWait: a Wait on a large Isend returns with the
// peer's writer idle, so the state can be saved at once.
func TestWriterIdleAfterWait(t *testing.T) {
	mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
		w := p.World()
		big := bytes.Repeat([]byte("x"), 200<<10)
		for i := range 20 {
			if w.Rank() == 0 {
				rq, err := w.Isend(big, 1, i)
				if err != nil {
					return err
				}
				if _, err := rq.Wait(); err != nil {
					return err
				}
				if _, err := p.SaveState(); err != nil {
					return fmt.Errorf("save right after the Isend completed: %w", err)
				}
			} else if _, err := w.Recv(make([]byte, len(big)), 0, i); err != nil {
				return err
			}
		}
		return w.Barrier()
	})
}

// seeded is a protocol that wants the library's totals.
type seeded struct {
	countingCRCP
	sent, recvd []uint64
}

func (s *seeded) SeedCounts(sent, recvd []uint64) { s.sent, s.recvd = sent, recvd }

func TestSetCRCPSeedsCounts(t *testing.T) {
	// The counts must not move between Counts and SetCRCP, so the ranks take
	// turns: rank 1 waits for rank 0's "go" (sent once rank 0 has checked
	// and removed its protocol) and rank 0 waits for rank 1's "done". With
	// both checking at once, the other rank's next barrier message could
	// arrive in between.
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if p.CRCP() != nil {
			return errors.New("a protocol is installed with C/R off")
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		const tag = 7
		if w.Rank() == 1 {
			if _, err := w.Recv(make([]byte, 2), 0, tag); err != nil {
				return err
			}
		}
		s := &seeded{}
		sent, recvd := p.Counts()
		p.SetCRCP(s)
		if !reflect.DeepEqual(s.sent, sent) || !reflect.DeepEqual(s.recvd, recvd) {
			return fmt.Errorf("seeded %v %v, library %v %v", s.sent, s.recvd, sent, recvd)
		}
		if p.CRCP() != crcp.Module(s) {
			return errors.New("CRCP does not return the installed protocol")
		}
		p.SetCRCP(nil)
		if w.Rank() == 0 {
			if err := w.Send([]byte("go"), 1, tag); err != nil {
				return err
			}
			if _, err := w.Recv(make([]byte, 4), 1, tag); err != nil {
				return err
			}
		} else if err := w.Send([]byte("done"), 0, tag); err != nil {
			return err
		}
		return w.Barrier()
	})
}
