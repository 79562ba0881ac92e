package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/mca"
	"gompi/mca/plugin"
)

var installed struct {
	sync.Mutex
	root string
	err  error
}

// install builds gompi-info and this plugin once per test run into a
// folder laid out as an installation (ROOT/bin, ROOT/lib/gompi, where
// mca_base_component_path's default looks), readable by any user, and
// returns ROOT (removed by TestMain).
func install(t *testing.T) string {
	t.Helper()
	installed.Lock()
	defer installed.Unlock()
	if installed.root == "" && installed.err == nil {
		installed.root, installed.err = build()
	}
	if installed.err != nil {
		t.Fatal(installed.err)
	}
	return installed.root
}

func build() (string, error) {
	root, err := os.MkdirTemp("", "gompi-install-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return root, err
	}
	for _, b := range []struct{ dir, pkg string }{{"bin", "gompi/cmd/gompi-info"}, {"lib/gompi", "gompi/cmd/gompi-plugin-criu"}} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(root, b.dir)+"/", b.pkg).CombinedOutput()
		if err != nil {
			return root, fmt.Errorf("go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return root, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if installed.root != "" {
		os.RemoveAll(installed.root)
	}
	os.Exit(code)
}

// TestConformanceThroughPlugin runs the CRS kit on crs=criu as gompid
// gets it from this binary: selected through the plugin bridge, as a
// daemon, provisioned with a daemon's host; its Restore's pipes cross as
// descriptors and the restored process, the plugin's child, is waited on
// through the bridge (the kit's restore-with-pipes).
func TestConformanceThroughPlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU needs root")
	}
	dir := filepath.Join(install(t), "lib", "gompi")
	params := mca.NewParams()
	plugin.RegisterParams(params)
	set := frameworks.New(params)
	host, err := plugin.LoadConfig(t.Context(), set, plugin.Config{Dirs: []string{dir}, Timeout: time.Minute, ShowLoadErrors: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	if errs := host.Errors(); len(errs) != 0 {
		t.Fatalf("load the plugin: %v", errs)
	}
	vals, err := params.ResolveSettings([]mca.Setting{{Name: mca.ParamCREnabled, Value: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	crstest.Run(t, func(t *testing.T) crs.Module {
		c, err := set.CRS.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
		if err != nil {
			t.Fatalf("select crs=criu through the plugin as root: %v", err)
		}
		t.Cleanup(func() { mca.Close(c.Module) })
		if c.Info.Name != "criu" || c.Info.Origin == mca.OriginBuiltin {
			t.Fatalf("selected %s from %s, want criu from the plugin", c.Info.Name, c.Info.Origin)
		}
		if ok, err := mca.Provision(t.Context(), c.Module, crs.Host{Daemon: &crs.DaemonHost{Node: "n0"}}); !ok || err != nil {
			t.Fatalf("provision: %v, %v; want a module that takes the Host", ok, err)
		}
		return c.Module
	}, crstest.Options{CanCheckpoint: true, Isolate: true})
}
