package hnp

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// The interplay rules of the job's episodes (see episode.go), each fed
// through the harness: what was only tested end to end.

// twoNodesAndSpare: ranks 0, 1 on n1, 2, 3 on n2, nothing on n3.
var twoNodesAndSpare = mapping.Map{Nodes: []string{"n1", "n2", "n3"}, RankNode: []string{"n1", "n1", "n2", "n2"}}

// autor has the stack recover every fault from sequence 2, as errmgr
// autor does: through the job's Recover (the actor's evRecover).
func autor(h *harness) func(errmgr.Fault, *errmgr.Status) errmgr.Decision {
	return func(f errmgr.Fault, st *errmgr.Status) errmgr.Decision {
		reply := make(chan error, 1)
		h.step(evRecover{plan: errmgr.Recovery{Lost: []int{f.Rank}}, seq: 2, ref: h.global.ref, reply: reply})
		if err := <-reply; err != nil {
			st.Actions = append(st.Actions, "autor: failed: "+err.Error())
			return errmgr.Abort
		}
		st.Actions = append(st.Actions, "autor: recovering")
		return errmgr.Recovered
	}
}

// recovering starts a recovery: rank 1 fails with status 3 and autor
// recovers the job.
func recovering(h *harness) {
	h.decide = autor(h)
	h.exited("n1", 1, &pb.RankExited{ExitCode: 3})
	h.settle()
	if h.j.recovery == nil {
		h.t.Fatal("no recovery under way")
	}
}

// migrating starts moving rank 0 to n3; its save is queued, not run.
func migrating(h *harness) chan migrateOutcome {
	reply := make(chan migrateOutcome, 1)
	h.step(evMigrate{m: errmgr.Migration{Dest: map[int]string{0: "n3"}}, reply: reply})
	if h.j.migration == nil {
		h.t.Fatalf("migration refused: %v", (<-reply).err)
	}
	return reply
}

func abandoned(t *testing.T, reply chan migrateOutcome) {
	t.Helper()
	select {
	case o := <-reply:
		if !errors.Is(o.err, errmgr.ErrMigrationAbandoned) {
			t.Errorf("migration outcome %v, want %v", o.err, errmgr.ErrMigrationAbandoned)
		}
	default:
		t.Error("the migration was not abandoned")
	}
}

func termTarget(h *harness, kind snapc.LocalKind, nodes ...string) {
	for _, n := range nodes {
		errc := make(chan error, 1)
		h.step(evSnapcSend{node: n, req: snapc.LocalRequest{ID: 1, Kind: kind, Options: crs.Options{Term: true}}, errc: errc})
		if err := <-errc; err != nil {
			h.t.Fatal(err)
		}
	}
}

