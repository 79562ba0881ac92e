package plugin

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	errmgrdefault "gompi/components/errmgr/default"
	"gompi/components/filem/raw"
	"gompi/components/sstore/central"
	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/frameworks/filem"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/plmtest"
	"gompi/frameworks/snapc"
	"gompi/frameworks/snapc/snapctest"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/sstoretest"
	"gompi/mca"
	pb "gompi/mca/plugin/proto"
)

// The conformance kits of the frameworks the bridge carries, run against
// built-in components served by a real plugin binary
// (testdata/plugins/gompi-plugin-builtins): what each kit checks in
// process must hold through the proxies. The FileM and CRS kits run in
// plugin_test.go.

const builtinsName = "gompi-plugin-builtins"

// loadBuiltins loads the builtins plugin alone (its components' names are
// the built-ins').
func loadBuiltins(t *testing.T) *loaded {
	t.Helper()
	l := load(t, install(t, buildNamed(t, builtinsName)), nil)
	if errs := l.host.Errors(); len(errs) != 0 {
		t.Fatalf("load errors: %v", errs)
	}
	return l
}

// component returns the proxy of the plugin's component framework/name,
// to hand a kit that selects the component itself.
func (l *loaded) component(t *testing.T, framework, name string) any {
	t.Helper()
	for _, p := range l.host.procs {
		for _, info := range p.comps {
			if info.Framework == framework && info.Name == name {
				pc := proxyComponent{p: p, info: info, ref: &pb.ComponentRef{Framework: framework, Name: name}}
				return adapters[framework].component(pc)
			}
		}
	}
	t.Fatalf("no plugin component %s/%s", framework, name)
	return nil
}

// selectWith selects framework fw's module with the settings added to the
// loaded values, in role, and closes it when the test ends.
func selectWith[M any](t *testing.T, l *loaded, fw *mca.Framework[M], role mca.Role, settings ...mca.Setting) M {
	t.Helper()
	vals, err := l.params.ResolveSettings(append(l.vals.All(), settings...))
	if err != nil {
		t.Fatal(err)
	}
	c, err := fw.SelectOne(t.Context(), vals, role, nil)
	if err != nil {
		t.Fatalf("select %s: %v", fw.Name(), err)
	}
	t.Cleanup(func() {
		if err := mca.Close(c.Module); err != nil {
			t.Errorf("close %s/%s: %v", fw.Name(), c.Info.Name, err)
		}
	})
	return c.Module
}

func TestSStoreConformance(t *testing.T) {
	l := loadBuiltins(t)
	cr := mca.Setting{Name: mca.ParamCREnabled, Value: "1"}
	t.Run("plugin/central", func(t *testing.T) {
		sstoretest.Run(t, func(t *testing.T) sstore.Module {
			return selectWith(t, l, l.set.SStore, mca.RoleDaemon, cr, mca.Setting{Name: sstore.Name, Value: "central"})
		}, sstoretest.Options{})
	})
	// stage drains through the host's FileM: every Put of the drain comes
	// back over the bridge to the host's raw module.
	t.Run("plugin/stage", func(t *testing.T) {
		sstoretest.Run(t, func(t *testing.T) sstore.Module {
			m := selectWith(t, l, l.set.SStore, mca.RoleDaemon, cr, mca.Setting{Name: sstore.Name, Value: "stage"},
				mca.Setting{Name: "sstore_stage_local_snapshot_dir", Value: t.TempDir()})
			fm := inProcess(t, func(s *frameworks.Set) *mca.Framework[filem.Module] { return s.FileM }, raw.New())
			ok, err := mca.Provision(t.Context(), m, sstore.Host{Node: "n1", FileM: fm})
			if !ok || err != nil {
				t.Fatalf("provision stage through the plugin: %v, %v; want a module that takes the Host", ok, err)
			}
			return m
		}, sstoretest.Options{})
	})
}

func TestErrMgrConformance(t *testing.T) {
	l := loadBuiltins(t)
	withDefault := func(set *frameworks.Set) { set.ErrMgr.Register(errmgrdefault.New()) }
	for _, tc := range []struct {
		name     string
		settings []mca.Setting
	}{
		// autor asks the job to Recover: the kit's job is a Recoverer, and
		// must be one in the plugin too.
		{"autor", []mca.Setting{{Name: "errmgr_autor_enable", Value: "1"}, {Name: mca.ParamCREnabled, Value: "1"}}},
		{"sustain", []mca.Setting{{Name: "errmgr_sustain_enable", Value: "1"}}},
	} {
		t.Run("plugin/"+tc.name, func(t *testing.T) {
			errmgrtest.Run(t, errmgrtest.Options{
				Component: l.component(t, errmgr.Name, tc.name).(mca.Component[errmgr.Module]),
				Settings:  tc.settings,
				Register:  withDefault,
			})
		})
	}
}

