package hnp

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"gompi/mca"
	pb "gompi/rte/control/proto"
	"gompi/rte/mapping"
)

// chain is three nodes of one rank each in a tree of radix 1: gompirun is
// linked to n1 alone, n2 hangs below n1 and n3 below n2.
var chain = mapping.Map{Nodes: []string{"n1", "n2", "n3"}, RankNode: []string{"n1", "n2", "n3"}}

func newChain(t *testing.T) *harness {
	t.Helper()
	return newDetached(t, chain, false, mca.Setting{Name: "routed_radix", Value: "1"})
}

// Daemons below the top attach through it: their hellos come up n1's
// link, and everything for them goes down it, addressed to them; a
// message for every daemon goes down once.
func TestTreeAttachAndRoute(t *testing.T) {
	h := newChain(t)
	h.attach("n1", "n1", &pb.DaemonHello{Node: "n1", Contacts: []string{"unix:/n1/tree.sock"}})
	h.attach("n2", "n1", &pb.DaemonHello{Node: "n2", Parent: "n1", Contacts: []string{"unix:/n2/tree.sock"}})
	if h.j.state != jobLaunching {
		t.Fatalf("job %s before n3 attached", h.j.state)
	}
	h.attach("n3", "n1", &pb.DaemonHello{Node: "n3", Parent: "n2"})
	msgs := h.sent("n1")
	if k := kinds(msgs); !slices.Equal(k, []string{"Welcome", "Welcome", "Welcome", "Launch"}) {
		t.Fatalf("down n1's link: %v, want three welcomes and one launch", k)
	}
	for i, n := range []string{"n1", "n2", "n3"} {
		if !slices.Equal(msgs[i].To, []string{n}) {
			t.Errorf("welcome %d addressed to %v, want %s", i, msgs[i].To, n)
		}
	}
	if l := msgs[3]; !l.All || len(l.GetLaunch().Ranks) != 0 || !slices.Equal(l.GetLaunch().RankNodes, chain.RankNode) {
		t.Errorf("launch %v, want one for every daemon with every rank's node", l)
	}
	if msgs[3].Seq != 4 {
		t.Errorf("launch numbered %d, want 4 (after three welcomes)", msgs[3].Seq)
	}
	st := h.j.status()
	for i, want := range []string{"", "n1", "n2"} {
		if p := st.Daemons[i].Parent; p != want {
			t.Errorf("%s's parent %q, want %q", st.Daemons[i].Node, p, want)
		}
	}
	if h.j.daemons["n1"].link != nil || h.j.daemons["n3"].direct() {
		t.Error("a relayed daemon counts as linked to gompirun")
	}
}

// A daemon that cannot compute where its parent listens asks: the answer
// waits for that parent to attach; once the parent is lost, it names the
// nearest ancestor still running.
func TestTreeLocate(t *testing.T) {
	h := newChain(t)
	ask := func(node, lost string) chan locateAnswer {
		r := make(chan locateAnswer, 1)
		h.step(evLocate{node: node, lost: lost, reply: r})
		return r
	}
	top := ask("n1", "")
	if a := <-top; a.err != nil || a.resp.Parent != "" {
		t.Fatalf("n1 attaches to gompirun: %v", a)
	}
	n3 := ask("n3", "")
	h.attach("n1", "n1", &pb.DaemonHello{Node: "n1", Contacts: []string{"tcp:10.0.0.1:5"}, Pin: []byte{1}})
	select {
	case a := <-n3:
		t.Fatalf("n3 answered %v before its parent n2 attached", a)
	default:
	}
	h.attach("n2", "n1", &pb.DaemonHello{Node: "n2", Parent: "n1", Contacts: []string{"tcp:10.0.0.2:6"}, Pin: []byte{2}})
	a := <-n3
	if a.err != nil || a.resp.Parent != "n2" || !slices.Equal(a.resp.Contacts, []string{"tcp:10.0.0.2:6"}) || a.resp.Pin[0] != 2 {
		t.Fatalf("n3's parent: %v", a)
	}
	h.attach("n3", "n1", &pb.DaemonHello{Node: "n3", Parent: "n2"})
	h.j.daemons["n2"].state = daemonLost
	if a := <-ask("n3", "n2"); a.err != nil || a.resp.Parent != "n1" {
		t.Errorf("n3 lost n2: %v, want n1", a)
	}
	if a := <-ask("zz", ""); a.err == nil {
		t.Errorf("a stranger's question was answered: %v", a)
	}
}

