package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"

	pb "gompi/rte/control/proto"
)

// forward sends whole lines where it can, splits lines longer than a
// chunk, and sends what is left at the end.
func TestForward(t *testing.T) {
	long := strings.Repeat("x", maxChunk+10)
	tests := []struct {
		name   string
		writes []string
		want   string // all data, in order
		whole  bool   // every message but the last ends with a newline
	}{
		{"lines", []string{"a\n", "b\nc\n"}, "a\nb\nc\n", true},
		{"partial end", []string{"a\nb"}, "a\nb", true},
		{"long line", []string{long + "\n"}, long + "\n", false},
		{"nothing", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := newOutbox()
			d := &daemon{ports: out.ports(), log: slog.New(slog.DiscardHandler)}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { d.forward(4, pb.Stream_STREAM_STDERR, r); close(done) }()
			go func() {
				for _, s := range tt.writes {
					w.Write([]byte(s))
				}
				w.Close()
			}()
			var got bytes.Buffer
			var msgs []*pb.RankOutput
			for {
				select {
				case m := <-out.ch:
					o := m.GetOutput()
					if o.Rank != 4 || o.Stream != pb.Stream_STREAM_STDERR || len(o.Data) == 0 || len(o.Data) > maxChunk {
						t.Fatalf("bad message %v", o)
					}
					msgs = append(msgs, o)
					got.Write(o.Data)
					continue
				case <-done:
				}
				break
			}
			for len(out.ch) > 0 {
				o := (<-out.ch).GetOutput()
				msgs = append(msgs, o)
				got.Write(o.Data)
			}
			if got.String() != tt.want {
				t.Errorf("forwarded %q, want %q", got.String(), tt.want)
			}
			if tt.whole {
				for _, m := range msgs[:max(len(msgs)-1, 0)] {
					if !bytes.HasSuffix(m.Data, []byte("\n")) {
						t.Errorf("message %q split a line", m.Data)
					}
				}
			}
		})
	}
}
