package mpi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

var transports = []string{"tcp", "uds", "sm"}

const fenceTag = 999

// sendTagged sends one message per tag from the calling rank to dst, with
// its index as payload, then a fence message.
func sendTagged(w *mpi.Comm, dst int, tags []int) error {
	for i, tag := range tags {
		if err := w.Send([]byte{byte(i)}, dst, tag); err != nil {
			return err
		}
	}
	return w.Send(nil, dst, fenceTag)
}

func TestMatchingUnexpected(t *testing.T) {
	// Rank 0 sends every message before rank 1 posts a receive: all sit in
	// the unexpected queue, and receives take the first fitting one in
	// arrival order.
	type recv struct{ src, tag, want int }
	tests := []struct {
		name  string
		tags  []int
		recvs []recv
	}{
		{"fifo per tag", []int{1, 1, 1}, []recv{{0, 1, 0}, {0, 1, 1}, {0, 1, 2}}},
		{"by tag", []int{1, 2, 3}, []recv{{0, 3, 2}, {0, 1, 0}, {0, 2, 1}}},
		{"any tag takes oldest", []int{5, 4, 5}, []recv{{0, 4, 1}, {0, mpi.AnyTag, 0}, {0, mpi.AnyTag, 2}}},
		{"any source", []int{2, 1, 2}, []recv{{mpi.AnySource, 2, 0}, {mpi.AnySource, mpi.AnyTag, 1}, {mpi.AnySource, 2, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
				w := p.World()
				if w.Rank() == 0 {
					return sendTagged(w, 1, tt.tags)
				}
				if _, err := w.Probe(0, fenceTag); err != nil {
					return err
				}
				for i, rv := range tt.recvs {
					buf := make([]byte, 1)
					st, err := w.Recv(buf, rv.src, rv.tag)
					if err != nil {
						return err
					}
					if int(buf[0]) != rv.want || st.Source != 0 || st.Tag != tt.tags[rv.want] || st.Count != 1 {
						return fmt.Errorf("receive %d (%d, %d): got message %d status %+v, want message %d", i, rv.src, rv.tag, buf[0], st, rv.want)
					}
				}
				_, err := w.Recv(nil, 0, fenceTag)
				return err
			})
		})
	}
}

func TestMatchingPosted(t *testing.T) {
	// Rank 1 posts receives first; a message goes to the first posted
	// receive (in posting order) that fits.
	type post struct{ src, tag int }
	tests := []struct {
		name  string
		posts []post
		tags  []int // sent in this order after every receive is posted
		want  []int // message index each posted receive gets
	}{
		{"posting order", []post{{0, 1}, {0, 1}}, []int{1, 1}, []int{0, 1}},
		{"wildcard first wins", []post{{mpi.AnySource, mpi.AnyTag}, {0, 5}}, []int{5, 5}, []int{0, 1}},
		{"tag picks later receive", []post{{0, 1}, {mpi.AnySource, 2}, {0, mpi.AnyTag}}, []int{2, 9, 1}, []int{2, 0, 1}},
		{"specific skips", []post{{0, 7}, {0, mpi.AnyTag}}, []int{3, 7}, []int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mpitest.Run(t, 2, "uds", func(p *mpi.Proc) error {
				w := p.World()
				if w.Rank() == 0 {
					if _, err := w.Recv(nil, 1, 0); err != nil { // receives are posted
						return err
					}
					return sendTagged(w, 1, tt.tags)
				}
				reqs := make([]*mpi.Request, len(tt.posts))
				bufs := make([][]byte, len(tt.posts))
				for i, ps := range tt.posts {
					bufs[i] = make([]byte, 1)
					var err error
					if reqs[i], err = w.Irecv(bufs[i], ps.src, ps.tag); err != nil {
						return err
					}
				}
				if err := w.Send(nil, 0, 0); err != nil {
					return err
				}
				if _, err := w.Recv(nil, 0, fenceTag); err != nil {
					return err
				}
				for i, want := range tt.want {
					st, err := reqs[i].Wait()
					if err != nil {
						return err
					}
					if int(bufs[i][0]) != want || st.Tag != tt.tags[want] {
						return fmt.Errorf("posted receive %d got message %d (status %+v), want %d", i, bufs[i][0], st, want)
					}
				}
				if _, ok, err := w.Iprobe(mpi.AnySource, mpi.AnyTag); ok || err != nil {
					return fmt.Errorf("a message is left over (%v)", err)
				}
				return nil
			})
		})
	}
}

