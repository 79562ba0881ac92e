package full

import (
	"fmt"
	"strconv"
	"strings"
)

// ParamPauseAt is a test hook, not a feature: set to a pause point
// (optionally point:seq), it makes the process that reaches that point of
// a checkpoint stop there, so a test can kill a rank, a daemon, gompirun or
// gompi-checkpoint at a known step and check that earlier sequences stay
// intact. gompirun's pauses end when everyone who asked for the checkpoint
// is gone (so killing gompi-checkpoint lets the checkpoint finish by
// itself) or when the request fails; gompid's when the request is
// cancelled. Each pause is announced with a warning
// "snapc/full test hook: paused at <point> of seq <n>". The parameter
// exists only in builds with -tags gompitest (hooks_on.go), which the
// end-to-end tests make, and in this package's tests.
const ParamPauseAt = "snapc_full_test_pause_at"

// The pause points, in the order a checkpoint reaches them.
const (
	PauseQuery     = "query"     // gompirun: every rank answered the query
	PauseSeq       = "seq"       // gompirun: the sequence is recorded, uncommitted
	PauseWrite     = "write"     // a rank: halfway through writing its local snapshot (the test rank programs)
	PauseLocal     = "local"     // gompirun: every local snapshot is written
	PauseSync      = "sync"      // gompid: asked to sync, before syncing
	PauseCommit    = "commit"    // gompirun: every node synced, before the commit mark
	PauseCommitted = "committed" // gompirun: committed, before answering
)

// PausePoints lists the pause points in order.
var PausePoints = []string{PauseQuery, PauseSeq, PauseWrite, PauseLocal, PauseSync, PauseCommit, PauseCommitted}

// PausePoint is a parsed snapc_full_test_pause_at.
type PausePoint struct {
	Point string // "" = never pause
	Seq   int    // -1 = every sequence
}

// ParsePausePoint reads "", "point" or "point:seq".
func ParsePausePoint(s string) (PausePoint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return PausePoint{Seq: -1}, nil
	}
	point, seqText, hasSeq := strings.Cut(s, ":")
	p := PausePoint{Point: point, Seq: -1}
	known := false
	for _, k := range PausePoints {
		known = known || k == point
	}
	if !known {
		return PausePoint{}, fmt.Errorf("snapc/full: %s = %q: want one of %s, optionally followed by :<seq>", ParamPauseAt, s, strings.Join(PausePoints, ", "))
	}
	if hasSeq {
		n, err := strconv.Atoi(seqText)
		if err != nil || n < 0 {
			return PausePoint{}, fmt.Errorf("snapc/full: %s = %q: %q is not a sequence number", ParamPauseAt, s, seqText)
		}
		p.Seq = n
	}
	return p, nil
}

// At reports whether a checkpoint of seq pauses at point.
func (p PausePoint) At(point string, seq int) bool {
	return p.Point != "" && p.Point == point && (p.Seq < 0 || p.Seq == seq)
}

// String is the parameter's value.
func (p PausePoint) String() string {
	if p.Point == "" || p.Seq < 0 {
		return p.Point
	}
	return fmt.Sprintf("%s:%d", p.Point, p.Seq)
}

// PauseMessage is how a pause is announced.
func PauseMessage(point string, seq int) string {
	return fmt.Sprintf("snapc/full test hook: paused at %s of seq %d", point, seq)
}
