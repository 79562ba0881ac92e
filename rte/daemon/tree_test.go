package daemon

import (
	"log/slog"
	"slices"
	"testing"

	"gompi/rte/control"
	pb "gompi/rte/control/proto"
	"gompi/rte/routed"
)

// withTree gives the harness's daemon (n1) a place in a tree: child n2,
// with n3 below it, as their hellos would have taught it.
func withTree(h *harness) *tree {
	tr := newTree("n1", control.Handshake{Nodes: []string{"n1", "n2", "n3"}, Radix: 1}, routed.Root, slog.New(slog.DiscardHandler))
	tr.send = h.record
	h.d.tree = tr
	merge := h.d.childFence
	tr.fence.Store(&merge)
	if _, err := tr.adopt(&pb.DaemonHello{Node: "n2", Subtree: []string{"n3"}}, func(string) {}); err != nil {
		h.t.Fatal(err)
	}
	return tr
}

// boxed takes what was queued down to child.
func boxed(t *testing.T, tr *tree, child string) []*pb.HNPMessage {
	t.Helper()
	tr.mu.Lock()
	c := tr.children[child]
	tr.mu.Unlock()
	if c == nil || c.box.Len() == 0 {
		return nil
	}
	q, err := c.box.PopAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// gompirun's messages go down to the children whose subtree they are
// for; one for every daemon goes to every child and is the daemon's too.
func TestTreeRoute(t *testing.T) {
	h := newHarness(t)
	tr := withTree(h)
	for _, tc := range []struct {
		name   string
		m      *pb.HNPMessage
		mine   bool
		toN2   []string // To of the copy sent to n2 (nil: none sent)
		allToC bool
	}{
		{"every daemon", &pb.HNPMessage{All: true, Seq: 1}, true, nil, true},
		{"a grandchild", &pb.HNPMessage{To: []string{"n3"}, Seq: 2}, false, []string{"n3"}, false},
		{"this daemon and below", &pb.HNPMessage{To: []string{"n1", "n3", "n2"}, Seq: 3}, true, []string{"n3", "n2"}, false},
		{"no route", &pb.HNPMessage{To: []string{"n9"}, Seq: 4}, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if mine := tr.route(tc.m); mine != tc.mine {
				t.Errorf("route: mine = %v, want %v", mine, tc.mine)
			}
			got := boxed(t, tr, "n2")
			switch {
			case tc.allToC:
				if len(got) != 1 || !got[0].All {
					t.Errorf("n2 got %v, want the message for every daemon", got)
				}
			case tc.toN2 == nil:
				if len(got) != 0 {
					t.Errorf("n2 got %v, want nothing", got)
				}
			case len(got) != 1 || !slices.Equal(got[0].To, tc.toN2) || got[0].Seq != tc.m.Seq:
				t.Errorf("n2 got %v, want one addressed to %v", got, tc.toN2)
			}
		})
	}
	if tr.lastSeq.Load() != 4 {
		t.Errorf("last sequence %d, want 4", tr.lastSeq.Load())
	}
}

// A daemon sends one fence contribution for its subtree: its own ranks'
// and its children's, once every rank below has contributed; a child's
// contribution after that goes up as it is.
func TestTreeFenceAggregates(t *testing.T) {
	h := newHarness(t)
	withTree(h)
	if h.d.handle(t.Context(), &pb.HNPMessage{All: true, Body: &pb.HNPMessage_Launch{Launch: &pb.Launch{
		Program: "/bin/sh", Args: []string{"-c", "sleep 30"}, Size: 3, RankNodes: []string{"n1", "n2", "n3"}, DataSecret: h.data.Bytes()}}}) {
		t.Fatal("the launch ended the daemon")
	}
	if s := h.waitSent(1, "Started", isStarted); s[0].GetStarted().Rank != 0 {
		t.Fatalf("started %v, want rank 0 only: the others run below", s)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.svc.Fence(t.Context(), &pb.FenceRequest{Rank: 0, Seq: 1, Data: map[string]string{"a": "0"}})
		done <- err
	}()
	h.d.childFence(&pb.FenceContribution{Seq: 1, Entries: []*pb.RankData{{Rank: 2, Data: map[string]string{"a": "2"}}}})
	h.d.childFence(&pb.FenceContribution{Seq: 1, Entries: []*pb.RankData{{Rank: 1, Data: map[string]string{"a": "1"}}}})
	f := h.waitSent(1, "Fence", isFence)
	var ranks []int32
	for _, e := range f[0].GetFence().Entries {
		ranks = append(ranks, e.Rank)
	}
	if len(f) != 1 || !slices.Equal(ranks, []int32{0, 1, 2}) {
		t.Fatalf("fence contributions %v, want one with ranks 0, 1, 2", f)
	}
	late := &pb.FenceContribution{Seq: 1, Entries: []*pb.RankData{{Rank: 2}}}
	h.d.childFence(late)
	if f := h.sentNow(isFence); len(f) != 2 || f[1].GetFence() != late {
		t.Errorf("a late contribution was not passed on as it is: %v", f)
	}
	h.d.handle(t.Context(), &pb.HNPMessage{All: true, Body: &pb.HNPMessage_Fence{Fence: &pb.FenceComplete{Seq: 1}}})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Sent again after a parent was lost: ignored, and so is a child's
	// contribution to a completed fence.
	h.d.handle(t.Context(), &pb.HNPMessage{All: true, Body: &pb.HNPMessage_Fence{Fence: &pb.FenceComplete{Seq: 1}}})
	h.d.childFence(late)
	if f := h.sentNow(isFence); len(f) != 2 {
		t.Errorf("%d contributions after the fence completed, want 2", len(f))
	}
}