func TestAnySourceKeepsPerSenderOrder(t *testing.T) {
	const per = 200
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			mpitest.Run(t, 4, btl, func(p *mpi.Proc) error {
				w := p.World()
				if w.Rank() != 0 {
					for i := 0; i < per; i++ {
						var b [8]byte
						binary.LittleEndian.PutUint64(b[:], uint64(i))
						if err := w.Send(b[:], 0, i%3); err != nil {
							return err
						}
					}
					return nil
				}
				next := make([]uint64, w.Size())
				for k := 0; k < per*(w.Size()-1); k++ {
					var b [8]byte
					st, err := w.Recv(b[:], mpi.AnySource, mpi.AnyTag)
					if err != nil {
						return err
					}
					got := binary.LittleEndian.Uint64(b[:])
					if got != next[st.Source] || st.Tag != int(got%3) {
						return fmt.Errorf("from rank %d: message %d (tag %d), want %d: overtaken", st.Source, got, st.Tag, next[st.Source])
					}
					next[st.Source]++
				}
				return nil
			})
		})
	}
}

func TestTruncateAndArgs(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 0 {
			if err := w.Send(bytes.Repeat([]byte{1}, 10), 1, 1); err != nil {
				return err
			}
			big := bytes.Repeat([]byte{2}, 100<<10) // read straight into the posted buffer
			if _, err := w.Recv(nil, 1, 2); err != nil {
				return err
			}
			return w.Send(big, 1, 3)
		}
		buf := make([]byte, 4)
		st, err := w.Recv(buf, 0, 1)
		if !errors.Is(err, mpi.ErrTruncate) || st.Count != 10 || !bytes.Equal(buf, []byte{1, 1, 1, 1}) {
			return fmt.Errorf("short buffer: status %+v, %v; want ErrTruncate, count 10", st, err)
		}
		big := make([]byte, 50<<10)
		rq, err := w.Irecv(big, 0, 3)
		if err != nil {
			return err
		}
		if err := w.Send(nil, 0, 2); err != nil {
			return err
		}
		st, err = rq.Wait()
		if !errors.Is(err, mpi.ErrTruncate) || st.Count != 100<<10 || big[len(big)-1] != 2 {
			return fmt.Errorf("short posted buffer: status %+v, %v", st, err)
		}
		for _, bad := range []error{
			w.Send(nil, 2, 0),
			w.Send(nil, -1, 0),
			w.Send(nil, 0, -5),
			func() error { _, err := w.Recv(nil, 0, -7); return err }(),
			func() error { _, err := w.Irecv(nil, 5, 0); return err }(),
		} {
			if !errors.Is(bad, mpi.ErrArg) {
				return fmt.Errorf("bad argument gave %v, want ErrArg", bad)
			}
		}
		return nil
	})
}

