package lifeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"gompi/rte/control"
)

func secrets(t testing.TB) string {
	t.Helper()
	c, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	d, err := control.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return control.RankSecrets{Control: c, Data: d}.Text()
}

// TestRoundTripOverAPipe sends every kind over a real pipe, in order, and
// ends with the writer's close read as a clean io.EOF.
func TestRoundTripOverAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	msgs := []Message{
		{Kind: Refused, Request: 6, Reason: "rank 1 is finalizing"},
		{Kind: Ready, Request: 7},
		{Kind: Continue, Request: 7},
		{Kind: Restart, Request: 9, Daemon: "/tmp/gompi-0/node/daemon.sock", Node: "b", NodeDir: "/tmp/gompi-0/node", Secrets: secrets(t)},
	}
	for _, m := range msgs {
		if err := Write(w, m); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	for _, want := range msgs {
		got, err := Read(r)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("read %+v, wrote %+v", got, want)
		}
	}
	if _, err := Read(r); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func frame(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func TestRefusals(t *testing.T) {
	huge := binary.BigEndian.AppendUint32(nil, MaxFrame+1)
	tests := []struct {
		name  string
		input []byte
		want  string
		bad   bool // wraps ErrBadFrame
	}{
		{"length cut short", []byte{0, 0}, "read a frame's length", false},
		{"zero length", []byte{0, 0, 0, 0}, "length 0", true},
		{"oversize length", huge, "not a lifeline frame", true},
		{"body cut short", append(binary.BigEndian.AppendUint32(nil, 10), "{}"...), "read a 10-byte frame", false},
		{"not JSON", frame("hello"), "bad frame", true},
		{"unknown kind", frame(`{"kind":"explode"}`), `unknown kind "explode"`, true},
		{"restart without daemon", frame(`{"kind":"restart"}`), "names no daemon socket", true},
		{"refusal without reason", frame(`{"kind":"refused"}`), "says no reason", true},
		{"restart with bad secrets", frame(`{"kind":"restart","daemon":"/x","secrets":"abc"}`), "secrets", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read: %v, want %q", err, tt.want)
			}
			if errors.Is(err, ErrBadFrame) != tt.bad {
				t.Fatalf("Read: %v: wraps ErrBadFrame %v, want %v", err, errors.Is(err, ErrBadFrame), tt.bad)
			}
		})
	}
}

func TestWriteRefusesWhatReadWould(t *testing.T) {
	for _, m := range []Message{{Kind: "bogus"}, {Kind: Restart, Secrets: "x"}, {Kind: Restart, Daemon: "/d", Secrets: "x"}} {
		var b bytes.Buffer
		if err := Write(&b, m); err == nil || b.Len() != 0 {
			t.Errorf("Write(%+v): %v, wrote %d bytes", m, err, b.Len())
		}
	}
	var b bytes.Buffer
	if err := Write(&b, Message{Kind: Continue, Daemon: strings.Repeat("d", MaxFrame)}); err == nil || b.Len() != 0 {
		t.Errorf("oversize message: %v, wrote %d bytes", err, b.Len())
	}
}

// TestStringHidesSecrets: a message in a log never shows its secrets.
func TestStringHidesSecrets(t *testing.T) {
	m := Message{Kind: Restart, Request: 3, Daemon: "/d", Secrets: secrets(t)}
	ctl, _, _ := strings.Cut(m.Secrets, "\n")
	if s := m.String(); strings.Contains(s, ctl[:16]) || !strings.Contains(s, "restart") {
		t.Fatalf("String() = %q", s)
	}
}

// FuzzRead: whatever the pipe holds, Read returns a checked message or an
// error, never panics, and what it returns writes back to the same frame
// content.
func FuzzRead(f *testing.F) {
	f.Add(frame(`{"kind":"ready","request":1}`))
	f.Add(frame(`{"kind":"continue"}`))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := m.Check(); err != nil {
			t.Fatalf("Read returned an unchecked message %+v: %v", m, err)
		}
		var b bytes.Buffer
		if err := Write(&b, m); err != nil {
			t.Fatalf("Write of a message Read accepted: %v", err)
		}
		back, err := Read(&b)
		if err != nil || back != m {
			t.Fatalf("round trip: %+v, %v; want %+v", back, err, m)
		}
	})
}
