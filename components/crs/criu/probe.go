package crscriu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MinVersion is the oldest CRIU the component uses: 4.2.0, in CRIU's own
// numbering (major*10000 + minor*100 + sublevel). Debian 12's 3.17.1 fails
// `criu check` on this kernel and Debian 13's 4.1.1 hangs in every dump.
const MinVersion = 40200

// localCRIU is where scripts/install-criu.sh puts a project-local CRIU,
// relative to the repository (or install) root.
const localCRIU = ".local/criu/root/usr/sbin/criu"

// probeTimeout bounds each of `criu --version` and `criu check`.
const probeTimeout = time.Minute

// binary is a CRIU that passed the probe.
type binary struct {
	Path    string
	Version int    // as MinVersion
	Text    string // as `criu --version` prints it, "4.2.1"
}

func (b binary) String() string { return fmt.Sprintf("CRIU %s at %s", b.Text, b.Path) }

// probed caches each binary's probe, by path and the file's identity (a
// reinstalled CRIU is probed again): `criu check` takes about half a
// second, and gompi-info, gompirun and gompid probe at every selection.
var probed = struct {
	sync.Mutex
	m map[probeKey]probeResult
}{m: map[probeKey]probeResult{}}

type probeKey struct {
	path  string
	size  int64
	mtime time.Time
}

type probeResult struct {
	b   binary
	err error
}

// find returns the CRIU to use: explicit (crs_criu_binary) when set,
// else the first usable of the one on PATH and the project-local ones
// (candidates). The error says why each candidate is unusable.
func find(ctx context.Context, explicit string) (binary, error) {
	if explicit != "" {
		return probe(ctx, explicit)
	}
	var whys []string
	for _, path := range candidates() {
		b, err := probe(ctx, path)
		if err == nil {
			return b, nil
		}
		whys = append(whys, err.Error())
	}
	if len(whys) == 0 {
		return binary{}, fmt.Errorf("no criu on PATH nor in %s beside the installation or the source tree (bash scripts/install-criu.sh installs one; %s names another)", localCRIU, ParamBinary)
	}
	return binary{}, errors.New(strings.Join(whys, "; "))
}

// candidates are the CRIUs that exist, in order: PATH's criu, the
// project-local one beside the installation (in the executable's
// folder's parent, or its parent's parent: bin/gompid and
// lib/gompi/gompi-plugin-criu both find ROOT/.local/criu/...), then the
// one in the source tree the working directory is in (go test runs in a
// package's folder of a fresh clone, where the install script put it).
func candidates() []string {
	var out []string
	add := func(p string) {
		if p == "" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return
		}
		for _, q := range out {
			if same(p, q) {
				return
			}
		}
		out = append(out, p)
	}
	if p, err := exec.LookPath("criu"); err == nil {
		add(p)
	}
	if exe, err := os.Executable(); err == nil {
		up := filepath.Dir(filepath.Dir(exe))
		add(filepath.Join(up, localCRIU))
		add(filepath.Join(filepath.Dir(up), localCRIU))
	}
	if root := moduleRoot(); root != "" {
		add(filepath.Join(root, localCRIU))
	}
	return out
}

// same reports whether two paths name one file.
func same(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// moduleRoot is the closest folder at or above the working directory
// whose go.mod declares module gompi ("" when there is none).
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			line, _, _ := bytes.Cut(b, []byte("\n"))
			if strings.TrimSpace(string(line)) == "module gompi" {
				return dir
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// probe checks one binary (cached): its version and `criu check`.
func probe(ctx context.Context, path string) (binary, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return binary{}, fmt.Errorf("criu %s: %w", path, err)
	}
	key := probeKey{path: path, size: fi.Size(), mtime: fi.ModTime()}
	probed.Lock()
	r, ok := probed.m[key]
	probed.Unlock()
	if ok {
		return r.b, r.err
	}
	b, err := probeNow(ctx, path)
	if ctx.Err() == nil { // a cancelled probe says nothing about the binary
		probed.Lock()
		probed.m[key] = probeResult{b, err}
		probed.Unlock()
	}
	return b, err
}

func probeNow(ctx context.Context, path string) (binary, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return binary{}, fmt.Errorf("criu %s: --version: %w%s", path, err, tail(out, 3))
	}
	text, version, err := parseVersion(out)
	if err != nil {
		return binary{}, fmt.Errorf("criu %s: %w", path, err)
	}
	b := binary{Path: path, Version: version, Text: text}
	if version < MinVersion {
		return binary{}, fmt.Errorf("criu %s is version %s, older than 4.2 (bash scripts/install-criu.sh installs a newer one in the project; %s names another)", path, text, ParamBinary)
	}
	out, err = exec.CommandContext(ctx, path, "check").CombinedOutput()
	if err != nil {
		return binary{}, fmt.Errorf("%v: `criu check` fails (%w)%s", b, err, tail(out, 3))
	}
	return b, nil
}

// parseVersion reads `criu --version`: "Version: 4.2.1" (a sublevel of 0
// is left out: "Version: 4.2").
func parseVersion(out []byte) (string, int, error) {
	for _, line := range strings.Split(string(out), "\n") {
		text, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:")
		if !ok {
			continue
		}
		text = strings.TrimSpace(text)
		parts := strings.Split(text, ".")
		if len(parts) < 2 || len(parts) > 3 {
			break
		}
		v := 0
		for i, mult := range []int{10000, 100, 1} {
			n := 0
			if i < len(parts) {
				var err error
				if n, err = strconv.Atoi(parts[i]); err != nil || n < 0 || n > 99 && i > 0 {
					return "", 0, fmt.Errorf("--version printed %q: not a CRIU version", text)
				}
			}
			v += n * mult
		}
		return text, v, nil
	}
	return "", 0, fmt.Errorf("--version printed no \"Version: X.Y.Z\" line%s", tail(out, 3))
}

// tail is the last n non-empty lines of out, as ": line; line" for an
// error message ("" for none).
func tail(out []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return ""
	}
	return ": " + strings.Join(lines, "; ")
}
