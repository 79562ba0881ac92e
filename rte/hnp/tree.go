package hnp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/routed"
)

// gompirun's end of the daemon tree (package rte/routed): it is linked to
// the daemons at the top of the tree (direct ones), and reaches the
// others through them. A message to one daemon goes down the link of the
// top daemon above it, addressed to it (tell); a message to every daemon
// goes once down each link (broadcast), each daemon passing it on to its
// children. A deeper daemon's messages come up its parent's link, marked
// with its node (the origin), and its hello is relayed the same way, so
// every daemon attaches to the job whatever its depth. gompirun watches
// the heartbeats of its own links; each daemon watches its children and
// reports one it lost (ChildLost), which gompirun handles as a lost
// stream of its own. A daemon that must dial its parent without knowing
// where it listens (TCP) asks gompirun (Locate).

// direct reports whether gompirun's own link goes to d.
func (d *dconn) direct() bool { return d.via == d.node }

// linkStats is the traffic of the link from d's parent to d, as counted so
// far (gompirun's own links) or as its parent reported it when it left.
func (d *dconn) linkStats() *pb.LinkStats {
	if d.link != nil {
		return d.link.Stats()
	}
	return d.stats
}

// tell sends m to daemon d, down the link it is reached through.
func (j *job) tell(d *dconn, m *pb.HNPMessage) {
	if d.box == nil {
		return
	}
	j.downSeq++
	out := &pb.HNPMessage{Body: m.Body, To: []string{d.node}, Seq: j.downSeq}
	j.keep(out)
	d.box.put(out)
}

// broadcast sends m to every daemon: once down each of gompirun's links.
func (j *job) broadcast(m *pb.HNPMessage) {
	j.downSeq++
	out := &pb.HNPMessage{Body: m.Body, All: true, Seq: j.downSeq}
	if m.GetHeartbeat() == nil { // a beat lost with a parent needs no second sending
		j.keep(out)
	}
	for _, d := range j.daemons {
		if d.box != nil && d.direct() && (d.state == daemonRunning || d.state == daemonLeaving) {
			d.box.put(out)
		}
	}
}

// keep records a message sent down, to send again to a subtree that lost
// its parent, until every daemon acknowledged it (trimSent). Without
// heartbeats nothing acknowledges it: nothing is kept, and a subtree that
// attaches again gets only what is sent from then on.
func (j *job) keep(m *pb.HNPMessage) {
	if j.hbPeriod > 0 {
		j.sentLog = append(j.sentLog, m)
	}
}

// trimSent forgets the messages every daemon has received: those up to
// the lowest acknowledgement of gompirun's links (each covers its
// subtree), unless a subtree is cut off from its parent (its daemons
// have not acknowledged what they may miss).
func (j *job) trimSent() {
	ack := j.downSeq
	for _, d := range j.daemons {
		switch {
		case !d.orphaned.IsZero() || d.state == daemonBreaking:
			return
		case d.direct() && d.box != nil && d.state == daemonRunning:
			ack = min(ack, d.ack.Load())
		}
	}
	i := 0
	for i < len(j.sentLog) && j.sentLog[i].Seq <= ack {
		i++
	}
	j.sentLog = slices.Delete(j.sentLog, 0, i)
}

// orphan marks the daemons below d, which lost their route when d's link
// broke (and again once d is declared lost, which ends its process): they
// attach again elsewhere, or are lost too (watchOrphans).
func (j *job) orphan(d *dconn) {
	now := j.p.now()
	for _, o := range j.daemons {
		if o == d || o.state == daemonLost || o.state == daemonGone {
			continue
		}
		for p := o.parent; p != routed.Root; p = j.daemons[p].parent {
			if p == d.node {
				o.orphaned = now // again once d is lost: their time runs from then
				break
			}
			if j.daemons[p] == nil {
				break
			}
		}
	}
}

// watchOrphans declares lost the daemons that lost their parent and did
// not attach again within twice the heartbeat timeout.
func (j *job) watchOrphans(now time.Time) {
	if j.hbTimeout <= 0 {
		return
	}
	for _, n := range j.m.Nodes {
		d := j.daemons[n]
		if !d.orphaned.IsZero() && now.Sub(d.orphaned) > 2*j.hbTimeout && d.state == daemonRunning {
			j.nodeLost(d, fmt.Sprintf("its parent daemon was lost and it did not attach again within %v", 2*j.hbTimeout))
		}
	}
}

