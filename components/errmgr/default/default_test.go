package errmgrdefault

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/mca"
)

func TestHandle(t *testing.T) {
	tests := []struct {
		name        string
		fault       errmgr.Fault
		before      []string // actions recorded above it
		want        errmgr.Decision
		wantReport  string
		wantActions []string
	}{
		{
			name:  "signaled",
			fault: errmgr.Fault{Kind: errmgr.ProcSignaled, Rank: 3, Node: "n1", Signal: syscall.SIGKILL},
			want:  errmgr.Abort, wantReport: "gompirun: job aborted: rank 3 on node n1 was killed by signal 9 (killed)",
			wantActions: []string{"default: aborted the job"},
		},
		{
			name:  "exited",
			fault: errmgr.Fault{Kind: errmgr.ProcExited, Rank: 0, Node: "n0", ExitCode: 2},
			want:  errmgr.Abort, wantReport: "gompirun: job aborted: rank 0 on node n0 exited with status 2",
			wantActions: []string{"default: aborted the job"},
		},
		{
			name:   "node lost after a failed recovery",
			fault:  errmgr.Fault{Kind: errmgr.NodeLost, Rank: -1, Node: "n2", Detail: "daemon stopped answering"},
			before: []string{"autor: failed: no committed checkpoint"},
			want:   errmgr.Abort,
			wantReport: "gompirun: job aborted: node n2 was lost: daemon stopped answering\n" +
				"gompirun: tried before aborting: autor: failed: no committed checkpoint",
			wantActions: []string{"autor: failed: no committed checkpoint", "default: aborted the job"},
		},
		{
			name:        "predicted",
			fault:       errmgr.Fault{Kind: errmgr.Predicted, Rank: -1, Node: "n3"},
			want:        errmgr.Pass,
			wantActions: []string{"default: noted the prediction (node n3 is predicted to fail); nothing to do until it fails"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := errmgr.Status{Faults: []errmgr.Fault{tt.fault}, Actions: slices.Clone(tt.before)}
			d, err := module{}.Handle(context.Background(), tt.fault, &st)
			if err != nil || d != tt.want {
				t.Fatalf("Handle = %v, %v; want %v, nil", d, err, tt.want)
			}
			if st.Report != tt.wantReport {
				t.Errorf("report %q, want %q", st.Report, tt.wantReport)
			}
			if !slices.Equal(st.Actions, tt.wantActions) {
				t.Errorf("actions %q, want %q", st.Actions, tt.wantActions)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.ErrMgr.Register(New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.ErrMgr.SelectOne(context.Background(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Name != "default" || c.Info.Framework != errmgr.Name || c.Info.Origin != "built-in" || c.Priority != Priority {
		t.Errorf("selected %+v at priority %d, want errmgr/default built-in at %d", c.Info, c.Priority, Priority)
	}
}

// recovering is a stand-in policy that recovers faults of rank 1 only and
// records what it saw.
type recovering struct{}

func (recovering) Handle(_ context.Context, f errmgr.Fault, st *errmgr.Status) (errmgr.Decision, error) {
	if f.Rank == 1 {
		st.Actions = append(st.Actions, "recovering: restarted rank 1")
		return errmgr.Recovered, nil
	}
	return errmgr.Pass, fmt.Errorf("recovering: rank %d: not mine", f.Rank)
}

type recoveringComponent struct{}

func (recoveringComponent) Info() mca.ComponentInfo {
	return mca.ComponentInfo{Framework: errmgr.Name, Name: "recovering", Priority: -5, Origin: "built-in"}
}

func (recoveringComponent) Query(_ context.Context, q mca.Query) (errmgr.Module, int, error) {
	return recovering{}, q.Priority, nil
}

// A stacked selection puts default last, even when its configured priority
// is the highest and the other policy's the lowest.
func TestStackedSelectionDefaultLast(t *testing.T) {
	params := mca.NewParams()
	set := frameworks.New(params)
	set.ErrMgr.Register(New())
	set.ErrMgr.Register(recoveringComponent{})
	vals, err := params.ResolveSettings([]mca.Setting{{Name: "errmgr_default_priority", Value: "50"}})
	if err != nil {
		t.Fatal(err)
	}
	cands, err := set.ErrMgr.Select(context.Background(), vals, mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 2 || cands[0].Info.Name != "default" {
		t.Fatalf("selection %+v: want both components, default first by priority", cands)
	}
	s := errmgr.FromCandidates(cands)
	if got, want := s.Names(), []string{"recovering", "default"}; !slices.Equal(got, want) {
		t.Fatalf("stack %q, want %q", got, want)
	}
	d, st := s.Handle(context.Background(), errmgr.Fault{Kind: errmgr.ProcExited, Rank: 1, Node: "n0", ExitCode: 1})
	if d != errmgr.Recovered || st.Report != "" {
		t.Errorf("rank 1: %v %+v, want Recovered by the policy above default", d, st)
	}
	d, st = s.Handle(context.Background(), errmgr.Fault{Kind: errmgr.ProcSignaled, Rank: 2, Node: "n1", Signal: syscall.SIGSEGV})
	want := "gompirun: job aborted: rank 2 on node n1 was killed by signal 11 (segmentation fault)\n" +
		"gompirun: tried before aborting: recovering: failed: recovering: rank 2: not mine"
	if d != errmgr.Abort || st.Report != want {
		t.Errorf("rank 2: %v, report %q; want Abort, %q", d, st.Report, want)
	}
	// With default excluded the stack's own fallback aborts.
	vals, err = params.ResolveSettings([]mca.Setting{{Name: "errmgr", Value: "^default"}})
	if err != nil {
		t.Fatal(err)
	}
	if cands, err = set.ErrMgr.Select(context.Background(), vals, mca.RoleHNP, nil); err != nil {
		t.Fatal(err)
	}
	if d, st := errmgr.FromCandidates(cands).Handle(context.Background(), errmgr.Fault{Kind: errmgr.ProcExited, Rank: 2, Node: "n1", ExitCode: 3}); d != errmgr.Abort ||
		st.Report != "gompirun: job aborted: rank 2 on node n1 exited with status 3\ngompirun: tried before aborting: recovering: failed: recovering: rank 2: not mine" {
		t.Errorf("without default: %v, report %q", d, st.Report)
	}
}

// TestConformance runs the ErrMgr kit on the component selected as
// gompirun selects it.
func TestConformance(t *testing.T) {
	errmgrtest.Run(t, errmgrtest.Options{
		Component: New(),
		Settings:  nil,
		Register:  nil,
	})
}
