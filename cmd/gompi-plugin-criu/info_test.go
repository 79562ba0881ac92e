package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestInfoShowsCRIU installs gompi-info and this plugin as a build would
// (ROOT/bin, ROOT/lib/gompi, where mca_base_component_path's default
// looks) and runs gompi-info as a daemon with C/R on: as root it shows
// criu selected with the CRIU it uses, as another user skipped because
// it is not root.
func TestInfoShowsCRIU(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("CRIU needs root (and the test runs gompi-info as another user)")
	}
	root := install(t)
	for _, tc := range []struct {
		name string
		uid  uint32
		want string
	}{
		{"root", 0, "[selected: CRIU 4."},
		{"nobody", 65534, "[skipped: crs/criu: not root (uid 65534)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(root, "bin", "gompi-info"), "-am", "ft-enable-cr", "--role", "daemon", "--param", "crs", "criu")
			cmd.Env = append(os.Environ(), "HOME="+root)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid}}
			out, err := cmd.CombinedOutput()
			line := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "MCA crs: criu (") {
					line = l
				}
			}
			if err != nil || !strings.Contains(line, tc.want) || !strings.Contains(line, filepath.Join(root, "lib", "gompi", "gompi-plugin-criu")) {
				t.Errorf("gompi-info as uid %d: %v; criu's line %q, want it from the installed plugin with %q\n%s", tc.uid, err, line, tc.want, out)
			}
		})
	}
}
