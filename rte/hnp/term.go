package hnp

import (
	"fmt"

	"gompi/frameworks/errmgr"
	pb "gompi/rte/control/proto"
)

// Checkpoint-and-terminate (gompi-checkpoint --term), gompirun's part: the
// coordinator asks the ranks to save and end. Those ranks may end without
// finalizing, with status 0, and that is no fault; the job waits for the
// commit even once they have all ended, and once it is committed, ranks
// that did not end by themselves are ended after termGrace. A withdrawn
// request takes that back, and when ranks had already ended the job ends
// with status 1 (its last committed sequence is the one before).

// termination is the checkpoint-and-terminate episode: from the first
// request to save and end until one is withdrawn.
type termination struct {
	// pending: asked, not committed yet.
	pending bool
	// asked are the ranks asked to save and end.
	asked map[int]bool
}

// termTarget records a coordinator's request to ranks to save at a target:
// and to end, when term is set (a later request without it takes that
// back for those ranks).
func (j *job) termTarget(ranks []int, term bool) {
	if j.term == nil {
		if !term {
			return
		}
		j.term = &termination{asked: map[int]bool{}}
	}
	for _, r := range ranks {
		if term {
			j.term.asked[r] = true
		} else {
			delete(j.term.asked, r)
		}
	}
	j.term.pending = j.term.pending || term
}

// termCancel ends the episode when its request is withdrawn before the
// commit.
func (j *job) termCancel() {
	t := j.term
	if t == nil || !t.pending {
		return
	}
	j.term = nil
	for r := range t.asked {
		if j.ranks[r].done {
			fmt.Fprintln(j.p.stderr, "gompirun: the checkpoint-and-terminate failed after ranks had ended; the last committed sequence is the one before it")
			j.setExit(1)
			return
		}
	}
}

// terminate ends the ranks that did not end by themselves after a
// checkpoint-and-terminate, once termGrace has passed.
func (j *job) terminate() {
	if j.term != nil {
		j.term.pending = false
	}
	if j.state == jobRunning {
		j.log.Info("checkpoint-and-terminate committed: the ranks end")
		j.arm(timerTerm, termGrace)
	}
}

// onExit: a rank asked to save and end that ends with status 0 did what
// it was asked.
func (t *termination) onExit(_ *job, r *rankProc, node string, ex *pb.RankExited) verdict {
	if ex != nil && node == r.node && t.asked[r.rank] && ex.ExitCode == 0 && ex.Signal == 0 {
		return absorbed
	}
	return goOn
}

func (t *termination) holds() bool                        { return t.pending }
func (t *termination) onFault(*job, errmgr.Fault) verdict { return goOn }
func (t *termination) onNodeLost(*job, *dconn) verdict    { return goOn }
func (t *termination) onAbort(*job)                       {}

var _ episode = (*termination)(nil)
