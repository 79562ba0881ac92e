package hnp

import (
	"gompi/frameworks/errmgr"
	pb "gompi/rte/control/proto"
)

// An episode is something the job goes through while it runs, beside its
// core life (launch, run, abort, finish): a recovery (recover.go), a
// migration (migrate.go), a checkpoint-and-terminate (term.go). The core
// asks the episodes under way about what happens to the job, and they
// answer what the core is to do. The interplay rules are these answers,
// and the core applies them here, in one place:
//
//   - a fault during a recovery joins it: the ErrMgr stack does not see it
//     (recovery.onFault absorbs it);
//   - a fault abandons a migration under way, and goes to the stack as any
//     other (migration.onFault);
//   - a moved rank's old process ending before its release abandons the
//     migration and is a fault of the rank; after it, no fault
//     (migration.onExit, job.releasedExited);
//   - a moved rank that cannot start on its new node is a fault, not an
//     abort (migration.onExit with no exit report);
//   - a lost node is a fault when ranks ran there, or when an episode
//     under way involves it (a migration moving ranks from or to it; a
//     recovery, which must not restart there); otherwise the job goes on
//     (onNodeLost);
//   - a rank asked to save and end (checkpoint-and-terminate) ending with
//     status 0 is no fault, and the job waits for the commit even once
//     every rank has ended (termination.onExit, holds);
//   - an abort, or a signal ending the job, ends a recovery: the job ends,
//     it is not restarted (recovery.onAbort);
//   - episodes do not overlap: a migration is refused during a recovery
//     or another migration (startMigration), a second recovery joins the
//     first (startRecovery).
type episode interface {
	// onFault: a fault of the job (not a prediction) is about to go to
	// the ErrMgr stack.
	onFault(j *job, f errmgr.Fault) verdict
	// onExit: rank r's process on node ended, as ex says; node may be one
	// the rank has left; ex is nil when the process could not be started.
	onExit(j *job, r *rankProc, node string, ex *pb.RankExited) verdict
	// onNodeLost: node d was lost.
	onNodeLost(j *job, d *dconn) verdict
	// onAbort: the job is ending by an abort or a signal.
	onAbort(j *job)
	// holds: the job must not end yet, even once every rank has ended.
	holds() bool
}

// verdict is what an episode tells the core to do about what happened.
type verdict uint8

const (
	goOn     verdict = 0         // as without the episode
	absorbed verdict = 1 << iota // the episode dealt with it: the core does no more
	isFault                      // it is a fault of the job, whatever the core would think
)

// episodes are the episodes under way, in the order they are asked.
func (j *job) episodes() []episode {
	var out []episode
	if j.recovery != nil {
		out = append(out, j.recovery)
	}
	if j.migration != nil {
		out = append(out, j.migration)
	}
	if j.term != nil {
		out = append(out, j.term)
	}
	if j.rollback != nil {
		out = append(out, j.rollback)
	}
	return out
}

// consult asks every episode under way, until one absorbs what happened,
// and returns their verdicts together.
func (j *job) consult(ask func(episode) verdict) verdict {
	var v verdict
	for _, ep := range j.episodes() {
		v |= ask(ep)
		if v&absorbed != 0 {
			break
		}
	}
	return v
}

// held reports whether an episode keeps the job from ending.
func (j *job) held() bool {
	for _, ep := range j.episodes() {
		if ep.holds() {
			return true
		}
	}
	return false
}

// aborting tells every episode that the job is ending.
func (j *job) aborting() {
	for _, ep := range j.episodes() {
		ep.onAbort(j)
	}
}
