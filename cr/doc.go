// Package cr is the application's checkpoint/restart API: a rank says
// where it may be saved (safe points) and what its state is, and the
// library saves it there, with its own state beside, when the job's
// coordinator asks (gompi-checkpoint) or when the program asks itself
// (Checkpoint). It is Open MPI's OMPI_CR extension and the self CRS
// callbacks, in Go.
//
// # A restartable program
//
//	mpi.Init(ctx)
//	cr.Protect("grid", &grid) // on a restart, filled from the snapshot here
//	cr.Protect("step", &step)
//	for ; step <= steps; step++ {
//		if err := cr.SafePoint(); err != nil { ... }
//		... one step: messages, collectives ...
//	}
//
// Run under `gompirun -am ft-enable-cr`, which selects crs=self and the
// bkmrk coordination protocol. gompi-checkpoint then saves every rank at
// the next safe point none of them has passed, and gompi-restart starts
// the program again: Init restores the library (messages that were in
// flight, sequence numbers, communicators), Protect fills the values, and
// the loop goes on from the step that was saved.
//
// A program that does not import cr needs none of this: under -am
// ft-enable-cr it gets crs=criu where CRIU can be used, and its ranks are
// saved from outside, wherever they are (package mpi quiesces them).
//
// # Under crs=criu
//
// A program that imports cr gets crs=self unless crs=criu is named. Named,
// the job's ranks are saved whole by their daemons, at any moment, and
// this package has nothing to save: Protect registers values that are
// never read back (the restored process has them in memory), OnCheckpoint
// and OnContinue callbacks never run, Requested never fires and SafePoint
// returns at once (no request reaches a safe point). Migrate moves the
// ranks as gompi-migrate does: they are saved whole where they are and go
// on inside the call on their new node. Checkpoint from inside is refused
// by the coordinator with what to do instead (gompi-checkpoint from
// outside); restarting such a snapshot brings the processes back, and
// Init does not run again.
//
// # Safe points
//
// Each rank counts its calls to SafePoint (and Checkpoint, QuiesceStart).
// A safe point is where the registered state describes the rank's
// progress and the rank has no operation in flight: no request it has not
// waited for, no non-blocking collective running (a checkpoint finding one
// fails on every rank, naming it). Every rank must reach its n-th safe
// point without any other rank passing its own n-th: the top of a loop
// whose iterations communicate is such a point.
//
// An asynchronous request asks every rank for its count (Query) and
// targets the largest plus one, so no rank is asked for a point it has
// passed. After answering, a rank holds at its next safe point until the
// target arrives (one round trip to the coordinator); a rank behind runs
// on to the target. At the target a rank runs the INC stack down
// (application callbacks, then the mpi layer: the coordination protocol
// exchanges per-peer message counts over the ranks' control tree, each
// count reaching only the rank it counts messages to, and drains the
// channels into the library), saves (crs=self: every Protect'ed value,
// encoded with encoding/gob, and the files of OnCheckpoint callbacks;
// then the library's state), writes the snapshot's metadata with sizes
// and checksums, agrees with the others that all saved (an AND over the
// same tree, which also keeps any rank from sending before every rank
// saved), answers the coordinator, and runs the stack up with CONTINUE.
// With --term the job then ends (each rank finalizes and exits with
// status 0); --stop is refused by crs=self.
//
// A Cancel from the coordinator (a rank cannot reach the target: it
// finished its loop, failed, or the user gave up) makes a rank that waits
// for its peers inside the checkpoint give up and run on unsaved (the
// stack goes up with ERROR). A rank that enters mpi.Finalize with a
// target it has not reached answers that target with an error, so the
// coordinator cancels the others.
//
// The count a rank answers is of the safe points it has passed: a rank
// waiting inside one (holding, or in Checkpoint for its own request) can
// still be saved there. The coordinator must follow every Query with a
// Target or a Cancel to every rank it queried: a rank holds at its next
// safe point until one arrives (or its Proc stops). Every Target is
// answered exactly once (saved, failed, or cancelled); a Cancel is not
// answered. A rank's Checkpoint request for the safe point another
// checkpoint in progress targets should join that checkpoint; when it
// runs after it instead, the ranks, still waiting at that point, are
// saved there again as they are.
//
// # Restart
//
// A restarted rank is the same program started again. mpi.Init reads the
// library state (after checking its size and checksum against the
// snapshot's metadata) and replays communicator creations: Dup, Split and
// Free calls made before the restart point get the communicators they got
// before, without communicating, and a call that differs from the saved
// log is an error naming the difference. Create communicators before the
// first safe point. Protect fills its value at once; OnRestart callbacks
// run when registered. The safe-point count resumes so that the first
// SafePoint reaching the saved count is the saved program point: there
// the stack goes up with RESTART and the replay ends. A value saved but
// not registered again by then is an error.
//
// # Restart on another rank count
//
// gompi-restart -np M restarts a job checkpointed on N ranks on M when
// every value it saved says how it is spread over the ranks:
// ProtectDistributed (a block-distributed array: this rank's run of a
// global array, any block sizes, halos not saved), ProtectReplicated
// (rank 0's value on every rank) or ProtectFunc (the program's own
// redistribution of the N saved values). A value registered with Protect,
// a file of an OnCheckpoint callback, drained messages or live
// program-made communicators in the library state make gompi-restart
// refuse, saying which. Each new rank starts with a fresh library state
// of a world of M, and reads from the old ranks' app.state files only the
// bytes of its own runs (repartition.go). On the same rank count these
// values restore as Protect restores them.
//
// Checkpoint, the collective form, returns the reference and sequence of
// the snapshot it took, and on a restart from it, the reference and
// sequence restarted from. Restart from inside a running job is not
// supported: use gompi-restart (or, for a failure, errmgr rollback: see
// below).
//
// # In-job rollback
//
// Under errmgr rollback a failure does not relaunch the job: the surviving
// ranks go back in place to a committed sequence, and only the lost ranks
// start anew from it. Go has no longjmp, so the program cooperates: its
// work runs inside Run, every library call the rollback interrupts (or
// that comes later, SafePoint included) returns an error wrapping
// ErrRolledBack, the program returns it, and Run restores the rank and
// calls the function again:
//
//	err := c.Run(ctx, func() error {
//		step := 1
//		c.Protect("grid", &grid) // filled from the sequence after a rollback
//		c.Protect("step", &step)
//		for ; step <= steps; step++ {
//			if err := c.SafePoint(); err != nil {
//				return err
//			}
//			... one step, returning its errors ...
//		}
//		return nil
//	})
//
// The restore is a restart's, in place: the library state of the
// sequence (messages drained then, sequence numbers; what was in flight
// since is discarded), Protect filling values, OnRestart callbacks, the
// safe-point count resuming at the saved point. The world communicator
// keeps its handle; communicators the program made are freed, and its
// creation calls, made again in the function, replay the saved log.
// Everything the function registers (Protect, OnCheckpoint, OnContinue)
// is registered again by it: Run forgets the earlier registrations.
//
// # Cost
//
// With checkpoint/restart off (no -am ft-enable-cr) the coordination
// protocol is not installed and the message path does not call it;
// SafePoint is a counter increment under a mutex.
package cr
