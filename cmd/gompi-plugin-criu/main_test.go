package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"gompi/frameworks"
	"gompi/frameworks/crs"
	"gompi/frameworks/crs/crstest"
	"gompi/mca"
	"gompi/mca/plugin"
)

// TestConformanceThroughPlugin runs the CRS kit on crs=criu as gompid
// gets it from this binary: selected through the plugin bridge, as a
// daemon, provisioned with a daemon's host; its Restore's pipes cross as
// descriptors and the restored process, the plugin's child, is waited on
// through the bridge (the kit's restore-with-pipes).
func TestConformanceThroughPlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "gompi-plugin-criu"), "gompi/cmd/gompi-plugin-criu").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