func TestNonBlocking(t *testing.T) {
	for _, btl := range transports {
		t.Run(btl, func(t *testing.T) {
			mpitest.Run(t, 3, btl, func(p *mpi.Proc) error {
				w := p.World()
				r, n := w.Rank(), w.Size()
				sizes := []int{0, 3, 70 << 10, 5, 300 << 10, 1}
				// Every rank sends to every other rank: large Isends queue
				// behind the writer yet keep their order with later small ones.
				var reqs []*mpi.Request
				for dst := 0; dst < n; dst++ {
					for i, sz := range sizes {
						msg := bytes.Repeat([]byte{byte(r*16 + i)}, sz)
						rq, err := w.Isend(msg, dst, 4)
						if err != nil {
							return err
						}
						reqs = append(reqs, rq)
					}
				}
				recvs := make([]*mpi.Request, 0, n*len(sizes))
				bufs := make([][]byte, 0, n*len(sizes))
				for src := 0; src < n; src++ {
					for _, sz := range sizes {
						b := make([]byte, sz)
						rq, err := w.Irecv(b, src, 4)
						if err != nil {
							return err
						}
						recvs, bufs = append(recvs, rq), append(bufs, b)
					}
				}
				seen := 0
				for seen < len(recvs) {
					i, st, err := mpi.Waitany(recvs)
					if err != nil {
						return err
					}
					src, k := i/len(sizes), i%len(sizes)
					if st.Source != src || st.Count != sizes[k] || (sizes[k] > 0 && bufs[i][sizes[k]-1] != byte(src*16+k)) {
						return fmt.Errorf("receive %d from %d: status %+v", k, src, st)
					}
					recvs[i] = nil
					seen++
				}
				if i, _, _ := mpi.Waitany(recvs); i != -1 {
					return fmt.Errorf("Waitany over finished requests gave %d, want -1", i)
				}
				if _, err := mpi.Waitall(reqs); err != nil {
					return err
				}
				if !mpi.Testall(reqs) {
					return fmt.Errorf("Testall false after Waitall")
				}
				return nil
			})
		})
	}
}

func TestSendrecvAndTyped(t *testing.T) {
	mpitest.Run(t, 4, "", func(p *mpi.Proc) error {
		w := p.World()
		r, n := w.Rank(), w.Size()
		out := []float64{float64(r), float64(r) + 0.5}
		in := make([]float64, 2)
		st, err := mpi.SendrecvT(w, out, (r+1)%n, 1, in, (r-1+n)%n, 1)
		if err != nil {
			return err
		}
		if want := float64((r - 1 + n) % n); in[0] != want || in[1] != want+0.5 || mpi.Count[float64](st) != 2 {
			return fmt.Errorf("got %v (count %d), want [%v %v]", in, mpi.Count[float64](st), want, want+0.5)
		}
		return nil
	})
}

func TestSelfMessages(t *testing.T) {
	mpitest.Run(t, 1, "", func(p *mpi.Proc) error {
		w := p.World()
		if err := w.Send([]byte("hello"), 0, 3); err != nil {
			return err
		}
		st, ok, err := w.Iprobe(0, 3)
		if err != nil || !ok || st.Count != 5 {
			return fmt.Errorf("iprobe: %+v %v %v", st, ok, err)
		}
		buf := make([]byte, 5)
		if _, err := w.Recv(buf, mpi.AnySource, mpi.AnyTag); err != nil || string(buf) != "hello" {
			return fmt.Errorf("recv %q, %v", buf, err)
		}
		if p.Transport(0) != "self" {
			return fmt.Errorf("transport to self: %q", p.Transport(0))
		}
		return nil
	})
}

func TestTransportChoice(t *testing.T) {
	// Two nodes: the same-node transport of highest priority within a
	// node (sm over uds), tcp across.
	for btl, local := range map[string]string{"tcp,uds": "uds", "tcp,uds,sm": "sm"} {
		cfg := mpitest.Config{N: 4, BTL: btl, Nodes: []string{"a", "a", "b", "b"}}
		mpitest.RunWith(t, cfg, func(p *mpi.Proc) error {
			for peer := 0; peer < p.Size(); peer++ {
				want := "tcp"
				switch {
				case peer == p.Rank():
					want = "self"
				case peer/2 == p.Rank()/2:
					want = local
				}
				if got := p.Transport(peer); got != want {
					return fmt.Errorf("btl %s: transport to %d: %s, want %s", btl, peer, got, want)
				}
			}
			return p.World().Barrier()
		})
	}
	// uds alone cannot join two nodes: Init says so.
	errs := mpitest.Start(mpitest.Config{N: 2, BTL: "uds", Nodes: []string{"a", "b"}}, func(p *mpi.Proc) error { return nil })
	if len(errs) == 0 {
		t.Fatal("uds across nodes started")
	}
}
