package crcpbkmrk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	crcpbkmrk "gompi/components/crcp/bkmrk"
	"gompi/frameworks"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crcp/crcptest"
	"gompi/frameworks/crs"
	"gompi/mca"
	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestQuery(t *testing.T) {
	tests := []struct {
		name     string
		role     mca.Role
		settings []mca.Setting
		skip     string
	}{
		{"rank with C/R", mca.RoleApp, []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}, ""},
		{"C/R off", mca.RoleApp, nil, "ft_cr_enabled = 0"},
		{"daemon", mca.RoleDaemon, []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}, "runs in ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := mca.NewParams()
			set := frameworks.New(params)
			set.CRCP.Register(crcpbkmrk.New())
			vals, err := params.ResolveSettings(tt.settings)
			if err != nil {
				t.Fatal(err)
			}
			c, err := set.CRCP.SelectOne(t.Context(), vals, tt.role, nil)
			if tt.skip != "" {
				probes, _ := set.CRCP.Probe(t.Context(), vals, tt.role)
				if err == nil || len(probes) != 1 || !strings.Contains(probes[0].Skipped, tt.skip) {
					t.Fatalf("selected %v (%v), probes %+v: want a skip saying %q", c.Info.Name, err, probes, tt.skip)
				}
				return
			}
			if err != nil || c.Priority != crcpbkmrk.Priority {
				t.Fatalf("select: %v, priority %d", err, c.Priority)
			}
		})
	}
}

// fakeChannels answers an exchange with fixed counts and records drains.
type fakeChannels struct {
	rank, size int
	sentToMe   []uint64
	gave       []uint64
	drains     map[int]uint64
	deliver    func(peer int, total uint64) // what arrives during a drain
	err        error
}

func (f *fakeChannels) Rank() int { return f.rank }
func (f *fakeChannels) Size() int { return f.size }
func (f *fakeChannels) Exchange(_ context.Context, sentTo []uint64) ([]uint64, error) {
	f.gave = slices.Clone(sentTo)
	return f.sentToMe, f.err
}
func (f *fakeChannels) Agree(context.Context, bool) (bool, error) {
	return false, errors.New("bkmrk agrees on nothing")
}
func (f *fakeChannels) Drain(_ context.Context, peer int, total uint64) error {
	f.drains[peer] = total
	f.deliver(peer, total)
	return nil
}

func TestFTEvent(t *testing.T) {
	tests := []struct {
		name     string
		sentToMe []uint64
		arrive   []uint64 // what has arrived from each peer once drained
		exchErr  error
		want     string
	}{
		{"drained", []uint64{5, 0, 7}, []uint64{5, 0, 7}, nil, ""},
		{"nothing in flight", []uint64{4, 0, 4}, []uint64{4, 0, 4}, nil, ""},
		{"peer sent after its bookmark", []uint64{5, 0, 7}, []uint64{5, 0, 8}, nil, "received 8 messages from rank 2, which bookmarked 7"},
		{"exchange fails", nil, nil, errors.New("peer lost"), "exchange bookmarks: peer lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := crcpbkmrk.NewModule()
			m.SeedCounts([]uint64{1, 0, 2}, []uint64{3, 0, 4})
			m.Sent(crcp.Envelope{Src: 1, Dst: 2})
			m.Received(crcp.Envelope{Src: 0, Dst: 1})
			ch := &fakeChannels{rank: 1, size: 3, sentToMe: tt.sentToMe, drains: map[int]uint64{}, err: tt.exchErr}
			ch.deliver = func(peer int, total uint64) {
				_, got := m.Counts(3)
				for got[peer] < tt.arrive[peer] {
					m.Received(crcp.Envelope{Src: peer, Dst: 1})
					got[peer]++
				}
			}
			err := m.FTEvent(t.Context(), crs.StateCheckpoint, ch)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("FTEvent: %v, want an error saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ch.gave, []uint64{1, 0, 3}) {
				t.Errorf("bookmarks given %v, want [1 0 3]", ch.gave)
			}
			if ch.drains[0] != tt.sentToMe[0] || ch.drains[2] != tt.sentToMe[2] || len(ch.drains) != 2 {
				t.Errorf("drains %v for bookmarks %v", ch.drains, tt.sentToMe)
			}
		})
	}
	m := crcpbkmrk.NewModule()
	for _, st := range []crs.State{crs.StateContinue, crs.StateRestart, crs.StateTerm, crs.StateError} {
		if err := m.FTEvent(t.Context(), st, nil); err != nil {
			t.Errorf("FTEvent(%v): %v", st, err)
		}
	}
}

func TestUnseededGrows(t *testing.T) {
	m := crcpbkmrk.NewModule()
	m.Sent(crcp.Envelope{Dst: 6})
	m.Received(crcp.Envelope{Src: 2})
	sent, recvd := m.Counts(8)
	if sent[6] != 1 || recvd[2] != 1 || len(sent) != 8 {
		t.Fatalf("counts %v %v", sent, recvd)
	}
}

// register adds bkmrk unless the built-in list has it.
func register(_ int, set *frameworks.Set) {
	if !slices.Contains(set.CRCP.Names(), crcpbkmrk.Name) {
		set.CRCP.Register(crcpbkmrk.New())
	}
}

var crOn = []mca.Setting{{Name: "ft_cr_enabled", Value: "1"}}

