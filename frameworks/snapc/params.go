package snapc

import (
	"fmt"
	"math"
	"os"
	"time"

	"gompi/mca"
)

// ParamGlobalDir is the folder holding the jobs' global snapshot
// references (Open MPI's snapc_base_global_snapshot_dir). SStore central
// writes every local snapshot straight into it, so every node must reach
// it at the same path.
const ParamGlobalDir = "snapc_base_global_snapshot_dir"

// GlobalNone as ParamGlobalDir asks for no global storage at all: the
// snapshots stay on the nodes, protected by sstore stage's partner copies
// or XOR sets, and the reference's metadata with them (package snapshot's
// replica.go). Losing a node and its partner (or two nodes of one XOR
// set) loses the sequence.
const GlobalNone = "none"

// NoGlobal reports whether vals ask for no global storage (GlobalNone).
func NoGlobal(vals *mca.Values) bool {
	return vals != nil && vals.Has(ParamGlobalDir) && vals.String(ParamGlobalDir) == GlobalNone
}

// ParamPeriodic makes gompirun checkpoint the job on an interval, which
// automatic recovery (errmgr autor) needs; 0 = off.
const ParamPeriodic = "snapc_base_periodic"

// FrameworkParams are the framework-wide parameters of SnapC, registered
// with the framework (frameworks.New).
func FrameworkParams() []mca.ParamSpec {
	return []mca.ParamSpec{
		{Name: ParamGlobalDir, Type: mca.String, Level: mca.LevelUser,
			Help: "Folder of the global snapshot references (gompi_global_snapshot_<job>.ckpt): a path (empty means $HOME, as in Open MPI), which every node must reach at that path with sstore=central, or a remote folder (sftp://[user@]host[:port]/dir, host:/dir) with sstore=stage and filem=sftp or rsh; none: no global storage, with sstore=stage only: each node keeps its snapshots, its partner node a copy (sstore_stage_partner) or its XOR set the parity (sstore_stage_xor_set), and the reference's metadata goes to every node (<stage dir>/<node>/.refs). RISK: losing a node and its partner (or two nodes of one XOR set) loses the sequence"},
		{Name: ParamPeriodic, Type: mca.Duration, Default: "0", Level: mca.LevelUser,
			Help: "Checkpoint the job on this interval (a Go duration such as 10m, or seconds); 0 = only on request. gompi-info suggests an interval once errmgr_base_mtbf is set and a checkpoint was timed"},
	}
}

// SuggestedInterval is Young's first-order optimum checkpoint interval
// sqrt(2 * mtbf * c) for a checkpoint that takes c, or 0 when either is
// unknown (not positive).
func SuggestedInterval(mtbf, c time.Duration) time.Duration {
	if mtbf <= 0 || c <= 0 {
		return 0
	}
	return time.Duration(math.Sqrt(2*mtbf.Seconds()*c.Seconds()) * float64(time.Second))
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
