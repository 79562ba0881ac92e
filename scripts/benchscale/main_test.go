package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/snapc"
)

func TestOutcomeRow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := outcome{Events: []snapc.Event{
		{Phase: snapc.PhaseRequested, Time: at(0)},
		{Phase: snapc.PhaseQuery, Time: at(5)},
		{Phase: snapc.PhaseTarget, Time: at(6)},
		{Phase: snapc.PhaseLocalWrite, Node: "n1", Time: at(20)},
		{Phase: snapc.PhaseLocalWrite, Node: "n2", Time: at(30)},
		{Phase: snapc.PhaseSync, Time: at(35)},
		{Phase: snapc.PhaseCommit, Time: at(40)},
	}}
	r, err := outcomeRow(ok)
	if err != nil || r.Nodes != 2 || r.QueryMS != 5 || r.CoordinationMS != 30 || r.CommitMS != 40 {
		t.Errorf("outcomeRow: %+v, %v", r, err)
	}
	for name, o := range map[string]outcome{
		"failed":    {Error: "checkpoint failed"},
		"no commit": {Events: ok.Events[:5]},
	} {
		if _, err := outcomeRow(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestTable: medians per series and size, messages per rank, and the
// all-to-all count beside the simulated rows; a real row has times only.
func TestTable(t *testing.T) {
	rows := []row{
		{Series: "flat", N: 64, Nodes: 8, CoordinationMS: 30, RankFrames: 252, TreeMessages: 56, AppMessages: 256, Depth: 1, Fanout: 8, RankDepth: 6},
		{Series: "flat", N: 64, Nodes: 8, CoordinationMS: 10, RankFrames: 252, TreeMessages: 56, AppMessages: 256, Depth: 1, Fanout: 8, RankDepth: 6},
		{Series: "flat", N: 64, Nodes: 8, CoordinationMS: 20, RankFrames: 252, TreeMessages: 56, AppMessages: 256, Depth: 1, Fanout: 8, RankDepth: 6},
		{Series: "real", N: 4, Nodes: 1, CoordinationMS: 7},
	}
	var b bytes.Buffer
	group(rows).table(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "flat" || f[7] != "20.0" || f[13] != "564" || f[14] != "8.81" || f[15] != "8064" || f[16] != "(3)" {
		t.Errorf("flat row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "real" || f[7] != "7.0" || f[9] != "-" {
		t.Errorf("real row %q", lines[2])
	}
}
