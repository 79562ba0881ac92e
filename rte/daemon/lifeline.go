package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"gompi/rte/lifeline"
)

// A rank of a job whose CRS saves ranks from outside (criu: the ranks run
// under the rank init, shape.go) gets a lifeline (package rte/lifeline):
// two pipes, the rank reading gompid's word on one and writing its own on
// the other, handed to it as descriptors after the secret pipe and named
// in rte.EnvLifelineFDs. The rank init keeps its copies of them (package
// rankinit), so a dump records them as the tree's root's and a restore
// replaces them with the new daemon's pipes, at the same numbers, for the
// rank too (restoreRank, which then says Restart on them).
//
// gompid's ends live in the rank's record (rank.life). One reader per
// rank delivers the rank's words (Ready, Refused) to whoever waits for
// that request (the Dumper's Quiesce, dump.go); its end of file is the
// rank's whole process tree gone (the init holds the rank's write end
// too).

// wordBound bounds a write of gompid's word: a frame fits in a pipe's
// buffer unless the rank left many unread, and then it is not reading.
const wordBound = 10 * time.Second

// rankLife is gompid's end of one rank's lifeline.
type rankLife struct {
	rank int
	in   *os.File // the rank's words: Ready, Refused
	out  *os.File // gompid's words: Continue, Restart
	log  *slog.Logger
	wmu  sync.Mutex // one frame at a time on out

	mu      sync.Mutex
	waiters map[uint64]chan lifeline.Message
	// ready is the request the rank last said Ready for and has not been
	// given a word on since; 0 for none.
	ready uint64
	end   error         // why the reader ended
	done  chan struct{} // closed when the reader ended
}

// openLifeline makes a rank's lifeline: the rank's ends (rankR it reads,
// rankW it writes) and gompid's.
func openLifeline(rank int, log *slog.Logger) (l *rankLife, rankR, rankW *os.File, err error) {
	toRank, out, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lifeline pipe: %w", err)
	}
	in, fromRank, err := os.Pipe()
	if err != nil {
		toRank.Close()
		out.Close()
		return nil, nil, nil, fmt.Errorf("lifeline pipe: %w", err)
	}
	l = &rankLife{rank: rank, in: in, out: out, log: log, waiters: map[uint64]chan lifeline.Message{}, done: make(chan struct{})}
	return l, toRank, fromRank, nil
}

// read delivers the rank's words until the lifeline ends. Its owner is
// the rank's reaper (started): it runs from the rank's start and ends at
// the lifeline's end of file (the rank's process tree is gone), at a
// frame that is not one (the pipe cannot be read further), or when the
// reaper closes the lifeline once the rank's process ended (close).
// Every waiter left is then woken with its channel closed.
func (l *rankLife) read() {
	var end error
	for end == nil {
		m, err := lifeline.Read(l.in)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed):
			end = fmt.Errorf("rank %d ended (its lifeline closed)", l.rank)
		case err != nil:
			l.log.Error("rank's lifeline is unreadable; its checkpoints will fail", "rank", l.rank, "err", err)
			end = fmt.Errorf("rank %d's lifeline: %w", l.rank, err)
		default:
			if late := l.deliver(m); late {
				l.letGo(m.Request)
			}
		}
	}
	l.mu.Lock()
	l.end = end
	for id, c := range l.waiters {
		close(c)
		delete(l.waiters, id)
	}
	l.mu.Unlock()
	close(l.done)
}

// deliver hands one of the rank's words to the waiter of its request; a
// Ready nobody waits for any more is late (its Quiesce gave up).
func (l *rankLife) deliver(m lifeline.Message) (late bool) {
	if m.Kind != lifeline.Ready && m.Kind != lifeline.Refused {
		l.log.Warn("rank sent gompid's word on its lifeline; ignored", "rank", l.rank, "msg", m)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.Kind == lifeline.Ready {
		l.ready = m.Request
	}
	c, ok := l.waiters[m.Request]
	if !ok {
		l.log.Info("rank's word on a request nobody waits for", "rank", l.rank, "msg", m)
		return m.Kind == lifeline.Ready
	}
	delete(l.waiters, m.Request)
	c <- m
	return false
}

// letGo gives a rank that said Ready for request id, given up meanwhile,
// the word to go on: nobody will dump it, and, detached from gompid, it
// can no longer be withdrawn through its checkpoint coordinator.
func (l *rankLife) letGo(id uint64) {
	l.log.Info("rank quiesced for a request given up; it goes on", "rank", l.rank, "request", id)
	if err := l.say(lifeline.Message{Kind: lifeline.Continue, Request: id}); err != nil {
		l.log.Warn("could not let a quiesced rank go on", "rank", l.rank, "request", id, "err", err)
	}
}

// expect registers a wait for the rank's word on request id, before the
// request is sent; stop withdraws it, and lets the rank go on when its
// Ready came but was not taken. The channel brings the word, or is
// closed when the lifeline ended.
func (l *rankLife) expect(id uint64) (c <-chan lifeline.Message, stop func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != nil {
		return nil, nil, l.end
	}
	if _, dup := l.waiters[id]; dup {
		return nil, nil, fmt.Errorf("rank %d is already asked to quiesce for request %d", l.rank, id)
	}
	ch := make(chan lifeline.Message, 1)
	l.waiters[id] = ch
	return ch, func() {
		l.mu.Lock()
		if l.waiters[id] == ch {
			delete(l.waiters, id)
		}
		l.mu.Unlock()
		select {
		case m, ok := <-ch:
			if ok && m.Kind == lifeline.Ready {
				l.letGo(id)
			}
		default:
		}
	}, nil
}

// quiescing reports whether the rank is asked to quiesce or said it is
// ready: its connection to gompid closing then is its detaching for a
// dump, not its end.
func (l *rankLife) quiescing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end == nil && (len(l.waiters) > 0 || l.ready != 0)
}

// readyFor is the request the rank is quiesced for (0: none).
func (l *rankLife) readyFor() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ready
}

// ended returns why the lifeline ended, nil while it lasts.
func (l *rankLife) ended() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// say writes gompid's word m to the rank; the rank is no longer quiesced.
func (l *rankLife) say(m lifeline.Message) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_ = l.out.SetWriteDeadline(time.Now().Add(wordBound))
	err := lifeline.Write(l.out, m)
	_ = l.out.SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("rank %d: %w", l.rank, err)
	}
	l.mu.Lock()
	l.ready = 0
	l.mu.Unlock()
	return nil
}

// hangUp closes gompid's writing end: the rank reads end of file, which
// it takes for gompid gone.
func (l *rankLife) hangUp() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.out.Close()
}

// close closes gompid's ends, once the rank's process ended, and waits
// for the reader to end.
func (l *rankLife) close() {
	l.in.Close()
	l.hangUp()
	<-l.done
}
