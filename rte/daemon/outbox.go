package daemon

import (
	"sync"

	pb "gompi/rte/control/proto"
)

// outbox is the daemon's single, ordered way to the HNP: a rank's output
// and its exit travel in the order they were put. It goes up the daemon's
// stream to its parent in the tree; when that parent is lost, the daemon
// attaches elsewhere and hands the outbox the new stream (swap): the
// message whose sending failed goes first on it.
type outbox struct {
	ch     chan *pb.DaemonMessage
	next   chan hnpStream
	closed chan struct{}
	done   chan struct{} // the sender stopped
	once   sync.Once
}

func newOutbox() *outbox {
	return &outbox{ch: make(chan *pb.DaemonMessage, 1024), next: make(chan hnpStream), closed: make(chan struct{}), done: make(chan struct{})}
}

// put queues m; it blocks while the queue is full (a rank writing faster
// than gompirun prints waits) and drops m once the outbox is closed.
func (o *outbox) put(m *pb.DaemonMessage) {
	select {
	case <-o.closed:
		return
	default:
	}
	select {
	case o.ch <- m:
	case <-o.closed:
	case <-o.done:
	}
}

func (o *outbox) close() { o.once.Do(func() { close(o.closed) }) }

// swap makes the outbox send on stream from now on; false once it stopped.
func (o *outbox) swap(stream hnpStream) bool {
	select {
	case o.next <- stream:
		return true
	case <-o.done:
		return false
	}
}

// ports are the daemon's ports to gompirun through the outbox.
func (o *outbox) ports() ports { return ports{send: o.put, gone: o.done} }

// run sends until the outbox is closed and flushed; a stream that breaks
// waits for the next (swap), or for the close.
func (o *outbox) run(stream hnpStream) {
	defer close(o.done)
	var failed *pb.DaemonMessage
	for {
		failed = o.sendOn(stream, failed)
		if failed == nil {
			return
		}
		select {
		case stream = <-o.next:
		case <-o.closed:
			return
		}
	}
}

// sendOn sends pending, then what is put, on stream until the outbox is
// closed and flushed (nil) or a send fails (the message that failed).
func (o *outbox) sendOn(stream hnpStream, pending *pb.DaemonMessage) *pb.DaemonMessage {
	send := func(m *pb.DaemonMessage) bool { return stream.Send(m) == nil }
	if pending != nil && !send(pending) {
		return pending
	}
	for {
		select {
		case s := <-o.next:
			stream = s
		case m := <-o.ch:
			if !send(m) {
				return m
			}
		case <-o.closed:
			for { // flush what was queued before closing
				select {
				case m := <-o.ch:
					if !send(m) {
						return nil
					}
				default:
					return nil
				}
			}
		}
	}
}
