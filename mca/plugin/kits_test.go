package plugin

import (
	"testing"

	errmgrdefault "gompi/components/errmgr/default"
	"gompi/components/filem/raw"
	"gompi/frameworks"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/errmgr/errmgrtest"
	"gompi/frameworks/filem"
	"gompi/frameworks/plm"
	"gompi/frameworks/plm/plmtest"
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
