package mpi_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"gompi/mpi"
	"gompi/mpi/mpitest"
)

func TestProcNull(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		want := mpi.Status{Source: mpi.ProcNull, Tag: mpi.AnyTag}
		if err := w.Send([]byte("x"), mpi.ProcNull, 3); err != nil {
			return err
		}
		buf := []byte("keep")
		st, err := w.Recv(buf, mpi.ProcNull, 3)
		if err != nil || st != want || string(buf) != "keep" {
			return fmt.Errorf("recv from ProcNull: %+v %v %q", st, err, buf)
		}
		reqs := make([]*mpi.Request, 3)
		if reqs[0], err = w.Isend(buf, mpi.ProcNull, 1); err != nil {
			return err
		}
		if reqs[1], err = w.Irecv(buf, mpi.ProcNull, mpi.AnyTag); err != nil {
			return err
		}
		if reqs[2], err = w.Issend(buf, mpi.ProcNull, 1); err != nil {
			return err
		}
		sts, err := mpi.Waitall(reqs)
		if err != nil || sts[1] != want {
			return fmt.Errorf("non-blocking with ProcNull: %+v %v", sts, err)
		}
		if st, err := w.Probe(mpi.ProcNull, 0); err != nil || st != want {
			return fmt.Errorf("probe of ProcNull: %+v %v", st, err)
		}
		st, err = w.Sendrecv(buf, mpi.ProcNull, 0, buf, mpi.ProcNull, 0)
		if err != nil || st != want {
			return fmt.Errorf("sendrecv with ProcNull: %+v %v", st, err)
		}
		return nil
	})
}

// TestSsend checks that a synchronous send does not complete before its
// receive is posted, and that synchronous and standard messages of one
// tag keep their order.
func TestSsend(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 0 {
			r, err := w.Issend([]byte("sync"), 1, 5)
			if err != nil {
				return err
			}
			// Rank 1 receives tag 5 only after our tag 6 message.
			if _, done, _ := r.Test(); done {
				return errors.New("synchronous send complete before any receive")
			}
			if err := w.Send([]byte("go"), 1, 6); err != nil {
				return err
			}
			if _, err := r.Wait(); err != nil {
				return err
			}
			for i, s := range []string{"a", "b", "c", "d"} {
				send := w.Send
				if i%2 == 0 {
					send = w.Ssend
				}
				if i == 3 {
					send = w.Rsend
				}
				if err := send([]byte(s), 1, 7); err != nil {
					return err
				}
			}
			return nil
		}
		buf := make([]byte, 4)
		if _, err := w.Recv(buf, 0, 6); err != nil {
			return err
		}
		if st, err := w.Recv(buf, 0, 5); err != nil || string(buf) != "sync" || st.Tag != 5 {
			return fmt.Errorf("got %q tag %d: %v", buf, st.Tag, err)
		}
		var got []byte
		for i := 0; i < 4; i++ {
			st, err := w.Recv(buf, mpi.AnySource, mpi.AnyTag)
			if err != nil || st.Tag != 7 {
				return fmt.Errorf("message %d: tag %d, %v", i, st.Tag, err)
			}
			got = append(got, buf[0])
		}
		if string(got) != "abcd" {
			return fmt.Errorf("order %q", got)
		}
		return nil
	})
}

// TestSsendLarge: a synchronous send large enough to be read straight
// into a receive posted before it arrived (the direct path, 32 KiB and
// up) completes, and the receive sees the user's tag. The receive is
// posted before a barrier the sender passes first; another is left to
// match from the unexpected queue.
func TestSsendLarge(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		const n = 1 << 20
		if w.Rank() == 0 {
			if err := w.Barrier(); err != nil {
				return err
			}
			for _, tag := range []int{3, 4} {
				if err := w.Ssend(bytes.Repeat([]byte{byte(tag)}, n), 1, tag); err != nil {
					return fmt.Errorf("ssend tag %d: %w", tag, err)
				}
			}
			return nil
		}
		buf := make([]byte, n)
		r, err := w.Irecv(buf, 0, 3)
		if err != nil {
			return err
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		for _, tag := range []int{3, 4} {
			var st mpi.Status
			if tag == 3 {
				st, err = r.Wait()
			} else {
				st, err = w.Recv(buf, 0, 4)
			}
			if err != nil || st.Tag != tag || st.Count != n || buf[n-1] != byte(tag) {
				return fmt.Errorf("receive tag %d: status %+v, last byte %d, %v", tag, st, buf[n-1], err)
			}
		}
		return nil
	})
}

