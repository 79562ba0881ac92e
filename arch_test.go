// Package gompi_test holds the module's architecture tests: rules about the
// whole code base (which package may import which, how long a function may
// be) that no single package can check about itself. They live at the
// module's root, in a package of tests only, because they read every
// package of the module and belong to none of them; `go test .` runs them.
package gompi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "gompi"

// pkg is one package of the build graph as `go list -deps -json` reports
// it. Imports are those of the package's own (non-test) files: the rules
// are about what a program links, and a test may reach further than its
// package (a framework's test may run its kit over a component).
type pkg struct {
	ImportPath string
	Name       string
	Standard   bool
	Imports    []string
}

var (
	graphOnce sync.Once
	graph     map[string]*pkg
	ours      []string // the module's packages, sorted
	graphErr  error
)

// loadGraph lists the module's packages and everything they import, once
// per test binary. It runs the go command rather than linking a loader: the
// go command is what builds the binaries, so its answer is the truth.
func loadGraph(t *testing.T) (map[string]*pkg, []string) {
	t.Helper()
	graphOnce.Do(func() {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		cmd := exec.Command(goCmd, "list", "-deps", "-json=ImportPath,Name,Standard,Imports,Module", "./...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			graphErr = errors.New("go list: " + err.Error() + ": " + stderr.String())
			return
		}
		graph = map[string]*pkg{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				pkg
				Module *struct{ Path string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				graphErr = err
				return
			}
			q := p.pkg
			graph[q.ImportPath] = &q
			if p.Module != nil && p.Module.Path == module {
				ours = append(ours, q.ImportPath)
			}
		}
		slices.Sort(ours)
	})
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	if len(ours) < 20 {
		t.Fatalf("go list found only %d packages of module %s: %v", len(ours), module, ours)
	}
	return graph, ours
}

// under reports whether path is dir or a package below it ("gompi/rte"
// holds gompi/rte and gompi/rte/hnp, not gompi/rtex).
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

func underAny(path string, dirs ...string) bool {
	for _, d := range dirs {
		if under(path, d) {
			return true
		}
	}
	return false
}

// chains returns, for every package for which bad reports true that
// `from` depends on, the shortest import chain reaching it. It does not
// look past a bad package: what that one imports is its own offence.
func chains(g map[string]*pkg, from string, bad func(string) bool) [][]string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	var out [][]string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != from && bad(cur) {
			var c []string
			for p := cur; p != ""; p = prev[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			out = append(out, c)
			continue
		}
		if g[cur] == nil {
			continue
		}
		for _, imp := range g[cur].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return out
}

// forbidDeps fails for every package of the module matched by which whose
// dependency closure holds a package for which bad reports true, naming the
// offending import and the chain that reaches it.
func forbidDeps(t *testing.T, rule string, which func(string) bool, bad func(string) bool) {
	t.Helper()
	g, ours := loadGraph(t)
	matched := 0
	for _, p := range ours {
		if !which(p) {
			continue
		}
		matched++
		for _, c := range chains(g, p, bad) {
			t.Errorf("%s depends on %s (%s): %s", p, c[len(c)-1], strings.Join(c, " -> "), rule)
		}
	}
	if matched == 0 {
		t.Fatalf("rule %q matched no package: the layout changed under the test", rule)
	}
}

// forbidImports is forbidDeps for direct imports only.
func forbidImports(t *testing.T, rule string, which func(string) bool, bad func(from, imp string) bool) {
	t.Helper()
	g, ours := loadGraph(t)
	matched := 0
	for _, p := range ours {
		if !which(p) {
			continue
		}
		matched++
		for _, imp := range g[p].Imports {
			if bad(p, imp) {
				t.Errorf("%s imports %s: %s", p, imp, rule)
			}
		}
	}
	if matched == 0 {
		t.Fatalf("rule %q matched no package: the layout changed under the test", rule)
	}
}

const (
	mca        = module + "/mca"
	frameworks = module + "/frameworks"
	components = module + "/components"
	builtin    = module + "/components/builtin"
	rte        = module + "/rte"
	boot       = module + "/boot"
	cli        = module + "/cli"
	tools      = module + "/tools"
	cmdDir     = module + "/cmd"
	mpi        = module + "/mpi"
	cr         = module + "/cr"
	examples   = module + "/examples"
	capi       = module + "/capi"
)

