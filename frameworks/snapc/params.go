package snapc

import (
	"fmt"
	"os"

	"gompi/mca"
)

// ParamGlobalDir is the folder holding the jobs' global snapshot
// references (Open MPI's snapc_base_global_snapshot_dir). SStore central
// writes every local snapshot straight into it, so every node must reach
// it at the same path.
const ParamGlobalDir = "snapc_base_global_snapshot_dir"

// FrameworkParams are the framework-wide parameters of SnapC, registered
// with the framework (frameworks.New).
func FrameworkParams() []mca.ParamSpec {
	return []mca.ParamSpec{
		{Name: ParamGlobalDir, Type: mca.String, Level: mca.LevelUser,
			Help: "Folder of the global snapshot references (gompi_global_snapshot_<job>.ckpt); empty means $HOME, as in Open MPI. Must be reachable at this path from every node with sstore=central"},
	}
}

// GlobalDir returns the global snapshot folder the parameters name: the
// value of snapc_base_global_snapshot_dir, or $HOME when it is empty.
func GlobalDir(vals *mca.Values) (string, error) {
	if vals.Has(ParamGlobalDir) {
		if d := vals.String(ParamGlobalDir); d != "" {
			return d, nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("snapc: no global snapshot folder: %s is empty and $HOME is not set: set %s", ParamGlobalDir, ParamGlobalDir)
	}
	return home, nil
}
