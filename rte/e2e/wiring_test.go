package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The checkpoint/restart components (snapc/full and sstore/central of the
// runtime, crs/self and crcp/bkmrk of the ranks) join the one built-in
// list (components/builtin, the lead's) when it is wired. Until then the
// binaries these tests build get them through a build overlay: a copy of
// builtin.go with their lines added. Once builtin.go registers them, no
// overlay is used.
var crComponents = []struct{ alias, path, framework string }{
	{"snapcfull", "gompi/components/snapc/full", "SnapC"},
	{"sstorecentral", "gompi/components/sstore/central", "SStore"},
	{"crsself", "gompi/components/crs/self", "CRS"},
	{"crcpbkmrk", "gompi/components/crcp/bkmrk", "CRCP"},
}

// crOverlay returns the path of a go build -overlay file, or "" when
// builtin.go registers every component already.
func crOverlay(modRoot, tmp string) (string, error) {
	path := filepath.Join(modRoot, "components", "builtin", "builtin.go")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	src := string(b)
	var imports, regs []string
	for _, c := range crComponents {
		if strings.Contains(src, `"`+c.path+`"`) {
			continue
		}
		if _, err := os.Stat(filepath.Join(modRoot, strings.TrimPrefix(c.path, "gompi/"))); err != nil {
			return "", fmt.Errorf("component %s: %w", c.path, err)
		}
		imports = append(imports, fmt.Sprintf("\t%s %q\n", c.alias, c.path))
		regs = append(regs, fmt.Sprintf("\tset.%s.Register(%s.New())\n", c.framework, c.alias))
	}
	if len(imports) == 0 {
		return "", nil
	}
	const imp, fn = "import (\n", "func Register(set *frameworks.Set) {\n"
	if !strings.Contains(src, imp) || !strings.Contains(src, fn) {
		return "", fmt.Errorf("%s changed shape (no %q or %q): register %v there, or adapt crOverlay", path, imp, fn, crComponents)
	}
	src = strings.Replace(src, imp, imp+strings.Join(imports, ""), 1)
	src = strings.Replace(src, fn, fn+strings.Join(regs, ""), 1)
	repl := filepath.Join(tmp, "builtin.go")
	if err := os.WriteFile(repl, []byte(src), 0o600); err != nil {
		return "", err
	}
	j, err := json.Marshal(map[string]map[string]string{"Replace": {path: repl}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(tmp, "overlay.json")
	return overlay, os.WriteFile(overlay, j, 0o600)
}