// A framework is an interface and its shared code: it knows no component
// and nothing of the runtime or the processes that host it.
func TestFrameworksImportNoComponentsOrRuntime(t *testing.T) {
	forbidDeps(t, "frameworks never import components, the runtime (rte), start-up (boot), commands (cli, tools) or the application API",
		func(p string) bool { return under(p, frameworks) },
		func(d string) bool { return underAny(d, components, rte, boot, cli, tools, cmdDir, mpi, cr, capi) })
}

// mca is the component architecture beneath every framework.
func TestMCAImportsNoComponentsOrRuntime(t *testing.T) {
	forbidDeps(t, "mca never imports components, the runtime (rte), start-up (boot), commands (cli, tools) or the application API",
		func(p string) bool { return under(p, mca) },
		func(d string) bool { return underAny(d, components, rte, boot, cli, tools, cmdDir, mpi, cr, capi) })
}

// A user program links package mpi (and cr): none of the launcher's or the
// daemon's code, and none of the command-line libraries. The C interface
// (capi) is linked into C user programs.
func TestUserProgramsLinkNoDaemonOrCommands(t *testing.T) {
	forbidDeps(t, "a user program (mpi, cr, examples, capi) links neither gompirun's nor gompid's package, the tools, nor the command-line libraries",
		func(p string) bool { return underAny(p, mpi, cr, examples, capi) },
		func(d string) bool {
			return underAny(d, rte+"/daemon", rte+"/hnp", rte+"/jobs", cli, tools,
				"github.com/spf13/cobra", "github.com/spf13/pflag", "github.com/spf13/viper")
		})
}

// examples/plainheat and examples/traffic are the programs with no C/R
// code that transparent checkpoints are tested on: they must not reach
// package cr, even through the solver plainheat shares with heat.
func TestPlainProgramHasNoCRCode(t *testing.T) {
	forbidDeps(t, "examples/plainheat and examples/traffic have no checkpoint/restart code (no package cr)",
		func(p string) bool {
			return p == examples+"/plainheat" || p == examples+"/heat/solver" || p == examples+"/traffic"
		},
		func(d string) bool { return d == cr || under(d, cr) })
}