func TestBsend(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 1 {
			buf := make([]byte, 10)
			_, err := w.Recv(buf, 0, 1)
			if err == nil && !bytes.Equal(buf, []byte("0123456789")) {
				err = fmt.Errorf("got %q", buf)
			}
			return err
		}
		if err := w.Bsend([]byte("x"), 1, 1); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("bsend with no buffer: %v", err)
		}
		if err := p.BufferAttach(10); err != nil {
			return err
		}
		if err := w.Bsend(make([]byte, 11), 1, 1); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("bsend larger than the buffer: %v", err)
		}
		msg := []byte("0123456789")
		if err := w.Bsend(msg, 1, 1); err != nil {
			return err
		}
		copy(msg, "overwritten") // the library sends its copy
		if n, err := p.BufferDetach(); err != nil || n != 10 {
			return fmt.Errorf("detach: %d %v", n, err)
		}
		return nil
	})
}

// TestPersistent runs a ring of persistent sends and receives three
// times, changing the data between starts.
func TestPersistent(t *testing.T) {
	for n := 1; n <= 4; n++ {
		mpitest.Run(t, n, "tcp", func(p *mpi.Proc) error {
			w := p.World()
			out, in := make([]byte, 2), make([]byte, 2)
			right, left := (w.Rank()+1)%w.Size(), (w.Rank()-1+w.Size())%w.Size()
			s, err := w.SsendInit(out, right, 4)
			if err != nil {
				return err
			}
			r, err := w.RecvInit(in, left, 4)
			if err != nil {
				return err
			}
			if st, err := r.Wait(); err != nil || st != (mpi.Status{}) {
				return fmt.Errorf("inactive wait: %+v %v", st, err)
			}
			for it := 0; it < 3; it++ {
				out[0], out[1] = byte(w.Rank()), byte(it)
				if err := mpi.Startall([]*mpi.Prequest{r, s}); err != nil {
					return err
				}
				if err := r.Start(); !errors.Is(err, mpi.ErrArg) {
					return fmt.Errorf("start of an active request: %v", err)
				}
				if st, err := r.Wait(); err != nil || st.Source != left {
					return fmt.Errorf("iteration %d: %+v %v", it, st, err)
				}
				if _, err := s.Wait(); err != nil {
					return err
				}
				if in[0] != byte(left) || in[1] != byte(it) || r.Active() || s.Active() {
					return fmt.Errorf("iteration %d: got % x", it, in)
				}
			}
			return nil
		})
	}
}

// TestMprobeCancel checks that a matched message is out of every other
// receive's reach, and that a cancelled receive takes no message.
func TestMprobeCancel(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		if w.Rank() == 0 {
			for _, s := range []string{"first", "second"} {
				if err := w.Send([]byte(s), 1, 1); err != nil {
					return err
				}
			}
			if err := w.Ssend([]byte("sync"), 1, 2); err != nil {
				return err
			}
			return w.Send([]byte("late"), 1, 3)
		}
		cancelled, err := w.Irecv(make([]byte, 8), 0, 3)
		if err != nil {
			return err
		}
		if err := cancelled.Cancel(); err != nil {
			return err
		}
		if st, err := cancelled.Wait(); err != nil || !st.Cancelled {
			return fmt.Errorf("cancelled receive: %+v %v", st, err)
		}
		msg, st, err := w.Mprobe(0, 1)
		if err != nil || st.Count != 5 {
			return fmt.Errorf("mprobe: %+v %v", st, err)
		}
		buf := make([]byte, 8)
		if st, err := w.Recv(buf, mpi.AnySource, 1); err != nil || string(buf[:st.Count]) != "second" {
			return fmt.Errorf("receive after mprobe got %q: %v", buf[:st.Count], err)
		}
		if st, err := msg.Recv(buf); err != nil || string(buf[:st.Count]) != "first" {
			return fmt.Errorf("mrecv got %q: %v", buf[:st.Count], err)
		}
		if _, err := msg.Recv(buf); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("second mrecv: %v", err)
		}
		// The synchronous send completes when Mprobe matches it.
		var m *mpi.Message
		for m == nil {
			if m, _, _, err = w.Improbe(0, 2); err != nil {
				return err
			}
		}
		if r, err := m.Irecv(buf); err != nil || !mpi.Testall([]*mpi.Request{r}) {
			return fmt.Errorf("imrecv: %v", err)
		}
		st, err = w.Recv(buf, 0, 3)
		if err != nil || string(buf[:st.Count]) != "late" {
			return fmt.Errorf("after the cancel got %q: %v", buf[:st.Count], err)
		}
		return nil
	})
}

