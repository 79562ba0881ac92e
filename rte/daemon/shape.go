package daemon

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"

	"gompi/frameworks/crs"
	"gompi/mca"
)

// The process shape of a job whose CRS checkpoints its ranks from outside
// (criu): each rank runs under the rank init (package rankinit), PID 1 of
// a PID namespace of its own and its session's leader, which gompid starts
// by re-executing itself; and gompid is a child subreaper, so a rank that
// CRIU restored (CRIU's child, not gompid's) comes back to gompid when
// CRIU lets it go, to be waited on like the ranks it started.
//
// No reaping of gompid's takes an exit it was not waiting for: every wait
// names its PID (exec.Cmd.Wait, proc.WaitExited, and proc.WaitAdopted for
// a process it did not start, which a CRS's crs.Process can use), and
// nothing waits for any child (-1). An orphan gompid adopted without
// knowing it (none is expected: a rank's orphans go to its init) stays a
// zombie until gompid exits.

// criuCRS is the name of the CRS whose ranks run under the rank init.
const criuCRS = "criu"

// rankShape says whether the ranks of a job run under the rank init (its
// CRS, in the job's settings, is criu), the binary that is the init
// (gompid itself), or why they cannot be started (not root: a new PID
// namespace needs CAP_SYS_ADMIN).
func rankShape(vals *mca.Values) (underInit bool, self string, err error) {
	return rankShapeAs(vals, os.Geteuid())
}

// rankShapeAs is rankShape for a gompid running as euid.
func rankShapeAs(vals *mca.Values, uid int) (underInit bool, self string, err error) {
	if vals == nil || vals.String(crs.Name) != criuCRS {
		return false, "", nil
	}
	if uid != 0 {
		return true, "", fmt.Errorf("the job's CRS is %s: its ranks run in PID namespaces of their own, which needs root, and gompid runs as uid %d", criuCRS, uid)
	}
	self, err = os.Executable()
	if err != nil {
		return true, "", fmt.Errorf("the rank init is gompid itself, whose path is unknown: %w", err)
	}
	return true, self, nil
}

// closeInheritedOnExec marks every descriptor gompid holds from 3 up
// close-on-exec. Everything Go opens already is; what is not was
// inherited from whoever started gompid (a shell, a test harness) and
// would reach every rank init and rank, be dumped with them and be
// restored with no other end. What gompid hands a child on purpose goes
// through exec.Cmd (ExtraFiles), which gives the child its own copy.
func closeInheritedOnExec() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("mark inherited descriptors close-on-exec: %w", err)
	}
	return nil
}

// becomeSubreaper makes gompid its descendants' reaper: a process whose
// parent dies (a rank CRIU restored, once CRIU exits) is reparented to
// gompid rather than to the machine's init.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	return nil
}