func TestPLMConformance(t *testing.T) {
	l := loadBuiltins(t)
	pid := l.host.Plugins()[0].PID
	plmtest.Run(t, plmtest.Options{
		Nodes:   []string{"n0", "n1"},
		Network: "unix",
		// The plugin starts the daemons: they are its children.
		Parent: func() int { return pid },
		NewModule: func(t *testing.T, daemon string) plm.Module {
			return selectWith(t, l, l.set.PLM, mca.RoleHNP, mca.Setting{Name: plm.Name, Value: "local"},
				mca.Setting{Name: "plm_local_daemon_path", Value: daemon})
		},
	})
}

// TestErrMgrJobCrosses: the job lent to a plugin's module implements what
// gompirun's does (here Recoverer), so autor in the plugin recovers from
// a crash by asking the host's job, as it does in process.
func TestErrMgrJobCrosses(t *testing.T) {
	l := loadBuiltins(t)
	m := selectWith(t, l, l.set.ErrMgr, mca.RoleHNP, mca.Setting{Name: errmgr.Name, Value: "autor"},
		mca.Setting{Name: mca.ParamCREnabled, Value: "1"})
	job := errmgrtest.NewJob()
	if ok, err := mca.Provision(t.Context(), m, errmgr.Host{Job: job}); !ok || err != nil {
		t.Fatalf("provision autor through the plugin: %v, %v; want a module that takes the Host", ok, err)
	}
	f := errmgrtest.Faults()[0]
	st := &errmgr.Status{Faults: []errmgr.Fault{f}}
	d, err := m.Handle(t.Context(), f, st)
	if err != nil || d != errmgr.Recovered || !job.Told() {
		t.Fatalf("autor through the plugin on %s: %v, %v (job told: %v), want Recovered by asking the job", f.Describe(), d, err, job.Told())
	}
	if len(st.Actions) == 0 || job.Violation() != nil {
		t.Errorf("actions %q, violation %v: want autor's action recorded and no violation", st.Actions, job.Violation())
	}
}