func TestTestsome(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		other := 1 - w.Rank()
		if i, _, ok, _ := mpi.Testany([]*mpi.Request{nil, nil}); !ok || i != -1 {
			return fmt.Errorf("testany of nil requests: %d %v", i, ok)
		}
		if idx, _, _ := mpi.Testsome([]*mpi.Request{nil}); idx != nil {
			return fmt.Errorf("testsome of nil requests: %v", idx)
		}
		never, err := w.Irecv(nil, other, 99)
		if err != nil {
			return err
		}
		got, err := w.Irecv(make([]byte, 1), other, 1)
		if err != nil {
			return err
		}
		if err := w.Send([]byte{1}, other, 1); err != nil {
			return err
		}
		reqs := []*mpi.Request{never, nil, got}
		idx, sts, err := mpi.Waitsome(reqs)
		if err != nil || fmt.Sprint(idx) != "[2]" || sts[0].Source != other {
			return fmt.Errorf("waitsome: %v %+v %v", idx, sts, err)
		}
		if i, _, ok, _ := mpi.Testany(reqs); !ok || i != 2 {
			return fmt.Errorf("testany: %d %v", i, ok)
		}
		if err := never.Cancel(); err != nil {
			return err
		}
		idx, sts, _ = mpi.Testsome(reqs)
		if fmt.Sprint(idx) != "[0 2]" || !sts[0].Cancelled {
			return fmt.Errorf("testsome after cancel: %v %+v", idx, sts)
		}
		return nil
	})
}

// TestBufModes sends a strided column in the synchronous, ready and
// buffered modes, blocking-started and persistent, and receives one
// through Mprobe into a strided column; buffered sends pay the overhead
// SetBsendOverhead sets.
func TestBufModes(t *testing.T) {
	mpitest.Run(t, 2, "tcp", func(p *mpi.Proc) error {
		w := p.World()
		col, err := mpi.TypeVector(3, 1, 2, mpi.TypeInt32)
		if err != nil {
			return err
		}
		mat := make([]int32, 6)
		buf := mpi.Buf{Mem: bytesOfInts(mat), Count: 1, Type: col}
		if w.Rank() == 1 {
			return bufModesReceiver(w, buf, mat)
		}
		for i := range mat {
			mat[i] = int32(i)
		}
		p.SetBsendOverhead(4)
		if err := p.BufferAttach(12 + 3); err != nil {
			return err
		}
		if _, err := w.IbsendBuf(buf, 1, 3); !errors.Is(err, mpi.ErrArg) {
			return fmt.Errorf("12 bytes and 4 of overhead fit 15: %v", err)
		}
		if _, err := p.BufferDetach(); err != nil {
			return err
		}
		if err := p.BufferAttach(16); err != nil {
			return err
		}
		if err := w.Barrier(); err != nil { // the receiver has posted its receives
			return err
		}
		starts := []func() (*mpi.Request, error){
			func() (*mpi.Request, error) { return w.IssendBuf(buf, 1, 0) },
			func() (*mpi.Request, error) { return w.IrsendBuf(buf, 1, 1) },
			func() (*mpi.Request, error) { return w.IbsendBuf(buf, 1, 2) },
		}
		for i, start := range starts {
			r, err := start()
			if err == nil {
				_, err = r.Wait()
			}
			if err != nil {
				return fmt.Errorf("mode %d: %w", i, err)
			}
		}
		if _, err := p.BufferDetach(); err != nil {
			return err
		}
		for _, init := range []func(mpi.Buf, int, int) (*mpi.Prequest, error){w.SsendBufInit, w.RsendBufInit} {
			q, err := init(buf, 1, 4)
			if err != nil {
				return err
			}
			if err := w.Barrier(); err != nil {
				return err
			}
			if err := q.Start(); err != nil {
				return err
			}
			if _, err := q.Wait(); err != nil {
				return err
			}
		}
		return w.SendBuf(buf, 1, 5)
	})
}

func bufModesReceiver(w *mpi.Comm, buf mpi.Buf, mat []int32) error {
	reqs := make([]*mpi.Request, 3)
	for i := range reqs {
		var err error
		if reqs[i], err = w.IrecvBuf(mpi.Buf{Mem: make([]byte, 12), Count: 3, Type: mpi.TypeInt32}, 0, i); err != nil {
			return err
		}
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	if _, err := mpi.Waitall(reqs); err != nil {
		return err
	}
	for range 2 {
		r, err := w.IrecvBuf(buf, 0, 4)
		if err != nil {
			return err
		}
		if err := w.Barrier(); err != nil {
			return err
		}
		if _, err := r.Wait(); err != nil {
			return err
		}
		if fmt.Sprint(mat) != "[0 0 2 0 4 0]" {
			return fmt.Errorf("persistent: %v", mat)
		}
		clear(mat)
	}
	msg, _, err := w.Mprobe(0, 5)
	if err != nil {
		return err
	}
	if st, err := msg.RecvBuf(buf); err != nil || st.Count != 12 || fmt.Sprint(mat) != "[0 0 2 0 4 0]" {
		return fmt.Errorf("mrecv into a column: %v %+v %v", mat, st, err)
	}
	return nil
}
