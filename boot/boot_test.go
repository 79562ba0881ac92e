package boot

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/mca"
)

// isolate keeps the developer's own GOMPI_MCA_ variables out of a test.
func isolate(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, mca.EnvPrefix) {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	home := t.TempDir()
	t.Setenv("GOMPI_SYSCONFDIR", t.TempDir())
	return home
}

func TestLoadDefaults(t *testing.T) {
	home := isolate(t)
	p, err := Load(t.Context(), Options{Role: mca.RoleTool, Sources: mca.SourceOptions{Home: home}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Plugins.Plugins()) != 0 || len(p.Plugins.Errors()) != 0 {
		t.Errorf("plugins in an empty home: %v %v", p.Plugins.Plugins(), p.Plugins.Errors())
	}
	if p.Values.Bool("ft_cr_enabled") {
		t.Error("C/R on by default")
	}
}

func TestLoadRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		opts mca.SourceOptions
		want string
		is   error
	}{
		{name: "unknown env", env: map[string]string{"GOMPI_MCA_crs_bas_verbose": "1"}, want: "did you mean crs_base_verbose?", is: mca.ErrUnknownParam},
		{name: "bad type", opts: mca.SourceOptions{MCA: []string{"filem_raw_max_concurrent=lots"}}, want: "not an integer", is: mca.ErrBadValue},
		{name: "bad plugin param", opts: mca.SourceOptions{MCA: []string{"mca_base_component_plugin_timeout=soon"}}, want: "mca_base_component_plugin_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := isolate(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tt.opts.Home = home
			_, err := Load(t.Context(), Options{Sources: tt.opts})
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// A plugin binary dropped into $HOME/.gompi/plugins takes part in selection
// like a built-in and passes the same FileM conformance kit.
func TestPluginInHomeJoinsSelection(t *testing.T) {
	home := isolate(t)
	dir := filepath.Join(home, ".gompi", "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gompi-plugin-kit")
	if out, err := exec.Command("go", "build", "-o", bin, "gompi/testdata/plugins/gompi-plugin-kit").CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	p, err := Load(t.Context(), Options{Role: mca.RoleTool, Sources: mca.SourceOptions{Home: home, MCA: []string{"filem=plugraw"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var found bool
	for _, c := range p.Frameworks.FileM.Components() {
		if c.Name == "plugraw" {
			found = c.Origin == bin
		}
	}
	if !found {
		t.Fatalf("plugraw from %s not among %+v (errors %v)", bin, p.Frameworks.FileM.Components(), p.Plugins.Errors())
	}
	cand, err := p.Frameworks.FileM.SelectOne(context.Background(), p.Values, mca.RoleDaemon, p.Log)
	if err != nil {
		t.Fatal(err)
	}
	if cand.Info.Name != "plugraw" {
		t.Fatalf("selected %s", cand.Info.Name)
	}
	filemtest.Run(t, func(t *testing.T) filem.Module { return cand.Module })

	// A rank whose job's CRS is built in loads no plugin (only a CRS can
	// come from one in a rank); one whose CRS is the plugin's does.
	for _, tt := range []struct {
		crs  string
		want int
	}{{"self", 0}, {"plugnone", 1}} {
		cl := mca.Origin{Source: mca.SourceCommandLine}
		rank, err := Load(t.Context(), Options{Role: mca.RoleApp, Settings: []mca.Setting{{Name: "crs", Value: tt.crs, Origin: cl},
			{Name: "mca_base_component_path", Value: dir, Origin: cl}}})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		if rank.Plugins != nil {
			got = len(rank.Plugins.Plugins())
		}
		if got != tt.want {
			t.Errorf("a rank of a crs=%s job loaded %d plugins, want %d", tt.crs, got, tt.want)
		}
		rank.Close()
	}

	// With NoUserFiles the user's plugin folder is not searched.
	p2, err := Load(t.Context(), Options{Role: mca.RoleTool, Sources: mca.SourceOptions{Home: home, NoUserFiles: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if len(p2.Plugins.Plugins()) != 0 {
		t.Errorf("NoUserFiles still loaded %v", p2.Plugins.Plugins())
	}
}
