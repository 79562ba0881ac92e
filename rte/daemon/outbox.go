package daemon

import (
	"sync"

	pb "gompi/rte/control/proto"
)

// outbox is the daemon's single, ordered way to the HNP: a rank's output
// and its exit travel in the order they were put.
type outbox struct {
	ch     chan *pb.DaemonMessage
	closed chan struct{}
	done   chan struct{} // the sender stopped
	once   sync.Once
}

func newOutbox() *outbox {
	return &outbox{ch: make(chan *pb.DaemonMessage, 1024), closed: make(chan struct{}), done: make(chan struct{})}
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

// ports are the daemon's ports to gompirun through the outbox.
func (o *outbox) ports() ports { return ports{send: o.put, gone: o.done} }

func (o *outbox) run(stream hnpStream) {
	defer close(o.done)
	for {
		select {
		case m := <-o.ch:
			if err := stream.Send(m); err != nil {
				return
			}
		case <-o.closed:
			for { // flush what was queued before closing
				select {
				case m := <-o.ch:
					if err := stream.Send(m); err != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}
