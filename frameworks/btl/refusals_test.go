package btl

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestRefusals(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var r Refusals
	for _, peer := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.1"} {
		r.Log(log, peer, errors.New("no proof"))
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{"level=WARN", "level=DEBUG", "level=WARN", "level=DEBUG"}
	for i, l := range lines {
		if i >= len(want) || !strings.Contains(l, want[i]) || !strings.Contains(l, "peer=10.0.0.") || !strings.Contains(l, `err="no proof"`) {
			t.Errorf("line %d: %s", i, l)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d lines, want %d", len(lines), len(want))
	}
	buf.Reset()
	var many Refusals
	for i := range maxRefusalPeers + 1 {
		many.Log(log, fmt.Sprint(i), errors.New("x"))
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != maxRefusalPeers {
		t.Errorf("%d warnings for %d peers, want %d (the memory is bounded)", n, maxRefusalPeers+1, maxRefusalPeers)
	}
}