func TestInterplay(t *testing.T) {
	tests := []struct {
		name  string
		run   func(t *testing.T, h *harness)
		state jobState
		code  int
		// faults: the faults the stack saw, described.
		faults []string
		stderr []string
	}{
		{
			name: "a fault during a recovery joins it",
			run: func(t *testing.T, h *harness) {
				recovering(h)
				if k := kinds(h.sent("n1")); !slices.Equal(k, []string{"Kill"}) || !h.sentKill(t) {
					t.Errorf("n1 got %v, want a kill now", k)
				}
				if len(h.global.closed) != 1 {
					t.Errorf("SnapC closed %v, want once", h.global.closed)
				}
				h.step(evLaunchExit{node: "n2", err: errors.New("ssh: connection closed")})
				h.settle()
				rec := h.j.recovery
				if rec == nil || !slices.Equal(rec.plan.Lost, []int{1, 2, 3}) || !slices.Equal(rec.plan.LostNodes, []string{"n2"}) {
					t.Fatalf("recovery %+v, want ranks 1-3 and n2 lost", rec)
				}
				h.exited("n1", 0, &pb.RankExited{Killed: true, Signal: 9})
			},
			state:  jobFinishing,
			faults: []string{"rank 1"},
			stderr: []string{"autor: recovering", "it joins recovery 1 under way"},
		},
		{
			name: "an abort clears the recovery",
			run: func(t *testing.T, h *harness) {
				recovering(h)
				h.msg("n2", &pb.DaemonMessage{Body: &pb.DaemonMessage_Abort{Abort: &pb.RankAbort{Rank: 2, Code: 5, Message: "bad input"}}})
				if h.j.recovery != nil {
					t.Error("the recovery is still under way after an abort")
				}
			},
			state:  jobAborting,
			code:   5,
			faults: []string{"rank 1"},
			stderr: []string{"rank 2 on node n2 called abort with status 5: bad input"},
		},
		{
			name: "a node lost during a recovery joins it, even one that ran no ranks",
			run: func(t *testing.T, h *harness) {
				recovering(h)
				h.step(evLaunchExit{node: "n3", err: errors.New("ssh: connection closed")})
				h.settle()
				if rec := h.j.recovery; rec == nil || !slices.Equal(rec.plan.LostNodes, []string{"n3"}) {
					t.Fatalf("recovery %+v, want n3 lost (the restart must not go there)", rec)
				}
			},
			state:  jobRunning,
			faults: []string{"rank 1"},
			stderr: []string{"node n3 was lost: ssh: connection closed; it joins recovery 1 under way"},
		},
		{
			name: "a signal ending the job ends the recovery",
			run: func(t *testing.T, h *harness) {
				recovering(h)
				h.j.signal(syscall.SIGTERM)
				h.j.progress()
				if h.j.recovery != nil {
					t.Error("the recovery is still under way after SIGTERM: the job would be restarted")
				}
			},
			state:  jobAborting,
			code:   128 + 15,
			faults: []string{"rank 1"},
			stderr: []string{"caught signal 15"},
		},
		{
			name: "a rank that cannot be started aborts the job",
			run: func(t *testing.T, h *harness) {
				h.msg("n2", &pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: 2, Error: "exec: permission denied"}}})
			},
			state:  jobAborting,
			code:   1,
			stderr: []string{"rank 2 on node n2 could not be started: exec: permission denied"},
		},
		{
			name: "a moved rank that cannot be started on its new node is a fault",
			run: func(t *testing.T, h *harness) {
				migrating(h)
				h.settle()
				h.msg("n3", &pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: 0, Error: "no snapshot"}}})
				h.settle()
			},
			state:  jobAborting,
			code:   1,
			faults: []string{"rank 0"},
		},
		{
			name: "a fault before a migration's save is committed abandons it",
			run: func(t *testing.T, h *harness) {
				reply := migrating(h)
				h.exited("n2", 2, &pb.RankExited{ExitCode: 4})
				abandoned(t, reply)
				h.settle() // the save commits after all: nothing starts
				if k := kinds(h.sent("n3")); slices.Contains(k, "Launch") {
					t.Errorf("n3 got %v after the migration was abandoned, a launch among them", k)
				}
			},
			state:  jobAborting,
			code:   4,
			faults: []string{"rank 2"},
		},
		{
			name: "a moved rank's old process ending before its release is a fault",
			run: func(t *testing.T, h *harness) {
				reply := migrating(h)
				h.settle()
				if k := kinds(h.sent("n3")); !slices.Equal(k, []string{"Launch"}) {
					t.Fatalf("n3 got %v, want the moved rank's launch", k)
				}
				h.exited("n1", 0, &pb.RankExited{Signal: 9})
				abandoned(t, reply)
				h.settle()
			},
			state:  jobAborting,
			code:   128 + 9,
			faults: []string{"rank 0"},
		},
		{
			name: "a migration done: the old process's end is no fault",
			run: func(t *testing.T, h *harness) {
				h.global.seq = 5
				reply := migrating(h)
				h.settle()
				h.msg("n3", &pb.DaemonMessage{Body: &pb.DaemonMessage_Rejoin{Rejoin: &pb.RankData{Rank: 0}}})
				if o := <-reply; o.err != nil || o.res.Seq != 5 {
					t.Fatalf("migration outcome %+v", o)
				}
				if k := kinds(h.sent("n2")); !slices.Equal(k, []string{"MoveRanks"}) {
					t.Errorf("n2 got %v, want the new placement", k)
				}
				if len(h.global.released) != 1 || !slices.Equal(h.global.placed[0], []string{"n3", "n1", "n2", "n2"}) {
					t.Errorf("released %v, placed %v", h.global.released, h.global.placed)
				}
				h.exited("n1", 0, &pb.RankExited{})
				h.settle()
			},
			state:  jobRunning,
			stderr: []string{"migration: rank 0 n1 -> n3"},
		},
		{
			name: "a migration of ranks dumped from outside is released once they were restored, with no rejoin",
			run: func(t *testing.T, h *harness) {
				h.j.mods.CRSFromOutside = true
				h.global.seq = 5
				reply := migrating(h)
				h.settle()
				if k := kinds(h.sent("n3")); !slices.Equal(k, []string{"Launch"}) {
					t.Fatalf("n3 got %v, want the moved rank's launch", k)
				}
				h.msg("n3", &pb.DaemonMessage{Body: &pb.DaemonMessage_Rejoin{Rejoin: &pb.RankData{Rank: 0}}})
				if len(h.global.released) != 0 || h.j.migration == nil {
					t.Fatal("a rejoin released a migration whose ranks are restored from their dumps")
				}
				h.msg("n3", &pb.DaemonMessage{Body: &pb.DaemonMessage_Started{Started: &pb.RankStarted{Rank: 0, Pid: 42}}})
				select {
				case o := <-reply:
					if o.err != nil || o.res.Seq != 5 {
						t.Fatalf("migration outcome %+v", o)
					}
				default:
					t.Fatal("the migration is not over once its rank was restored")
				}
				if len(h.global.released) != 1 || !slices.Equal(h.global.released[0].Leave, []int{0}) || len(h.global.released[0].Peers) != 0 {
					t.Errorf("released %+v, want rank 0 leaving and no endpoints (the ranks exchange theirs as they resume)", h.global.released)
				}
				if k := kinds(h.sent("n3")); !slices.Equal(k, []string{"MoveRanks"}) {
					t.Errorf("n3 got %v, want the new placement and no rejoin table", k)
				}
				h.exited("n1", 0, &pb.RankExited{})
				h.settle()
			},
			state:  jobRunning,
			stderr: []string{"migration: rank 0 n1 -> n3"},
		},
		{
			name: "a lost node that runs no ranks is no fault",
			run: func(t *testing.T, h *harness) {
				h.step(evLaunchExit{node: "n3", err: errors.New("ssh: connection closed")})
				h.settle()
				if !slices.Equal(h.global.lost, []string{"n3"}) {
					t.Errorf("SnapC told of lost nodes %v", h.global.lost)
				}
			},
			state:  jobRunning,
			stderr: []string{"node n3 was lost (ssh: connection closed); it ran no ranks, the job goes on"},
		},
		{
			name: "a lost node a migration moves ranks to is a fault",
			run: func(t *testing.T, h *harness) {
				reply := migrating(h)
				h.step(evLaunchExit{node: "n3", err: errors.New("ssh: connection closed")})
				abandoned(t, reply)
				h.settle()
			},
			state:  jobAborting,
			code:   1,
			faults: []string{"node n3"},
		},
		{
			name: "checkpoint-and-terminate: ranks ending before the commit wait for it",
			run: func(t *testing.T, h *harness) {
				termTarget(h, snapc.LocalTarget, "n1", "n2")
				for r, n := range twoNodesAndSpare.RankNode {
					h.exited(n, r, &pb.RankExited{Connected: true})
				}
				if h.j.state != jobRunning || slices.Contains(kinds(h.sent("n1")), "Shutdown") {
					t.Fatalf("job %s before the commit", h.j.state)
				}
				h.step(evTerminate{})
				if k := kinds(h.sent("n1")); !slices.Contains(k, "Shutdown") {
					t.Errorf("n1 got %v after the commit, want shutdown", k)
				}
			},
			state: jobFinishing,
		},
		{
			name: "checkpoint-and-terminate withdrawn after ranks ended",
			run: func(t *testing.T, h *harness) {
				termTarget(h, snapc.LocalTarget, "n1", "n2")
				h.exited("n1", 0, &pb.RankExited{Connected: true})
				termTarget(h, snapc.LocalCancel, "n1", "n2")
				if h.j.held() {
					t.Error("still waiting for a withdrawn checkpoint-and-terminate")
				}
				h.exited("n1", 1, &pb.RankExited{Connected: true}) // no longer asked to end: a fault
				h.settle()
			},
			state:  jobAborting,
			code:   1,
			faults: []string{"rank 1"},
			stderr: []string{"the checkpoint-and-terminate failed after ranks had ended"},
		},
		{
			name: "fences complete without failed ranks",
			run: func(t *testing.T, h *harness) {
				h.msg("n1", fence(1, 0, 1))
				h.msg("n2", fence(1, 2))
				if k := kinds(h.sent("n1")); len(k) != 0 {
					t.Fatalf("n1 got %v before rank 3 contributed", k)
				}
				reply := make(chan error, 1)
				h.step(evNotifyFailed{ranks: []int{3}, why: "test", reply: reply})
				if err := <-reply; err != nil {
					t.Fatal(err)
				}
				// Both go to every daemon (once down each link of the
				// tree): n3, which runs no ranks, passes them on to
				// the daemons below it.
				for _, n := range []string{"n1", "n2", "n3"} {
					msgs := h.sent(n)
					if k := kinds(msgs); !slices.Equal(k, []string{"ProcFailed", "Fence"}) {
						t.Fatalf("%s got %v, want the failure, then the fence", n, k)
					}
					if f := msgs[1].GetFence(); f.Seq != 1 || len(f.Entries) != 3 || !slices.Equal(f.Failed, []int32{3}) || !msgs[1].All {
						t.Errorf("%s: fence %v", n, msgs[1])
					}
				}
				h.msg("n2", fence(1, 3)) // rank 3's late contribution: ignored
			},
			state: jobRunning,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, twoNodesAndSpare, true)
			tt.run(t, h)
			if h.j.state != tt.state || h.j.exitCode != tt.code {
				t.Errorf("job %s, status %d; want %s, %d", h.j.state, h.j.exitCode, tt.state, tt.code)
			}
			var faults []string
			for _, f := range h.faults {
				faults = append(faults, f.Describe())
			}
			if len(faults) != len(tt.faults) {
				t.Errorf("the stack saw faults %q, want %d like %q", faults, len(tt.faults), tt.faults)
			}
			for i := range min(len(faults), len(tt.faults)) {
				if !strings.Contains(faults[i], tt.faults[i]) {
					t.Errorf("fault %d is %q, want %q", i, faults[i], tt.faults[i])
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(h.stderr.String(), s) {
					t.Errorf("gompirun printed %q, want %q in it", h.stderr.String(), s)
				}
			}
		})
	}
}

