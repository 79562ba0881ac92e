package daemon

import (
	"slices"
	"testing"
	"time"
)

// TestLiveness drives the detector's logic with an injected clock, the
// daemon's check every 100ms between steps: a rank is overdue after the
// timeout without a beat, once per silence; a rank with no open stream
// (detached for a dump, stopped by the runtime) is not watched; a
// reattach starts it again; a daemon that did not run for a while blames
// no rank for it.
func TestLiveness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		op   string // open, beat, close: at ms; check: every 100ms up to ms; stall: no check up to ms
		rank int
		ms   int
		want []int // check: the ranks overdue meanwhile
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"beating rank never overdue", []step{
			{op: "open", rank: 1}, {op: "check", ms: 900}, {op: "beat", rank: 1, ms: 900}, {op: "check", ms: 1800},
			{op: "beat", rank: 1, ms: 1800}, {op: "check", ms: 2700}, {op: "beat", rank: 1, ms: 2700}, {op: "check", ms: 3600},
		}},
		{"silent rank overdue at the timeout, once", []step{
			{op: "open", rank: 1}, {op: "check", ms: 500}, {op: "beat", rank: 1, ms: 500},
			{op: "check", ms: 1400}, {op: "check", ms: 1500, want: []int{1}}, {op: "check", ms: 5000},
		}},
		{"a beat after the report makes it count again", []step{
			{op: "open", rank: 1}, {op: "check", ms: 1000, want: []int{1}},
			{op: "beat", rank: 1, ms: 1000}, {op: "check", ms: 1900}, {op: "check", ms: 2000, want: []int{1}},
		}},
		{"detached rank is paused", []step{
			{op: "open", rank: 1}, {op: "check", ms: 200}, {op: "close", rank: 1, ms: 200}, {op: "check", ms: 60000},
		}},
		{"reattach resumes from the new stream", []step{
			{op: "open", rank: 1}, {op: "check", ms: 200}, {op: "close", rank: 1, ms: 200}, {op: "check", ms: 50000},
			{op: "open", rank: 1, ms: 50000}, {op: "check", ms: 50900}, {op: "check", ms: 51000, want: []int{1}},
		}},
		{"overlapping streams: the old one's end does not pause", []step{
			{op: "open", rank: 1}, {op: "check", ms: 100}, {op: "open", rank: 1, ms: 100}, {op: "close", rank: 1, ms: 100},
			{op: "check", ms: 1100, want: []int{1}},
		}},
		{"ranks apart", []step{
			{op: "open", rank: 1}, {op: "open", rank: 2}, {op: "check", ms: 600}, {op: "beat", rank: 2, ms: 600},
			{op: "check", ms: 1000, want: []int{1}}, {op: "check", ms: 1600, want: []int{2}},
		}},
		{"a beat on no stream watches nothing", []step{
			{op: "beat", rank: 3}, {op: "check", ms: 10000},
		}},
		{"a stalled daemon blames no rank", []step{
			{op: "open", rank: 1}, {op: "check", ms: 300}, {op: "stall", ms: 5000}, {op: "check", ms: 6000},
			{op: "check", ms: 6100, want: []int{1}}, // the clock restarted at the first check after the stall, 5100
		}},
		{"a short stall is no stall", []step{
			{op: "open", rank: 1}, {op: "check", ms: 300}, {op: "stall", ms: 700}, {op: "check", ms: 1000, want: []int{1}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLiveness(time.Second)
			checked := 0
			for i, s := range tt.steps {
				switch s.op {
				case "open":
					l.open(s.rank, at(s.ms))
				case "beat":
					l.beat(s.rank, at(s.ms))
				case "close":
					l.close(s.rank)
				case "stall":
					checked = s.ms
				case "check":
					var got []int
					for ; checked < s.ms; checked += 100 {
						for _, o := range l.overdue(at(checked + 100)) {
							got = append(got, o.rank)
							if o.for_ < time.Second {
								t.Errorf("step %d: rank %d overdue after %v, under the timeout", i, o.rank, o.for_)
							}
						}
					}
					slices.Sort(got)
					if !slices.Equal(got, s.want) {
						t.Errorf("step %d (checks up to %dms): overdue %v, want %v", i, s.ms, got, s.want)
					}
				}
			}
		})
	}
}

func TestLivenessOff(t *testing.T) {
	l := newLiveness(0)
	l.open(1, time.Unix(0, 0))
	if got := l.overdue(time.Unix(1e6, 0)); len(got) != 0 {
		t.Errorf("timeout 0: overdue %v, want none", got)
	}
}

func TestCheckEvery(t *testing.T) {
	for _, tt := range []struct{ timeout, want time.Duration }{
		{3 * time.Second, 150 * time.Millisecond},
		{30 * time.Second, time.Second},
		{100 * time.Millisecond, 10 * time.Millisecond},
	} {
		if got := checkEvery(tt.timeout); got != tt.want {
			t.Errorf("checkEvery(%v) = %v, want %v", tt.timeout, got, tt.want)
		}
	}
}