// componentOf returns the component a package belongs to
// (gompi/components/sstore/stage for .../stage/x), or "".
func componentOf(p string) string {
	rest, ok := strings.CutPrefix(p, components+"/")
	if !ok {
		return ""
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 {
		return components + "/" + parts[0]
	}
	return components + "/" + parts[0] + "/" + parts[1]
}

// A component reaches other components only through their framework's
// interface; components/builtin, the one list of built-ins, is the exception.
func TestComponentsImportOnlyFrameworks(t *testing.T) {
	forbidImports(t, "a component uses another only through its framework (components/builtin, the list, excepted)",
		func(p string) bool { return under(p, components) && p != builtin },
		func(from, imp string) bool { return under(imp, components) && componentOf(imp) != componentOf(from) })
	forbidDeps(t, "components never import the runtime (rte), start-up (boot), commands (cli, tools) or the application API",
		func(p string) bool { return under(p, components) && p != builtin },
		func(d string) bool { return underAny(d, rte, boot, cli, tools, cmdDir, mpi, cr, capi) })
}

// The runtime serves any program; it does not depend on the application
// API or on the tools.
func TestRuntimeImportsNoApplicationAPIOrTools(t *testing.T) {
	forbidDeps(t, "the runtime (rte) imports neither the application API (mpi, cr, capi) nor the tools",
		func(p string) bool { return under(p, rte) },
		func(d string) bool { return underAny(d, mpi, cr, capi, tools, cmdDir) })
}

// The C interface is a layer over the public application API, not a
// second MPI: its library code (capi and capi/libmpi) imports package mpi,
// package cr (gompi_cr.h is its C face) and the standard library only. Nothing outside capi links package capi itself
// (cgo, the C library's code); gompi-info reads capi/api, plain Go.
func TestCInterfaceOverThePublicAPI(t *testing.T) {
	g, _ := loadGraph(t)
	forbidImports(t, "capi and capi/libmpi import only packages mpi, cr, capi and the standard library",
		func(p string) bool { return p == capi || p == capi+"/libmpi" },
		func(_, imp string) bool {
			if q := g[imp]; q != nil && q.Standard || imp == "C" {
				return false
			}
			return imp != mpi && imp != cr && !under(imp, capi)
		})
	forbidImports(t, "outside capi nothing imports package capi (the C library)",
		func(p string) bool { return !under(p, capi) },
		func(_, imp string) bool { return imp == capi })
}

// The binaries are thin: each main package only hands over to the tools'
// logic, the runtime, start-up or the shared command-line plumbing. A
// plugin binary (pluginCommands) serves its components over the bridge
// instead.
func TestCommandsAreThin(t *testing.T) {
	g, _ := loadGraph(t)
	forbidImports(t, "cmd/ is thin: it imports only tools/, rte/, boot, cli, cobra and the standard library (a plugin binary: mca/plugin and its components)",
		func(p string) bool { return under(p, cmdDir) && pluginCommands[p] == nil },
		func(_, imp string) bool {
			if q := g[imp]; q != nil && q.Standard {
				return false
			}
			return !underAny(imp, tools, rte, boot, cli, "github.com/spf13/cobra")
		})
}

// The tools' logic is reached only from the binaries.
func TestToolsImportedOnlyByCommands(t *testing.T) {
	forbidImports(t, "only cmd/ imports tools/ (and a tool none of the others)",
		func(p string) bool { return !under(p, cmdDir) },
		func(from, imp string) bool { return under(imp, tools) && !under(from, imp) })
}

// pluginCommands are the plugin binaries under cmd/ and the components
// each serves: a component whose dependencies no rank may link (go-criu)
// reaches gompid and gompirun this way.
var pluginCommands = map[string][]string{
	cmdDir + "/gompi-plugin-criu": {components + "/crs/criu"},
}

// A plugin binary imports the bridge and the components it serves.
func TestPluginCommandsServeTheirComponents(t *testing.T) {
	g, _ := loadGraph(t)
	forbidImports(t, "a plugin binary imports only mca/plugin, its components (pluginCommands) and the standard library",
		func(p string) bool { return pluginCommands[p] != nil },
		func(from, imp string) bool {
			if q := g[imp]; q != nil && q.Standard {
				return false
			}
			return imp != mca+"/plugin" && !slices.Contains(pluginCommands[from], imp)
		})
}

// go-criu (CRIU's RPC client) is linked by the criu component and its
// plugin binary only: never by a rank (mpi, cr, examples), start-up,
// the built-in list, the runtime or the other commands.
func TestOnlyTheCRIUPluginLinksGoCRIU(t *testing.T) {
	forbidDeps(t, "only components/crs/criu and cmd/gompi-plugin-criu link go-criu",
		func(p string) bool {
			return p != components+"/crs/criu" && p != cmdDir+"/gompi-plugin-criu" && under(p, module)
		},
		func(d string) bool { return under(d, "github.com/checkpoint-restore/go-criu/v8") })
}

// componentImporters is every package outside components/ that may import
// a component, and the components it may import. Tests (_test.go files)
// are not in the graph and may reach any component; the packages below
// are the only non-test ones.
var componentImporters = map[string][]string{
	// The one assembly point: every process gets its components from the
	// list of built-ins, and from nowhere else.
	boot: {builtin},
	// Test support linked only into test binaries: mpitest starts
	// in-process jobs with the built-in list, as a real process would.
	mpi + "/mpitest": {builtin},
	// crtest stands in for the job's checkpoint coordinators in process
	// and registers the two components a rank's C/R path runs (self saves
	// the rank, bkmrk quiesces its channels) into the test's own sets.
	cr + "/crtest": {components + "/crcp/bkmrk", components + "/crs/self"},
	// crsim simulates a large job's checkpoints in process with the real
	// SnapC coordinators (full) over central storage.
	cr + "/crsim": {components + "/snapc/full", components + "/sstore/central"},
	// The plugin binaries (pluginCommands).
	cmdDir + "/gompi-plugin-criu": {components + "/crs/criu"},
}

// Components are chosen at one place: outside components/, only boot
// imports them (through components/builtin), so a tool or the runtime
// never depends on one component's private layout (tools/restart once
// imported sstore/stage for its node cache, now package snapshot's).
func TestComponentsImportedOnlyByAssembly(t *testing.T) {
	forbidImports(t, "outside components/, only boot imports a component (through components/builtin), besides the test-support packages listed in componentImporters",
		func(p string) bool { return !under(p, components) },
		func(from, imp string) bool {
			return under(imp, components) && !slices.Contains(componentImporters[from], imp)
		})
}
