package crsim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"gompi/frameworks/snapc"
	"gompi/mca/queue"
)

// The daemon tree, modelled: vpid 0 is gompirun, vpids 1..D the daemons
// of the nodes, in node order. With radix r the children of vpid v are
// v*r+1 .. v*r+r (Open MPI's routed radix); flat is radix D, gompirun's
// children being every daemon. Each vpid is a goroutine with an inbox,
// and every message between two of them is one hop through the
// receiver's inbox and loop, so a message's latency grows with the depth
// it crosses. What travels is the real coordinators' traffic: gompirun's
// global SnapC coordinator (snapc full) sends each node's local
// coordinator (snapc full, in its daemon) its requests through Send, and
// the nodes' replies come back to its Deliver.
//
// Counting follows how Open MPI's SnapC moves them: a request of the
// global coordinator goes to every node at once, as an xcast down the
// tree, one message per tree edge it crosses however many nodes lie
// below (the model counts each edge once per request, though it carries
// the global's one Send per node along it); a reply is routed to gompirun
// hop by hop, one message per hop (no aggregation).

// topo is the tree's shape.
type topo struct{ radix, daemons int }

func (t topo) parent(v int) int { return (v - 1) / t.radix }

// depth is the number of hops from vpid v up to gompirun.
func (t topo) depth(v int) int {
	d := 0
	for ; v > 0; v = t.parent(v) {
		d++
	}
	return d
}

// maxDepth is the tree's depth.
func (t topo) maxDepth() int { return t.depth(t.daemons) }

// children is the number of vpids whose parent is v.
func (t topo) children(v int) int {
	lo := v*t.radix + 1
	return max(0, min(t.daemons, lo+t.radix-1)-lo+1)
}

// nextHop is the child of from on the way down to to, a vpid below it.
func (t topo) nextHop(from, to int) int {
	for t.parent(to) != from {
		to = t.parent(to)
	}
	return to
}

// msg is one message of the tree.
type msg struct {
	kind msgKind
	to   int // down: the destination vpid
	req  snapc.LocalRequest
	rep  snapc.LocalReply
	rank int            // app messages
	app  snapc.AppReply // appReply
	why  string         // appGone
}

type msgKind int

const (
	msgDown     msgKind = iota // a request of the global coordinator, on its way to vpid to
	msgUp                      // a node's reply, on its way to gompirun
	msgAppReply                // a rank's answer to its node's coordinator
	msgAppGone                 // a rank's coordinator is gone (it finalized)
)

// edge is one tree edge crossed by one request of the global coordinator.
type edge struct {
	id       uint64
	kind     snapc.LocalKind
	from, to int
}

// vpid is one process of the tree: gompirun (0, with the global
// coordinator) or a node's daemon (with its local coordinator).
type vpid struct {
	id    int
	inbox *queue.Queue[msg] // owned by loop
	local snapc.Local       // nil at vpid 0
}

// daemons is the tree of one simulated runtime.
type daemons struct {
	topo   topo
	vpids  []*vpid
	byNode map[string]int
	global snapc.Global // set once every vpid exists

	mu   sync.Mutex
	seen map[edge]bool // down edges crossed, by request

	down, up, app atomic.Uint64 // messages: down the tree, up it, between a daemon and its ranks
	wg            sync.WaitGroup
}

// send puts m on vpid v's inbox.
func (d *daemons) send(v int, m msg) { d.vpids[v].inbox.Put(m) }

// Send implements snapc.NodeLink: the request starts down the tree
// toward the node's daemon.
func (d *daemons) Send(node string, req snapc.LocalRequest) error {
	v, err := d.vpidOf(node)
	if err != nil {
		return err
	}
	d.forward(0, v, req)
	return nil
}

// Terminate implements snapc.NodeLink: the job's ranks end by themselves
// in this simulation.
func (d *daemons) Terminate() {}

func (d *daemons) vpidOf(node string) (int, error) {
	if v, ok := d.byNode[node]; ok {
		return v, nil
	}
	return 0, errors.New("crsim: no daemon for node " + node)
}

// forward moves req one hop down from vpid from toward vpid to, counting
// the edge once per request.
func (d *daemons) forward(from, to int, req snapc.LocalRequest) {
	next := d.topo.nextHop(from, to)
	e := edge{id: req.ID, kind: req.Kind, from: from, to: next}
	d.mu.Lock()
	if !d.seen[e] {
		d.seen[e] = true
		d.down.Add(1)
	}
	d.mu.Unlock()
	d.send(next, msg{kind: msgDown, to: to, req: req})
}

// reply moves a node's reply one hop up from vpid v.
func (d *daemons) reply(v int, r snapc.LocalReply) {
	d.up.Add(1)
	d.send(d.topo.parent(v), msg{kind: msgUp, rep: r})
}

// loop is vpid v's goroutine (owned by the daemons; it ends when its
// inbox is closed).
func (d *daemons) loop(v *vpid) {
	defer d.wg.Done()
	ctx := context.Background()
	for {
		m, err := v.inbox.Pop(ctx)
		if err != nil {
			return
		}
		switch m.kind {
		case msgDown:
			if m.to != v.id {
				d.forward(v.id, m.to, m.req)
				continue
			}
			d.handle(v, m.req)
		case msgUp:
			if v.id == 0 {
				d.global.Deliver(m.rep)
			} else {
				d.reply(v.id, m.rep)
			}
		case msgAppReply:
			v.local.AppReply(m.rank, m.app)
		case msgAppGone:
			v.local.AppGone(m.rank, m.why)
		}
	}
}

// handle runs a request at its node's daemon, as gompid does: Cancel,
// Done and Release at once and in order, the others on a goroutine of
// their own (they wait for the ranks), whose reply goes up the tree.
func (d *daemons) handle(v *vpid, req snapc.LocalRequest) {
	switch req.Kind {
	case snapc.LocalCancel, snapc.LocalDone, snapc.LocalRelease:
		v.local.Handle(context.Background(), req)
		return
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.reply(v.id, v.local.Handle(context.Background(), req))
	}()
}

// close ends every vpid's loop and waits for them and the requests they
// run.
func (d *daemons) close() {
	for _, v := range d.vpids {
		v.inbox.Close()
	}
	d.wg.Wait()
}
