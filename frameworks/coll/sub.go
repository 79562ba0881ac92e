package coll

import "context"

// Sub returns the view of c restricted to members (ranks of c, in the
// order that gives their ranks in the view), which must hold c's own
// rank: a hierarchical module runs the flat algorithms within a node and
// among the nodes' leaders through it. Messages keep c's context and the
// caller's tag; only the members of the view take part.
func Sub(c Comm, members []int) Comm {
	s := &sub{c: c, members: members, rank: -1}
	for i, m := range members {
		if m == c.Rank() {
			s.rank = i
		}
	}
	if s.rank < 0 {
		panic("coll: Sub without the caller's own rank")
	}
	return s
}

type sub struct {
	c       Comm
	members []int
	rank    int
}

func (s *sub) Rank() int         { return s.rank }
func (s *sub) Size() int         { return len(s.members) }
func (s *sub) Node(r int) string { return s.c.Node(s.members[r]) }

func (s *sub) Send(ctx context.Context, dst, tag int, data []byte) error {
	return s.c.Send(ctx, s.members[dst], tag, data)
}

func (s *sub) Recv(ctx context.Context, buf []byte, src, tag int) error {
	return s.c.Recv(ctx, buf, s.members[src], tag)
}

func (s *sub) SendRecv(ctx context.Context, sbuf []byte, dst int, rbuf []byte, src, tag int) error {
	return s.c.SendRecv(ctx, sbuf, s.members[dst], rbuf, s.members[src], tag)
}
