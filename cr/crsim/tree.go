package crsim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"gompi/frameworks/snapc"
	"gompi/mca/queue"
	"gompi/rte/routed"
)

// The daemon tree, modelled: its shape is the runtime's own (package
// rte/routed: gompirun the root, the daemons of the nodes in node order
// as a complete tree of the radix, Open MPI's routed radix; radix 0 the
// star, gompirun linked to every daemon). Each process of the tree is a
// goroutine with an inbox, and every message between two of them is one
// hop through the receiver's inbox and loop, so a message's latency grows
// with the depth it crosses. What travels is the real coordinators'
// traffic: gompirun's global SnapC coordinator (snapc full) sends each
// node's local coordinator (snapc full, in its daemon) its requests
// through Send, and the nodes' replies come back to its Deliver.
//
// Counting follows what gompirun does (rte/hnp): a SnapC request is
// addressed to one daemon and relayed by its ancestors, one message per
// hop; a reply is relayed to gompirun the same way (no aggregation).

// topo is the tree's shape, with the vpids of its processes: gompirun 0,
// the daemon of node nodeName(v) v.
type topo struct{ tree routed.Tree }

func newTopo(nodes, radix int) topo {
	names := make([]string, nodes)
	for i := range names {
		names[i] = nodeName(i + 1)
	}
	return topo{tree: routed.New(names, radix)}
}

func (t topo) name(v int) string {
	if v == 0 {
		return routed.Root
	}
	return nodeName(v)
}

// vpidOf is the vpid of a node name of the tree (Root: 0).
func vpidOf(name string) int {
	if name == routed.Root {
		return 0
	}
	var v int
	fmt.Sscanf(name, "n%d", &v)
	return v
}

func (t topo) parent(v int) int { return vpidOf(t.tree.Parent(t.name(v))) }

// maxDepth is the tree's depth.
func (t topo) maxDepth() int { return t.tree.Depth() }

// children is the number of daemons linked to vpid v below it.
func (t topo) children(v int) int { return len(t.tree.Children(t.name(v))) }

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

// forward moves req one hop down from vpid from toward vpid to.
func (d *daemons) forward(from, to int, req snapc.LocalRequest) {
	d.down.Add(1)
	d.send(d.topo.nextHop(from, to), msg{kind: msgDown, to: to, req: req})
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
