package restart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gompi/frameworks/sstore/snapshot"
)

// stagedJob reports whether the reference's job kept its snapshots with
// sstore stage: then each node's cache and the partner copies (package
// stage's partner level) may restart a sequence that global storage lost,
// and each node verifies what it reads.
func stagedJob(g *snapshot.GlobalMeta) bool {
	for _, p := range g.Params {
		if p.Name == "sstore" && strings.Contains(","+p.Value+",", ",stage,") {
			return true
		}
	}
	return false
}

// acceptNodeCopies turns a failed check of global storage (err, from
// VerifyAllWith) into a warning when the job staged its snapshots: the
// nodes' own and partner copies are then the restart's to find and
// verify, and a node with no intact copy fails the restart naming what it
// tried. A cancelled check stays an error.
func acceptNodeCopies(stderr io.Writer, point snapshot.RestartPoint, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || !stagedJob(point.Meta) {
		return err
	}
	fmt.Fprintf(stderr, "gompi-restart: warning: global storage cannot restart sequence %d of %s: %v\n"+
		"gompi-restart: the job staged its snapshots (sstore stage): each node restarts its ranks from its own cache or a partner copy, verified as it reads it\n",
		point.Seq.Seq, point.Ref.Name, err)
	return nil
}
