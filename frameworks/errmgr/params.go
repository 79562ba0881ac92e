package errmgr

import "gompi/mca"

// ParamMTBF is the mean time between failures the user expects of the
// job's nodes; with a measured checkpoint time C, gompi-info suggests the
// periodic checkpoint interval sqrt(2 * MTBF * C) (Young's formula,
// snapc.SuggestedInterval).
const ParamMTBF = "errmgr_base_mtbf"

// FrameworkParams are the framework-wide parameters of the ErrMgr,
// registered with the framework (frameworks.New). The heartbeat
// parameters are the PLM framework's (frameworks/plm).
func FrameworkParams() []mca.ParamSpec {
	return []mca.ParamSpec{
		{Name: ParamMTBF, Type: mca.Duration, Default: "0", Level: mca.LevelUser,
			Help: "Mean time between failures expected of the job's nodes (e.g. 24h); 0 = unknown. gompi-info suggests the checkpoint interval sqrt(2 * MTBF * C) from it"},
	}
}
