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

// ParamPeriodic makes gompirun checkpoint the job on an interval, which
// automatic recovery (errmgr autor) needs; 0 = off.
const ParamPeriodic = "snapc_base_periodic"

// FrameworkParams are the framework-wide parameters of SnapC, registered
// with the framework (frameworks.New).
func FrameworkParams() []mca.ParamSpec {
	return []mca.ParamSpec{
		{Name: ParamGlobalDir, Type: mca.String, Level: mca.LevelUser,
			Help: "Folder of the global snapshot references (gompi_global_snapshot_<job>.ckpt): a path (empty means $HOME, as in Open MPI), which every node must reach at that path with sstore=central, or a remote folder (sftp://[user@]host[:port]/dir, host:/dir) with sstore=stage and filem=sftp or rsh"},
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