// evTell is a message for a daemon from work run off the actor.
type evTell struct {
	node string
	m    *pb.HNPMessage
}

func (j *job) tellEvent(e evTell) {
	if d := j.daemons[e.node]; d != nil {
		j.tell(d, e.m)
	}
}

// childLost handles a daemon's report that it lost one of its children:
// as the end of that child's stream, had it been linked to gompirun.
func (j *job) childLost(reporter string, m *pb.ChildLost) {
	d := j.daemons[m.GetNode()]
	if d == nil || d.parent != reporter {
		j.log.Warn("a daemon reported the loss of a node that is not its child", "node", reporter, "child", m.GetNode())
		return
	}
	detail := "its daemon's link to its parent daemon on " + reporter + " broke"
	if m.GetDetail() != "" {
		detail += " (" + m.GetDetail() + ")"
	}
	j.streamEnd(evStreamEnd{node: d.node, detail: detail})
}

// treeStats records what a leaving daemon counted on its children's links.
func (j *job) treeStats(node string, ts *pb.TreeStats) {
	for child, ls := range ts.GetChildren() {
		if d := j.daemons[child]; d != nil && d.parent == node {
			d.stats = ls
		}
	}
}

// evLocate is a daemon's Locate: where it is to attach.
type evLocate struct {
	node, lost string
	reply      chan locateAnswer
}

type locateAnswer struct {
	resp *pb.LocateResponse
	err  error
}

// locate answers where e.node attaches: to its parent in the tree once
// that parent has attached (the answer waits until then), or, when it
// lost its parent, to the nearest ancestor still running.
func (j *job) locate(e evLocate) {
	d := j.daemons[e.node]
	if d == nil {
		e.reply <- locateAnswer{err: status.Errorf(codes.NotFound, "hnp: node %q is not a node of job %s", e.node, j.id)}
		return
	}
	p := j.tree.Parent(e.node)
	if e.lost != "" {
		p = e.lost
	}
	for p != routed.Root {
		pd := j.daemons[p]
		if pd == nil {
			break
		}
		switch {
		case p == e.lost || pd.state == daemonLost || pd.state == daemonGone || pd.state == daemonBreaking:
			if pd.box == nil { // never attached: its parent is the launch shape's
				p = j.tree.Parent(p)
			} else {
				p = pd.parent
			}
			continue
		case pd.box == nil:
			j.locates[p] = append(j.locates[p], e) // answered when it attaches
			return
		}
		e.reply <- locateAnswer{resp: &pb.LocateResponse{Parent: p, Contacts: pd.contacts, Pin: pd.pin}}
		return
	}
	e.reply <- locateAnswer{resp: &pb.LocateResponse{}}
}

// located answers the daemons that waited for d to attach.
func (j *job) located(d *dconn) {
	waiting := j.locates[d.node]
	delete(j.locates, d.node)
	for _, e := range waiting {
		j.locate(e)
	}
}