// TestCRSHostCrosses extended a plugin's CRS as gompid and as a rank
// would: a Restore's descriptors reach the process the CRS restores (it
// writes into the host's pipes, standard ones and from descriptor 3), the
// proxy is a crs.Restorer because the plugin's module is, and the
// restored process's Wait says how it ended; a rank's Save is called back
// by the CRS's Checkpoint.
func TestCRSHostCrosses(t *testing.T) {
	l := loadBuiltins(t)
	choose := mca.Setting{Name: crs.Name, Value: "restorer"}
	t.Run("daemon", func(t *testing.T) {
		m := selectWith(t, l, l.set.CRS, mca.RoleDaemon, choose)
		if ok, err := mca.Provision(t.Context(), m, crs.Host{Daemon: &crs.DaemonHost{Node: "n7"}}); !ok || err != nil {
			t.Fatalf("provision: %v, %v; want a module that takes the Host", ok, err)
		}
		r, ok := m.(crs.Restorer)
		if !ok {
			t.Fatalf("proxy %T is not a crs.Restorer, though the plugin's module is", m)
		}
		pipes := make([][2]*os.File, 3) // stdout, stderr, descriptor 3
		for i := range pipes {
			rd, wr, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			pipes[i] = [2]*os.File{rd, wr}
		}
		p, err := r.Restore(t.Context(), crs.RestoreRequest{Rank: 3, Dir: t.TempDir(),
			Stdout: pipes[0][1], Stderr: pipes[1][1], Files: []*os.File{pipes[2][1]}})
		for _, pp := range pipes {
			pp[1].Close() // the restored process has its own copies, the plugin closed its
		}
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		// Read to the end: once the process has exited, no copy of the
		// write ends is left open anywhere.
		for i, want := range []string{"out\n", "err\n", "restored rank 3 on n7\n"} {
			b, err := io.ReadAll(pipes[i][0])
			if err != nil || string(b) != want {
				t.Errorf("pipe %d: the restored process wrote %q (%v), want %q", i, b, err, want)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		exit, err := p.Wait(ctx)
		if err != nil || exit.Code != 7 || exit.Signal != 0 || p.PID() <= 0 {
			t.Errorf("restored pid %d: Wait = %+v, %v; want exit status 7", p.PID(), exit, err)
		}
		// A cancelled Restore sends no descriptors and says why.
		cancelled, cancelNow := context.WithCancel(t.Context())
		cancelNow()
		if _, err := r.Restore(cancelled, crs.RestoreRequest{Rank: 4, Stdout: pipes[0][0]}); !errors.Is(err, context.Canceled) {
			t.Errorf("restore with a cancelled context: %v, want context.Canceled", err)
		}
	})
	t.Run("rank", func(t *testing.T) {
		m := selectWith(t, l, l.set.CRS, mca.RoleApp, choose)
		save := func(ctx context.Context, dir string) ([]string, error) {
			return []string{"state"}, os.WriteFile(filepath.Join(dir, "state"), []byte("rank state"), 0o600)
		}
		if _, err := mca.Provision(t.Context(), m, crs.Host{Rank: &crs.RankHost{Save: save}}); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		res, err := m.Checkpoint(t.Context(), crs.CheckpointRequest{PID: os.Getpid(), Dir: dir})
		b, _ := os.ReadFile(filepath.Join(dir, "state"))
		if err != nil || len(res.Files) != 1 || res.Files[0] != "state" || string(b) != "rank state" {
			t.Errorf("checkpoint through the rank's Save: %+v, %v (file %q)", res, err, b)
		}
	})
}

// TestNoteCrosses: what a plugin's component notes when it answers a
// query reaches the host's probe, as gompi-info shows it.
func TestNoteCrosses(t *testing.T) {
	l := loadBuiltins(t)
	probes, err := l.set.CRS.Probe(t.Context(), l.choose(t, crs.Name, "restorer"), mca.RoleDaemon)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(probes, func(p mca.Probe) bool { return p.Info.Name == "restorer" })
	if i < 0 {
		t.Fatalf("no probe of restorer in %+v", probes)
	}
	if p := probes[i]; !p.Selected || !strings.HasPrefix(p.Note, "restores a shell, pid ") || strings.HasSuffix(p.Note, " "+strconv.Itoa(os.Getpid())) {
		t.Errorf("probe of restorer: %+v; want it selected, noting the plugin's pid", p)
	}
}

// TestSyncProgressCrosses: a Sync's progress callback, in the host's
// context, receives what the plugin's module reports.
func TestSyncProgressCrosses(t *testing.T) {
	l := loadBuiltins(t)
	m := selectWith(t, l, l.set.SStore, mca.RoleDaemon, mca.Setting{Name: sstore.Name, Value: "reporter"})
	if _, err := mca.Provision(t.Context(), m, sstore.Host{Node: "n3"}); err != nil {
		t.Fatal(err)
	}
	var got []sstore.Progress
	ctx := sstore.WithProgress(t.Context(), func(p sstore.Progress) { got = append(got, p) })
	if err := m.Sync(ctx, sstoretest.NewRef(t), 1, []sstore.Local{{Rank: 0}, {Rank: 1}}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Node != "n3" || got[0].Files != 2 || got[0].FilesDone != 2 {
		t.Errorf("progress reported %+v, want one report of 2 files done on n3", got)
	}
}

// TestCloseReleasesModule: a proxy module's Close closes the module in the
// plugin and releases its handle there (a later call is refused), while
// another module of the same component, from another Query, lives on.
func TestCloseReleasesModule(t *testing.T) {
	l := loadBuiltins(t)
	vals := func(t *testing.T) *mca.Values { return l.choose(t, plm.Name, "local") }
	a, err := l.set.PLM.SelectOne(t.Context(), vals(t), mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.set.PLM.SelectOne(t.Context(), vals(t), mca.RoleHNP, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mca.Close(b.Module)
	if err := mca.Close(a.Module); err != nil {
		t.Fatalf("close: %v", err)
	}
	_, err = a.Module.Launch(t.Context(), plm.Spec{Job: "x", Nodes: []string{"n0"}})
	if err == nil || !strings.Contains(err.Error(), "query it first") {
		t.Errorf("launch on a closed module: %v, want its handle unknown to the plugin", err)
	}
	if got := b.Module.Network(); got != "unix" {
		t.Errorf("the other module's Network after the first's Close: %q, want unix", got)
	}
	if err := mca.Close(a.Module); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestSnapCConformance runs the SnapC kit on snapc full in the plugin: its
// global and local coordinators live there, and reach the kit's job (its
// node link, the ranks' port, the node's store, central in this process)
// through the host objects lent back.
func TestSnapCConformance(t *testing.T) {
	l := loadBuiltins(t)
	cr := mca.Setting{Name: mca.ParamCREnabled, Value: "1"}
	vals, err := l.params.ResolveSettings(append(l.vals.All(), cr))
	if err != nil {
		t.Fatal(err)
	}
	snapctest.Run(t, func(t *testing.T) snapc.Module {
		return selectWith(t, l, l.set.SnapC, mca.RoleHNP, cr, mca.Setting{Name: snapc.Name, Value: "full"})
	}, snapctest.Options{Values: vals, Store: inProcessStore(t)})
}

// inProcessStore is central, selected in a set of its own with C/R on.
func inProcessStore(t *testing.T) sstore.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.SStore.Register(central.New())
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.SStore.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Module
}