func fence(seq uint64, ranks ...int32) *pb.DaemonMessage {
	c := &pb.FenceContribution{Seq: seq}
	for _, r := range ranks {
		c.Entries = append(c.Entries, &pb.RankData{Rank: r})
	}
	return &pb.DaemonMessage{Body: &pb.DaemonMessage_Fence{Fence: c}}
}

// sentKill: the last kill sent to n2 asked to kill at once (a recovery's).
func (h *harness) sentKill(t *testing.T) bool {
	msgs := h.sent("n2")
	return len(msgs) == 1 && msgs[0].GetKill().GetNow()
}

type evBogus struct{}

func (evBogus) jobEvent() {}

func TestUnknownEventPanics(t *testing.T) {
	h := newHarness(t, twoNodesAndSpare, false)
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "evBogus") {
			t.Errorf("panic %v, want one naming the event", p)
		}
	}()
	h.step(evBogus{})
}

// gompi-ps shows the states by these names.
func TestStateNames(t *testing.T) {
	h := newHarness(t, twoNodesAndSpare, false)
	h.msg("n1", &pb.DaemonMessage{Body: &pb.DaemonMessage_Phase{Phase: &pb.RankPhase{Rank: 0, Phase: pb.Phase_PHASE_CONNECTED}}})
	h.exited("n1", 1, &pb.RankExited{Killed: true})
	h.step(evLaunchExit{node: "n3", err: errors.New("gone")})
	st := h.j.status()
	var got []string
	got = append(got, st.State)
	for _, d := range st.Daemons {
		got = append(got, d.State)
	}
	for _, r := range st.Ranks {
		got = append(got, r.State)
	}
	want := []string{"running", "running", "running", "lost", "connected", "killed", "running", "running"}
	if !slices.Equal(got, want) {
		t.Errorf("states %q, want %q", got, want)
	}
	for s := range jobDone + 1 {
		if strings.Contains(s.String(), "state") {
			t.Errorf("job state %d has no name", s)
		}
	}
	for s := range daemonLost + 1 {
		if strings.Contains(s.String(), "state") {
			t.Errorf("daemon state %d has no name", s)
		}
	}
	for s := range rankLost + 1 {
		if strings.Contains(s.String(), "state") {
			t.Errorf("rank state %d has no name", s)
		}
	}
}

