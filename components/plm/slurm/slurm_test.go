package plmslurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gompi/frameworks"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/plmtest"
	"gompi/mca"
	"gompi/rte/slurmtest"
)

// cluster is the package's private Slurm cluster, started by TestMain
// when this machine can run one, with an allocation of two nodes whose
// job the process's environment names (as salloc's shell would).
var cluster *slurmtest.Cluster

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if slurmtest.Unavailable() != "" {
			return m.Run() // the tests that need the cluster skip or fail
		}
		dir, err := os.MkdirTemp("", "plmslurm")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx := context.Background()
		if cluster, err = slurmtest.Start(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cluster.Stop()
		// salloc --no-shell grants the allocation and leaves it to us:
		// the cluster's Stop cancels it.
		out, err := cluster.Command(ctx, "salloc", "--no-shell", "-k", "-N", "2", "-n", "2").CombinedOutput()
		id := regexp.MustCompile(`Granted job allocation (\d+)`).FindSubmatch(out)
		if err != nil || id == nil {
			fmt.Fprintf(os.Stderr, "salloc: %v: %s\n", err, out)
			return 1
		}
		os.Setenv("SLURM_CONF", cluster.Conf)
		os.Setenv("SLURM_JOB_ID", string(id[1]))
		return m.Run()
	}())
}

func queryModule(t *testing.T, role mca.Role, settings ...mca.Setting) (plm.Module, error) {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.PLM.Register(New())
	vals, err := params.ResolveSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := New().Query(t.Context(), mca.Query{Values: vals, Role: role, Priority: Priority, Note: func(string) {}})
	return m, err
}

// Outside an allocation the component skips itself, saying why; inside
// one it is selected even without srun, and its Launch then says what is
// missing instead of letting another launcher run every node here.
func TestQuery(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "")
	if _, err := queryModule(t, mca.RoleHNP); !errors.Is(err, mca.ErrSkip) || !strings.Contains(err.Error(), "SLURM_JOB_ID") {
		t.Errorf("outside an allocation: %v, want a skip naming SLURM_JOB_ID", err)
	}
	t.Setenv("SLURM_JOB_ID", "42")
	if _, err := queryModule(t, mca.RoleDaemon); !errors.Is(err, mca.ErrSkip) {
		t.Errorf("as a daemon: %v, want a skip", err)
	}
	m, err := queryModule(t, mca.RoleHNP, mca.Setting{Name: ParamSrun, Value: "no-such-srun"})
	if err != nil || m.Network() != "tcp" {
		t.Fatalf("inside an allocation without srun: %v, %v; want the module", m, err)
	}
	ds, err := m.Launch(t.Context(), plm.Spec{Job: "j", Nodes: []string{"n1"}})
	if !errors.Is(err, plm.ErrLaunch) || ds != nil || !strings.Contains(err.Error(), "no-such-srun") || !strings.Contains(err.Error(), "job 42") {
		t.Errorf("Launch without srun = %v, %v; want an error wrapping plm.ErrLaunch naming srun and the job", ds, err)
	}
}

// The step: one task per node on exactly the job's nodes, never ending
// the job or the step when a task fails, the user's arguments first so
// that gompi's win.
func TestSrunArgs(t *testing.T) {
	got := SrunArgs([]string{"--partition=p"}, []string{"n1", "n3"})
	for _, want := range []string{"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n1,n3", "--no-kill", "--kill-on-bad-exit=0", "--input=all"} {
		if !slices.Contains(got, want) {
			t.Errorf("srun arguments %q lack %s", got, want)
		}
	}
	if got[0] != "--partition=p" {
		t.Errorf("srun arguments %q: the user's must come first", got)
	}
	for _, a := range got {
		if a == "--kill-on-bad-exit" || a == "-K" {
			t.Errorf("srun arguments %q ask to kill the step when a daemon fails", got)
		}
	}
}

// One node's daemon is ended by a task of its own on that node, sharing
// it with the daemons' step, which must not end with it.
func TestKillArgs(t *testing.T) {
	got := KillArgs("42", "n2", 1234)
	for _, want := range []string{"--jobid=42", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist=n2", "--kill-on-bad-exit=0"} {
		if !slices.Contains(got, want) {
			t.Errorf("srun arguments %q lack %s", got, want)
		}
	}
	if got[len(got)-1] != "1234" || !strings.Contains(strings.Join(got, " "), `kill -TERM "$1"`) {
		t.Errorf("srun arguments %q do not signal pid 1234", got)
	}
}

// TestConformance runs the PLM kit on the private cluster: its daemons are
// tasks of one srun step on nodes n1 and n2 of the allocation.
func TestConformance(t *testing.T) {
	slurmtest.Need(t)
	plmtest.Run(t, plmtest.Options{
		Nodes:   []string{"n1", "n2"},
		Network: "tcp",
		NewModule: func(t *testing.T, daemon string) plm.Module {
			return plmtest.Select(t, New(), mca.Setting{Name: ParamDaemonPath, Value: daemon})
		},
	})
}
