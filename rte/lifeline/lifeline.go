// Package lifeline is the link between gompid and a rank that a
// transparent checkpoint does not break. A CRS that saves a rank from
// outside (crs=criu) needs the rank to close every socket it owns before
// the dump, its control connection to gompid included, and to be told
// afterwards whether it goes on (continue) or has been restored in a new
// process (restart), and where its daemon now is. Sockets cannot carry
// that; two pipes can: gompid owns their other ends, and a restored
// process gets new pipes in their place (CRIU's inherit-fd), so the
// descriptors the rank reads and writes are the same numbers before and
// after.
//
// The rank writes on one pipe (Ready: quiesced, its sockets closed; it
// then waits; or Refused, with why), gompid on the other (Continue or Restart, with what the
// rank needs to reconnect). End of file on the daemon's pipe means gompid
// is gone. Each message is a frame: a 4-byte big-endian length, then the
// message as JSON, at most MaxFrame bytes; anything else is refused with
// what was wrong, and the reader stops there (a pipe that carried garbage
// cannot be resynchronised).
package lifeline

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gompi/rte/control"
)

// Kind is what a message says.
type Kind string

const (
	// Ready: the rank is quiesced and owns no socket (rank → gompid).
	Ready Kind = "ready"
	// Refused: the rank could not be quiesced for the request, or gave
	// it up when it was withdrawn (rank → gompid, Reason says why); it
	// goes on running, attached to gompid.
	Refused Kind = "refused"
	// Continue: the checkpoint is taken; reconnect to the same daemon
	// and carry on (gompid → rank).
	Continue Kind = "continue"
	// Restart: this process was restored from a snapshot; reconnect to
	// the daemon named, with the secrets given (gompid → rank).
	Restart Kind = "restart"
)

// MaxFrame bounds a message: a length beyond it is garbage, never a
// message, and is refused before anything is allocated.
const MaxFrame = 16 << 10

// ErrBadFrame is wrapped by Read's errors for what is not a message.
var ErrBadFrame = errors.New("lifeline: bad frame")

// Message is one frame's content.
type Message struct {
	Kind Kind `json:"kind"`
	// Request is the checkpoint request the message answers or ends, so
	// a late message of an abandoned request is told apart.
	Request uint64 `json:"request,omitempty"`
	// For Restart (and for a Continue after the daemon moved): the
	// daemon's socket, the rank's node and node directory.
	Daemon  string `json:"daemon,omitempty"`
	Node    string `json:"node,omitempty"`
	NodeDir string `json:"node_dir,omitempty"`
	// Secrets, in control.RankSecrets' text form, for Restart: the
	// restarted job's control secret and its launch generation's
	// data-plane secret. Never logged (String omits it).
	Secrets string `json:"secrets,omitempty"`
	// Reason: why a rank Refused.
	Reason string `json:"reason,omitempty"`
}

// String describes m without its secrets.
func (m Message) String() string {
	s := fmt.Sprintf("%s (request %d", m.Kind, m.Request)
	if m.Daemon != "" {
		s += ", daemon " + m.Daemon
	}
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	return s + ")"
}

// Check refuses a message whose kind is unknown or that lacks what its
// kind needs.
func (m Message) Check() error {
	switch m.Kind {
	case Ready, Continue:
	case Refused:
		if m.Reason == "" {
			return fmt.Errorf("%w: a refusal says no reason", ErrBadFrame)
		}
	case Restart:
		if m.Daemon == "" {
			return fmt.Errorf("%w: a restart message names no daemon socket", ErrBadFrame)
		}
		if _, err := control.ParseRankSecrets(m.Secrets); err != nil {
			return fmt.Errorf("%w: a restart message's secrets: %w", ErrBadFrame, err)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q (a newer gompid?)", ErrBadFrame, m.Kind)
	}
	return nil
}

// Write sends m as one frame. A frame of at most PIPE_BUF bytes (4096 on
// Linux) is written atomically to a pipe; Write makes one write call.
func Write(w io.Writer, m Message) error {
	if err := m.Check(); err != nil {
		return err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("lifeline: %w", err)
	}
	if len(body) > MaxFrame {
		return fmt.Errorf("lifeline: a %s message of %d bytes is over the %d-byte frame limit", m.Kind, len(body), MaxFrame)
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	if _, err := w.Write(append(frame, body...)); err != nil {
		return fmt.Errorf("lifeline: write %s: %w", m.Kind, err)
	}
	return nil
}

// Read reads one frame. io.EOF (unwrapped) means the other end closed
// between frames; an end inside a frame is io.ErrUnexpectedEOF.
func Read(r io.Reader) (Message, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return Message{}, io.EOF
		}
		return Message{}, fmt.Errorf("lifeline: read a frame's length: %w", err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size == 0 || size > MaxFrame {
		return Message{}, fmt.Errorf("%w: length %d (want 1 to %d bytes): not a lifeline frame", ErrBadFrame, size, MaxFrame)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return Message{}, fmt.Errorf("lifeline: read a %d-byte frame: %w", size, err)
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	if err := m.Check(); err != nil {
		return Message{}, err
	}
	return m, nil
}