// A rank's cr.Checkpoint runs off the actor while a migration's rejoin
// replaces the job's placement on it: under -race this fails if the
// checkpoint's goroutine reads what the actor owns (it read j.m).
func TestRankCheckpointDuringMigration(t *testing.T) {
	h := newHarness(t, twoNodesAndSpare, true)
	h.global.seq = 5
	reply := migrating(h)
	h.settle()
	// The checkpoint runs on a goroutine of its own; its answer comes
	// back to the actor (this goroutine) as an event.
	answers := make(chan event, 1)
	h.j.p.spawn = func(work func() event, _ func(event) bool) { go func() { answers <- work() }() }
	h.step(evRankCheckpoint{node: "n2", m: &pb.RankCheckpoint{Id: 7, Rank: 2}})
	h.msg("n3", &pb.DaemonMessage{Body: &pb.DaemonMessage_Rejoin{Rejoin: &pb.RankData{Rank: 0}}})
	if o := <-reply; o.err != nil {
		t.Fatal(o.err)
	}
	select {
	case e := <-answers:
		h.step(e)
	case <-time.After(10 * time.Second):
		t.Fatal("the rank's checkpoint did not end")
	}
	for _, m := range h.sent("n2") {
		if d := m.GetRankCheckpointDone(); d != nil {
			if d.Id != 7 || d.Seq != 5 || d.Error != "" {
				t.Errorf("rank checkpoint done %v", d)
			}
			return
		}
	}
	t.Fatal("the rank's checkpoint was not answered")
}