// TestDrainInJob: with messages of every size in flight between three
// ranks, the protocol (installed by mpi.Init) drains them all into the
// library; they are then received once and in order.
func TestDrainInJob(t *testing.T) {
	sizes := []int{0, 10, 40 << 10, 100 << 10}
	mpitest.RunWith(t, mpitest.Config{N: 3, BTL: "tcp", Settings: crOn, Register: register}, func(p *mpi.Proc) error {
		m, ok := p.CRCP().(*crcpbkmrk.Module)
		if !ok {
			return fmt.Errorf("protocol %T installed, want bkmrk", p.CRCP())
		}
		w := p.World()
		r, n := w.Rank(), w.Size()
		for i, size := range sizes {
			for dst := range n {
				if dst != r {
					b := make([]byte, size)
					if size > 0 {
						b[0] = byte(i)
					}
					if err := w.Send(b, dst, i); err != nil {
						return err
					}
				}
			}
		}
		ch := p.ChannelsAt(1)
		if err := m.FTEvent(context.Background(), crs.StateCheckpoint, ch); err != nil {
			return err
		}
		sent, recvd := p.Counts()
		msent, mrecvd := m.Counts(n)
		if !slices.Equal(sent, msent) || !slices.Equal(recvd, mrecvd) {
			return fmt.Errorf("library counts %v %v, protocol %v %v", sent, recvd, msent, mrecvd)
		}
		for src := range n {
			if src != r && recvd[src] != uint64(len(sizes)) {
				return fmt.Errorf("from rank %d: %d messages drained, want %d", src, recvd[src], len(sizes))
			}
		}
		// No rank sends again before every rank drained (package cr
		// agrees on the outcome of the save here).
		if _, err := ch.Agree(context.Background(), true); err != nil {
			return err
		}
		// Everything is in the library: receives complete without waiting.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for src := range n {
			for i, size := range sizes {
				if src == r {
					continue
				}
				buf := make([]byte, size)
				st, err := w.RecvCtx(ctx, buf, src, mpi.AnyTag)
				if err != nil {
					return err
				}
				if st.Tag != i || st.Count != size || size > 0 && buf[0] != byte(i) {
					return fmt.Errorf("from rank %d: message %d came as tag %d, %d bytes", src, i, st.Tag, st.Count)
				}
			}
		}
		return w.Barrier()
	})
}

// BenchmarkPingPong compares the message path with C/R off (crcp=none:
// nothing installed) and on (crcp=bkmrk counting every message), side by
// side: ns/op is one round trip between two ranks of this process.
func BenchmarkPingPong(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"8B", 8}, {"1MiB", 1 << 20}} {
		for _, mode := range []struct {
			name     string
			settings []mca.Setting
		}{{"cr=off", nil}, {"cr=on", crOn}} {
			b.Run(size.name+"/"+mode.name, func(b *testing.B) {
				b.SetBytes(int64(2 * size.n))
				mpitest.RunWith(b, mpitest.Config{N: 2, BTL: "uds", Settings: mode.settings, Register: register}, func(p *mpi.Proc) error {
					if on := p.CRCP() != nil; on != (mode.settings != nil) {
						return fmt.Errorf("protocol installed: %v", on)
					}
					w := p.World()
					buf := make([]byte, size.n)
					other := 1 - w.Rank()
					pingpong := func(k int) error {
						for range k {
							if w.Rank() == 0 {
								if err := w.Send(buf, other, 1); err != nil {
									return err
								}
								if _, err := w.Recv(buf, other, 1); err != nil {
									return err
								}
							} else {
								if _, err := w.Recv(buf, other, 1); err != nil {
									return err
								}
								if err := w.Send(buf, other, 1); err != nil {
									return err
								}
							}
						}
						return nil
					}
					if err := pingpong(100); err != nil {
						return err
					}
					if err := w.Barrier(); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.ResetTimer()
					}
					if err := pingpong(b.N); err != nil {
						return err
					}
					if w.Rank() == 0 {
						b.StopTimer()
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkSendSelf isolates the message path from the transports: a
// rank sends 8 bytes to itself and receives them, with C/R off (nothing
// installed) and on (bkmrk counts the message twice). ns/op is one send
// and its receive.
func BenchmarkSendSelf(b *testing.B) {
	for _, mode := range []struct {
		name     string
		settings []mca.Setting
	}{{"cr=off", nil}, {"cr=on", crOn}} {
		b.Run(mode.name, func(b *testing.B) {
			mpitest.RunWith(b, mpitest.Config{N: 1, BTL: "uds", Settings: mode.settings, Register: register}, func(p *mpi.Proc) error {
				w := p.World()
				buf := make([]byte, 8)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := w.Send(buf, 0, 1); err != nil {
						return err
					}
					if _, err := w.Recv(buf, 0, 1); err != nil {
						return err
					}
				}
				b.StopTimer()
				return nil
			})
		})
	}
}

// TestConformance runs the CRCP kit on modules selected through the
// component, as a rank with C/R on selects them.
func TestConformance(t *testing.T) {
	crcptest.Run(t, func(t *testing.T) crcp.Module {
		params := mca.NewParams()
		set := frameworks.New(params)
		set.CRCP.Register(crcpbkmrk.New())
		vals, err := params.ResolveSettings(crOn)
		if err != nil {
			t.Fatal(err)
		}
		c, err := set.CRCP.SelectOne(t.Context(), vals, mca.RoleApp, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Module
	}, crcptest.Options{})
}