// gompirun watches the heartbeats of its own links only; a daemon's
// report of a lost child is the end of that child's stream.
func TestTreeChildLost(t *testing.T) {
	h := newChain(t)
	h.attach("n1", "n1")
	h.attach("n2", "n1", &pb.DaemonHello{Node: "n2", Parent: "n1"})
	h.attach("n3", "n1", &pb.DaemonHello{Node: "n3", Parent: "n2"})
	h.sent("n1")
	h.j.hbTimeout = 1
	h.j.heartbeat()
	if s := h.j.daemons["n1"].state; s != daemonLost {
		t.Errorf("n1, silent, is %s", s)
	}
	if s := h.j.daemons["n3"].state; s != daemonRunning {
		t.Errorf("n3, below, is %s: gompirun does not watch it", s)
	}
	h.msg("n1", &pb.DaemonMessage{Body: &pb.DaemonMessage_ChildLost{ChildLost: &pb.ChildLost{Node: "n3", Detail: "x"}}})
	if s := h.j.daemons["n3"].state; s != daemonRunning {
		t.Errorf("n1 reported n3, not its child, lost: n3 is %s", s)
	}
	h.msg("n2", &pb.DaemonMessage{Body: &pb.DaemonMessage_ChildLost{ChildLost: &pb.ChildLost{Node: "n3", Detail: "no heartbeat for 5s"}}})
	if s := h.j.daemons["n3"].state; s != daemonBreaking {
		t.Errorf("n3, reported lost by its parent, is %s", s)
	}
}

// A daemon that lost its parent attaches again elsewhere: gompirun routes
// it (and the daemons below it) through the new link, sends it again what
// it sent after the daemon's last message, readdressed to it alone, and
// asks it for its state; what every daemon acknowledged is forgotten,
// but not while a subtree is cut off.
func TestTreeReattach(t *testing.T) {
	h := newChain(t)
	h.attach("n1", "n1")
	h.attach("n2", "n1", &pb.DaemonHello{Node: "n2", Parent: "n1"})
	h.attach("n3", "n1", &pb.DaemonHello{Node: "n3", Parent: "n2"})
	sent := h.sent("n1") // 3 welcomes, the launch: sequences 1 to 4
	last := sent[len(sent)-1].Seq
	h.j.signal(syscall.SIGUSR1) // forwarded to every rank: sequence 5
	h.msg("n1", &pb.DaemonMessage{Body: &pb.DaemonMessage_ChildLost{ChildLost: &pb.ChildLost{Node: "n2"}}})
	if o := h.j.daemons["n3"].orphaned; o.IsZero() {
		t.Fatal("n3, below the lost n2, is not marked cut off")
	}
	h.j.daemons["n1"].ack.Store(h.j.downSeq)
	h.j.trimSent()
	if len(h.j.sentLog) == 0 {
		t.Fatal("gompirun forgot what it sent while n3 was cut off")
	}
	h.sent("n1")
	h.attach("n3", "n1", &pb.DaemonHello{Node: "n3", Parent: "n1", Reattach: true, LastSeq: last})
	msgs := h.sent("n1")
	if k := kinds(msgs); !slices.Equal(k, []string{"Signal", "Resync"}) {
		t.Fatalf("after n3 attached again: %v, want the signal sent again, then the resync", k)
	}
	if !slices.Equal(msgs[0].To, []string{"n3"}) || msgs[0].All || msgs[0].Seq != last+1 {
		t.Errorf("sent again: %v, want sequence %d addressed to n3 alone", msgs[0], last+1)
	}
	d := h.j.daemons["n3"]
	if d.parent != "n1" || !d.orphaned.IsZero() || d.via != "n1" {
		t.Errorf("n3 after attaching again: parent %q, via %q, orphaned %v", d.parent, d.via, d.orphaned)
	}
	if !strings.Contains(h.stderr.String(), "the daemon of node n3 lost its parent daemon and attached to the daemon of node n1") {
		t.Errorf("gompirun did not say so:\n%s", h.stderr)
	}
	h.settle() // n2's grace ends: it is lost
	h.j.daemons["n1"].ack.Store(h.j.downSeq)
	h.j.trimSent()
	if len(h.j.sentLog) != 0 {
		t.Errorf("%d messages kept after every daemon acknowledged them", len(h.j.sentLog))
	}
	if d := h.j.daemons["n2"]; d.state != daemonLost {
		t.Errorf("n2 is %s", d.state)
	}
}
