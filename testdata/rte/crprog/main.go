// Command crprog is the checkpointable rank program of the runtime's
// checkpoint/restart tests. It implements the application side of SnapC
// minimally with the rank client alone (no package cr): its safe points
// are the turns of a counter; a query is answered with the count, a
// target is saved (app.state and library.state, written through
// snapshot.CreateFile, then snapshot_meta) when the count reaches it. A rank
// that answered a query does not pass its next safe point until the
// target (or the cancel) arrives, so the target, one past the highest
// count, is never behind it. A restarted rank reads its count back and
// goes on from there.
//
// Lines it prints, for the tests: "ready rank=R pid=P" once its
// coordinator is registered; "saved rank=R seq=S count=C" after each save;
// "restarted rank=R node=N ref=NAME seq=S count=C lib=L btl=B" on a
// restart; "checkpointed rank=R seq=S ref=NAME" when its own request (as
// cr.Checkpoint makes, -checkpoint-at) is committed;
// "paused at write of seq S" under the write test hook; with -show-secret,
// "secret rank=R pid=P hex=H environ=clean|HOLDS-IT" first, for the test that
// looks for the secrets where they must not be.
package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"gompi/components/snapc/full"
	"gompi/frameworks/crs"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/rte/rankclient"
)

type state struct {
	mu      sync.Mutex
	changed *sync.Cond
	count   uint64
	queried uint64 // request answered, its target not known yet
	pending *snapc.AppRequest
	// awaiting is the target of the rank's own checkpoint request: the
	// rank does not pass it until told to save there (or the request ends).
	awaiting uint64
}

// held reports whether the next safe point must wait.
func (st *state) held() bool {
	if st.queried != 0 {
		return true
	}
	return st.awaiting == st.count+1 && (st.pending == nil || st.pending.Target != st.awaiting)
}

func main() {
	var (
		steps      = flag.Uint64("steps", 0, "end (finalize) after this many safe points; 0 = run until ended")
		tick       = flag.Duration("tick", 2*time.Millisecond, "time between safe points")
		refuseRank = flag.Int("refuse-rank", -1, "this rank answers every query as not checkpointable")
		failRank   = flag.Int("fail-rank", -1, "this rank fails to save")
		payload    = flag.Int("payload", 4096, "bytes of app.state beyond its header")
		ckptAt     = flag.Uint64("checkpoint-at", 0, "at this safe point every rank asks for a checkpoint at the next one (cr.Checkpoint)")
		showSecret = flag.Bool("show-secret", false, "print the data-plane secret and whether the process's initial environment holds it")
	)
	flag.Parse()
	ctx := context.Background()
	c, err := rankclient.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crprog:", err)
		os.Exit(99)
	}
	r := c.Rank()
	if *showSecret {
		printSecret(r, c.Secret())
	}
	pause := full.PausePoint{Seq: -1}
	if c.Values().Has(full.ParamPauseAt) { // built with -tags gompitest
		if pause, err = full.ParsePausePoint(c.Values().String(full.ParamPauseAt)); err != nil {
			fmt.Fprintln(os.Stderr, "crprog:", err)
			os.Exit(98)
		}
	}
	st := &state{}
	st.changed = sync.NewCond(&st.mu)
	if info, ok := c.Restart(); ok {
		b, err := os.ReadFile(filepath.Join(info.Dir, "app.state"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "crprog: restart:", err)
			os.Exit(97)
		}
		var rank int
		if _, err := fmt.Sscanf(string(b), "rank %d count %d\n", &rank, &st.count); err != nil || rank != r {
			fmt.Fprintf(os.Stderr, "crprog: restart: app.state of rank %d holds %q\n", r, firstLine(b))
			os.Exit(96)
		}
		lib, err := c.RestoreState()
		if err != nil {
			fmt.Fprintln(os.Stderr, "crprog: restart:", err)
			os.Exit(95)
		}
		fmt.Printf("restarted rank=%d node=%s ref=%s seq=%d count=%d lib=%q btl=%s\n", r, c.Node(), info.Ref.Name, info.Seq, st.count, lib, c.Values().String("btl"))
	}
	reqs := c.Requests()
	go coordinate(ctx, c, st, reqs, r == *refuseRank)
	fmt.Printf("ready rank=%d pid=%d\n", r, os.Getpid())

	for {
		st.mu.Lock()
		for st.held() {
			st.changed.Wait()
		}
		st.count++
		n := st.count
		if n == st.awaiting {
			st.awaiting = 0
		}
		if *ckptAt > 0 && n == *ckptAt {
			st.awaiting = n + 1
			go func() {
				res, err := c.Checkpoint(ctx, n+1, crs.Options{})
				st.mu.Lock()
				if st.awaiting == n+1 {
					st.awaiting = 0
				}
				st.changed.Broadcast()
				st.mu.Unlock()
				if err != nil {
					fmt.Fprintf(os.Stderr, "crprog: rank %d: %v\n", r, err)
					return
				}
				fmt.Printf("checkpointed rank=%d seq=%d ref=%s\n", r, res.Seq, res.Ref)
			}()
		}
		var save *snapc.AppRequest
		if p := st.pending; p != nil && p.Target == n {
			save, st.pending = p, nil
		}
		st.mu.Unlock()
		if save != nil {
			saveAt(ctx, c, save, n, pause, r == *failRank, *payload)
			if save.Options.Term {
				break
			}
		}
		if *steps > 0 && n >= *steps {
			break
		}
		time.Sleep(*tick)
	}
	if err := c.Finalize(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "crprog: finalize:", err)
		os.Exit(94)
	}
}

