package hnp

import (
	"io"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
)

// ports are the job's ways out of its actor besides the daemons'
// mailboxes (dconn.box) and their launch processes (dconn.launch, the
// PLM's): the modules it was given, where it reports, its clock, and how
// it runs work off the actor. gompirun builds them with livePorts; the
// package's tests build their own, so that a test feeds the actor events
// and checks what it sent, without processes.
type ports struct {
	// stack handles every fault (the ErrMgr stack).
	stack *errmgr.Stack
	// snapc is the job's SnapC module; global its coordinator, nil unless
	// the module coordinates. Both are set before the servers start, then
	// read-only (handlers use them too).
	snapc  snapc.Module
	global snapc.Global
	// replicas closes the FileM of the metadata copies on the nodes
	// (replica.go), nil when the job makes none.
	replicas io.Closer
	// stderr gets gompirun's messages about the job (abort reports,
	// recoveries, migrations); the ranks' output goes its own way.
	stderr io.Writer
	// now is the job's clock.
	now func() time.Time
	// after arms a timer of the actor's loop (see timerKind).
	after func(time.Duration) <-chan time.Time
	// spawn runs work off the actor (a fault through the stack, a
	// migration's save, a launch process's wait) and hands the event it
	// returns, unless nil, to send.
	spawn func(work func() event, send func(event) bool)
	// later hands e to send after d.
	later func(d time.Duration, e event, send func(event) bool)
}

// livePorts are gompirun's: real time, goroutines.
func livePorts(stack *errmgr.Stack, stderr io.Writer) ports {
	return ports{
		stack:  stack,
		stderr: stderr,
		now:    time.Now,
		after:  time.After,
		spawn: func(work func() event, send func(event) bool) {
			go func() {
				if e := work(); e != nil {
					send(e)
				}
			}()
		},
		later: func(d time.Duration, e event, send func(event) bool) {
			time.AfterFunc(d, func() { send(e) })
		},
	}
}

// spawn runs work off the actor; its event comes back to the actor.
func (j *job) spawn(work func() event) { j.p.spawn(work, j.send) }

// timerKind names the actor's timers: each is armed (a channel) or not
// (nil), and its firing is handled by timerFired.
type timerKind int

const (
	timerLaunch timerKind = iota // the daemons must have attached
	timerAbort                   // killed ranks must have reported their end
	timerKill                    // ranks that outlived a forwarded signal are killed
	timerTerm                    // ranks outliving a checkpoint-and-terminate are killed
	timerFinish                  // daemons must have left
	nTimers
)

func (j *job) arm(k timerKind, d time.Duration) { j.timers[k] = j.p.after(d) }