// Locate serves a daemon's question: where to attach.
func (s *service) Locate(ctx context.Context, req *pb.LocateRequest) (*pb.LocateResponse, error) {
	j := s.job()
	reply := make(chan locateAnswer, 1)
	if !j.send(evLocate{node: req.GetNode(), lost: req.GetLost(), reply: reply}) {
		return nil, status.Error(codes.Unavailable, "hnp: the job is over")
	}
	select {
	case a := <-reply:
		return a.resp, a.err
	case <-j.done:
		return nil, status.Error(codes.Unavailable, "hnp: the job is over")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// reattach takes back a daemon that lost its parent, with the daemons
// below it, on the link its new hello came (the link of the ancestor it
// attached to, or its own): gompirun sends the subtree again what it sent
// it after the daemon's last message, then asks it for its state again.
func (j *job) reattach(e evAttach) *dconn {
	h := e.hello
	d := j.daemons[h.Node]
	if d == nil || d.box == nil || d.state == daemonLost || d.state == daemonGone {
		j.log.Warn("refused a daemon attaching again", "node", h.Node)
		return nil
	}
	moved := []string{d.node}
	for _, n := range h.Subtree {
		if o := j.daemons[n]; o != nil && o.state != daemonLost && o.state != daemonGone {
			moved = append(moved, n)
		}
	}
	for _, n := range moved {
		o := j.daemons[n]
		o.via, o.box, o.orphaned = e.via, e.box, time.Time{}
	}
	d.parent, d.contacts, d.pin, d.link = h.Parent, h.Contacts, h.Pin, nil
	if d.direct() {
		d.link = e.link
		d.lastSeen.Store(j.p.now().UnixNano())
	}
	to := "gompirun"
	if h.Parent != routed.Root {
		to = "the daemon of node " + h.Parent
	}
	fmt.Fprintf(j.p.stderr, "gompirun: the daemon of node %s lost its parent daemon and attached to %s, with the %d daemons below it\n", d.node, to, len(moved)-1)
	j.elog.Info("a daemon that lost its parent attached again", "node", d.node, "parent", h.Parent, "subtree", len(moved)-1, "resend_after", h.LastSeq)
	j.resend(e.box, moved, h.LastSeq)
	j.downSeq++
	resync := &pb.HNPMessage{Body: &pb.HNPMessage_Resync{Resync: &pb.Resync{}}, To: moved, Seq: j.downSeq}
	e.box.put(resync)
	return d
}

// resend sends again to nodes what gompirun sent them after sequence
// after, addressed to them alone.
func (j *job) resend(box *mailbox, nodes []string, after uint64) {
	in := map[string]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	for _, m := range j.sentLog {
		if m.Seq <= after {
			continue
		}
		var to []string
		if m.All {
			to = nodes
		} else {
			for _, n := range m.To {
				if in[n] {
					to = append(to, n)
				}
			}
		}
		if len(to) > 0 {
			box.put(&pb.HNPMessage{Body: m.Body, To: to, Seq: m.Seq})
		}
	}
}

// handshake is hs with the shape of this run's tree: every daemon finds
// its parent there (a star needs nothing: every parent is gompirun).
func (j *job) handshake(hs control.Handshake) control.Handshake {
	if j.tree.Depth() > 1 {
		hs.Nodes, hs.Radix = j.tree.Nodes(), j.tree.Radix()
	}
	return hs
}

// TreeReport is what routed_stats writes: the tree and its traffic.
type TreeReport struct {
	Radix int `json:"radix"`
	Depth int `json:"depth"`
	// AttachedSeconds is how long after this run started every daemon
	// had attached (its launch), ModexSeconds when the first fence (the
	// ranks' modex) completed; 0 when it did not happen.
	AttachedSeconds float64      `json:"attached_seconds"`
	ModexSeconds    float64      `json:"modex_seconds"`
	Daemons         []TreeDaemon `json:"daemons"`
}

// TreeDaemon is one daemon of a TreeReport: its parent ("" = gompirun)
// and the traffic on the link from its parent (nil when unknown: its
// parent was lost).
type TreeDaemon struct {
	Node   string        `json:"node"`
	Parent string        `json:"parent"`
	Link   *pb.LinkStats `json:"link"`
}

// writeTreeStats writes the TreeReport of this run to file.
func (j *job) writeTreeStats(file string) error {
	rep := TreeReport{Radix: j.tree.Radix(), Depth: j.tree.Depth()}
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return t.Sub(j.start).Seconds()
	}
	rep.AttachedSeconds, rep.ModexSeconds = since(j.attachedAt), since(j.modexAt)
	for _, n := range j.m.Nodes {
		d := j.daemons[n]
		rep.Daemons = append(rep.Daemons, TreeDaemon{Node: n, Parent: d.parent, Link: d.linkStats()})
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o600)
}

// treeSummary says how the tree is laid out, for the log.
func (j *job) treeSummary() string {
	return fmt.Sprintf("%d daemons, radix %d, depth %d", len(j.m.Nodes), j.tree.Radix(), j.tree.Depth())
}