// coordinate is the rank's application coordinator.
func coordinate(ctx context.Context, c *rankclient.Client, st *state, reqs <-chan snapc.AppRequest, refuse bool) {
	for req := range reqs {
		reply := snapc.AppReply{ID: req.ID, Kind: req.Kind}
		switch req.Kind {
		case snapc.Query:
			st.mu.Lock()
			reply.Count = st.count
			st.mu.Unlock()
			switch {
			case refuse:
				reply.Reason = fmt.Sprintf("rank %d is not checkpointable (test: -refuse-rank)", c.Rank())
			case req.Options.Stop:
				reply.Reason = "crs/self cannot stop a process after its checkpoint (--stop needs a system-level CRS)"
			default:
				reply.Checkpointable = true
				st.mu.Lock()
				st.queried = req.ID
				st.mu.Unlock()
			}
		case snapc.Target:
			st.mu.Lock()
			if st.queried == req.ID {
				st.queried = 0
				st.changed.Broadcast()
			}
			st.changed.Broadcast()
			if req.Target <= st.count {
				reply.Err = fmt.Sprintf("safe point %d already passed (at %d)", req.Target, st.count)
			} else {
				p := req
				st.pending = &p
				st.mu.Unlock()
				continue // answered once saved
			}
			st.mu.Unlock()
		case snapc.Cancel:
			st.mu.Lock()
			if st.pending != nil && st.pending.ID == req.ID {
				st.pending = nil
			}
			if st.queried == req.ID {
				st.queried = 0
				st.changed.Broadcast()
			}
			st.mu.Unlock()
			continue
		}
		if err := c.Reply(ctx, reply); err != nil {
			fmt.Fprintln(os.Stderr, "crprog: reply:", err)
		}
	}
}

// saveAt writes the rank's local snapshot into req.Dir and answers.
func saveAt(ctx context.Context, c *rankclient.Client, req *snapc.AppRequest, count uint64, pause full.PausePoint, fail bool, payload int) {
	r := c.Rank()
	reply := snapc.AppReply{ID: req.ID, Kind: snapc.Target}
	err := func() error {
		if fail {
			return fmt.Errorf("rank %d cannot save (test: -fail-rank)", r)
		}
		w, err := snapshot.CreateFile(req.Dir, "app.state")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "rank %d count %d\n", r, count)
		data := []byte(strings.Repeat(strconv.Itoa(r), payload))
		if pause.At(full.PauseWrite, req.Seq) {
			w.Write(data[:payload/2])
			fmt.Printf("%s\n", full.PauseMessage(full.PauseWrite, req.Seq))
			select {} // until the test kills something
		}
		w.Write(data)
		app, err := w.Close()
		if err != nil {
			return err
		}
		lw, err := snapshot.CreateFile(req.Dir, snapc.LibraryStateFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(lw, "library of rank %d at %d", r, count)
		lib, err := lw.Close()
		if err != nil {
			return err
		}
		return snapshot.WriteLocal(req.Dir, &snapshot.LocalMeta{Rank: r, PID: os.Getpid(), Node: c.Node(), CRS: "self",
			Created: time.Now(), Files: []snapshot.FileRecord{app, lib}})
	}()
	if err != nil {
		reply.Err = err.Error()
	} else {
		fmt.Printf("saved rank=%d seq=%d count=%d\n", r, req.Seq, count)
	}
	if err := c.Reply(ctx, reply); err != nil {
		fmt.Fprintln(os.Stderr, "crprog: reply:", err)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// printSecret prints the rank's data-plane secret, its pid (the test
// reads the process's environment for the control secret, which a rank
// does not show) and whether /proc/self/environ (the environment the
// process started with, which unsetenv does not change) holds the secret
// or the variable that once carried the job secret.
func printSecret(r int, secret []byte) {
	h := hex.EncodeToString(secret)
	env, err := os.ReadFile("/proc/self/environ")
	verdict := "clean"
	switch {
	case err != nil:
		verdict = "unreadable"
	case bytes.Contains(env, []byte(h)) || bytes.Contains(env, secret) || bytes.Contains(env, []byte("GOMPI_JOB_SECRET=")):
		verdict = "HOLDS-IT"
	}
	fmt.Printf("secret rank=%d pid=%d hex=%s environ=%s\n", r, os.Getpid(), h, verdict)
}
