package mpi

import (
	"errors"
	"net"
	"time"

	"gompi/frameworks/btl"
)

// Kill cuts a Proc off as if its process died: connections drop without a
// goodbye and its own calls fail.
func Kill(p *Proc) {
	p.stop(&ProcFailedError{Rank: p.rank, Cause: errors.New("killed by the test")})
	p.shutdown()
}

// PeerAddr is the address p dials to reach peer (peer's modex entry).
func PeerAddr(p *Proc, peer int) string { return p.peers[peer].ep.Addr }

// ForgeHello plays an impostor that knows the job id but not its secret:
// it dials addr over TCP, says hello as rank src to rank dst of job and
// reads the challenge. With a proof it sends it and returns the error of
// the read that follows (the acceptor's verdict: io.EOF when it closed the
// connection); with none it leaves the connection open, stalled in the
// hello. The caller closes the connection.
func ForgeHello(addr, job string, src, dst int, proof []byte) (net.Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := btl.NewStreamConn(nc, 4096, 0)
	hb := make([]byte, btl.MaxHeader)
	if err := writeHelloFrame(c, kindHello, src, dst, nonce(), []byte(job)); err != nil {
		return nc, err
	}
	if _, err := expectFrame(c, hb, kindChallenge, dst, src, nonceLen+macLen); err != nil {
		return nc, err
	}
	if proof == nil {
		return nc, nil
	}
	if err := writeHelloFrame(c, kindProof, src, dst, proof); err != nil {
		return nc, err
	}
	_, _, err = c.ReadHeader(hb)
	return nc, err
}

// ForgeBareHello plays an impostor that sends the hello of old, the job
// id alone, and a message behind it as rank src, with no proof at all; it
// returns the error of the read that follows (io.EOF when the acceptor
// closed the connection).
func ForgeBareHello(addr, job string, src, dst int) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	c := btl.NewStreamConn(nc, 4096, 0)
	if err := writeHelloFrame(c, kindHello, src, dst, []byte(job)); err != nil {
		return err
	}
	var hb [hdrLen]byte
	h := header{kind: kindData, src: int32(src), tag: 7}
	h.put(hb[:])
	if err := c.WriteFrame(hb[:], []byte("forged")); err != nil {
		return err
	}
	_, _, err = c.ReadHeader(make([]byte, btl.MaxHeader))
	return err
}

// ReadersDone is closed once every connection p accepted has been read to
// its end (its reader goroutines returned).
func ReadersDone(p *Proc) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		p.readers.Wait()
		close(ch)
	}()
	return ch
}

// ModexEntry is what peer published in the modex, as p knows it: what a
// migration's release carries for a moved rank (PeersMoved).
func ModexEntry(p *Proc, peer int) map[string]string {
	pe := p.peers[peer]
	e := map[string]string{"node": pe.ep.Node}
	for i, m := range p.mods {
		if pe.mod == m {
			e["btl_"+p.modName[i]] = pe.ep.Addr
		}
	}
	return e
}

// Sockets counts the connections p holds (dialed, accepted, in their
// hello) and the reader goroutines still running: none once Suspend
// returned.
func Sockets(p *Proc) (conns int, readers bool) {
	p.inMu.Lock()
	for _, c := range p.inFrom {
		if c != nil {
			conns++
		}
	}
	conns += len(p.pending)
	p.inMu.Unlock()
	for _, pe := range p.peers {
		pe.mu.Lock()
		if pe.out != nil {
			conns++
		}
		pe.mu.Unlock()
	}
	// Suspend waited for them: they are done at once, or still running.
	select {
	case <-ReadersDone(p):
	case <-time.After(10 * time.Second):
		readers = true
	}
	return conns, readers
}

// Listening returns the address each of p's transports published, by
// component name.
func Listening(p *Proc) map[string]string {
	out := map[string]string{}
	for i, ep := range p.selfEP {
		out[p.modName[i]] = ep.Addr
	}
	return out
}

// SetSpin turns the waiters' polling (Proc.spin) on or off, whatever the
// node's processors would choose.
func SetSpin(p *Proc, on bool) { p.spinOK.Store(on) }

// Pending is how many receives and probes wait on c's contexts: a test
// revokes once the ranks it wants interrupted are blocked.
func Pending(c *Comm) int {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return len(c.pt.posted) + len(c.co.posted) + len(c.pt.probes)
}

// Waiting is how many of p's goroutines wait for a message or a request.
func Waiting(p *Proc) int { return int(p.waiting.Load()) }

// RevokeOnlyTo revokes c here and sends its notice to the comm ranks
// given alone, as a process that dies midway through its sends would;
// it returns once those frames were written.
func RevokeOnlyTo(c *Comm, ranks []int) error {
	c.revokeSent.Store(true) // the full send is not wanted
	c.p.revoke(c.handle, -1)
	for _, r := range ranks {
		pe := c.p.peers[c.members[r]]
		op := &sendOp{kind: kindRevoke, ctx: c.handle, wake: make(chan error, 1)}
		pe.mu.Lock()
		c.p.enqueueLocked(pe, op)
		if err := <-op.wake; err != nil {
			return err
		}
	}
	return nil
}

// NextHandle is the handle p would give the next communicator it creates.
func NextHandle(p *Proc) uint64 {
	p.commMu.Lock()
	defer p.commMu.Unlock()
	return p.nextCtx
}

// SendRevokeNotice sends dst a revoke notice for handle, whatever p has
// of it, and returns once it was written.
func SendRevokeNotice(p *Proc, dst int, handle uint64) error {
	pe := p.peers[dst]
	op := &sendOp{kind: kindRevoke, ctx: handle, wake: make(chan error, 1)}
	pe.mu.Lock()
	p.enqueueLocked(pe, op)
	return <-op.wake
}

// OnAgreeSend sets a hook called before each message p sends for an
// agreement (Agree, Shrink): a test kills the rank at a chosen step.
func OnAgreeSend(p *Proc, f func()) { p.agrees.onSend.Store(&f) }

// AgreeCounts returns the messages p sent for agreements so far and the
// rounds on the critical path of the last one it decided.
func AgreeCounts(p *Proc) (sent, rounds int64) {
	return p.agrees.sent.Load(), p.agrees.hops.Load()
}

// TreeNeighbours are rank's parent (unless it is the root) and children
// in the control tree of a job of size ranks: those it writes one message
// to in each exchange or agreement.
func TreeNeighbours(rank, size int) []int {
	t := treeOf(rank, size)
	if t.parent < 0 {
		return t.children
	}
	return append([]int{t.parent}, t.children...)
}

// TreeMessages is how many messages rank writes in one exchange or
// agreement over the control tree of a job of size ranks.
func TreeMessages(rank, size int) int { return len(TreeNeighbours(rank, size)) }

// OutPeers returns the ranks p has a connection to (or a send queued
// for, which opens one).
func OutPeers(p *Proc) []int { return p.outPeers() }
