package daemon

import (
	"slices"
	"testing"
	"time"
)

// TestLiveness drives the detector's logic with an injected clock: a
// rank is overdue after the timeout without a beat, once per silence; a
// rank with no open stream (detached for a dump, stopped by the runtime)
// is not watched; a reattach starts it again.
func TestLiveness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		op   string // open, beat, close, check
		rank int
		ms   int
		want []int // check: the ranks overdue
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"beating rank never overdue", []step{
			{op: "open", rank: 1, ms: 0}, {op: "beat", rank: 1, ms: 900}, {op: "beat", rank: 1, ms: 1800},
			{op: "check", ms: 2799}, {op: "beat", rank: 1, ms: 2700}, {op: "check", ms: 3600},
		}},
		{"silent rank overdue at the timeout, once", []step{
			{op: "open", rank: 1, ms: 0}, {op: "beat", rank: 1, ms: 500},
			{op: "check", ms: 1499}, {op: "check", ms: 1500, want: []int{1}}, {op: "check", ms: 5000},
		}},
		{"a beat after the report makes it count again", []step{
			{op: "open", rank: 1, ms: 0}, {op: "check", ms: 1000, want: []int{1}},
			{op: "beat", rank: 1, ms: 1100}, {op: "check", ms: 2000}, {op: "check", ms: 2100, want: []int{1}},
		}},
		{"detached rank is paused", []step{
			{op: "open", rank: 1, ms: 0}, {op: "close", rank: 1, ms: 200}, {op: "check", ms: 60000},
		}},
		{"reattach resumes from the new stream", []step{
			{op: "open", rank: 1, ms: 0}, {op: "close", rank: 1, ms: 200}, {op: "open", rank: 1, ms: 50000},
			{op: "check", ms: 50999}, {op: "check", ms: 51000, want: []int{1}},
		}},
		{"overlapping streams: the old one's end does not pause", []step{
			{op: "open", rank: 1, ms: 0}, {op: "open", rank: 1, ms: 100}, {op: "close", rank: 1, ms: 150},
			{op: "check", ms: 1100, want: []int{1}},
		}},
		{"ranks apart", []step{
			{op: "open", rank: 1, ms: 0}, {op: "open", rank: 2, ms: 0}, {op: "beat", rank: 2, ms: 600},
			{op: "check", ms: 1000, want: []int{1}}, {op: "check", ms: 1600, want: []int{2}},
		}},
		{"a beat on no stream watches nothing", []step{
			{op: "beat", rank: 3, ms: 0}, {op: "check", ms: 10000},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLiveness(time.Second)
			for i, s := range tt.steps {
				switch s.op {
				case "open":
					l.open(s.rank, at(s.ms))
				case "beat":
					l.beat(s.rank, at(s.ms))
				case "close":
					l.close(s.rank)
				case "check":
					var got []int
					for _, o := range l.overdue(at(s.ms)) {
						got = append(got, o.rank)
						if o.for_ < time.Second {
							t.Errorf("step %d: rank %d overdue after %v, under the timeout", i, o.rank, o.for_)
						}
					}
					slices.Sort(got)
					if !slices.Equal(got, s.want) {
						t.Errorf("step %d (check at %dms): overdue %v, want %v", i, s.ms, got, s.want)
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
