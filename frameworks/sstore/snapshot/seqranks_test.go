package snapshot

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seqOf is a committed sequence of n ranks with extra Seq fields.
func seqOf(seq, n int, fields string) string {
	return strings.Replace(committed(seq, n), "kind=checkpoint ", fields+" ", 1)
}

// A reference checkpointed on 4 ranks, restarted on 2 through a
// repartition sequence, then checkpointed on 2.
var resizedRef = globalHead + "# Ranks: 2\n" + seqOf(0, 4, "kind=checkpoint ranks=4") +
	seqOf(1, 2, "kind=repartition from=0") + committed(2, 2)

func TestSeqRanks(t *testing.T) {
	g, err := ParseGlobal(strings.NewReader(resizedRef), "meta")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, s := range g.Seqs {
		got = append(got, g.SeqRanks(s))
	}
	if !reflect.DeepEqual(got, []int{4, 2, 2}) || !g.Seqs[1].Repartition || g.Seqs[1].FromSeq != 0 || g.Seqs[0].Repartition {
		t.Fatalf("rank counts %v, sequences %+v", got, g.Seqs)
	}
	// A job of 8 ranks restarted from it pins every earlier count.
	g.SetRanks(8)
	g.Seqs = append(g.Seqs, SeqRecord{Seq: 3, Started: time.Now(), Finished: time.Now(), Committed: true, Procs: make([]ProcRecord, 8)})
	for r := range g.Seqs[3].Procs {
		g.Seqs[3].Procs[r] = ProcRecord{Rank: r, Node: "n", CRS: "self"}
	}
	var b bytes.Buffer
	if err := g.Encode(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	again, err := ParseGlobal(&b, "again")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	got = got[:0]
	for _, s := range again.Seqs {
		got = append(got, again.SeqRanks(s))
	}
	if !reflect.DeepEqual(got, []int{4, 2, 2, 8}) || again.Ranks != 8 {
		t.Fatalf("after a restart on 8 ranks: Ranks %d, sequences of %v ranks\n%s", again.Ranks, got, text)
	}
	if !strings.Contains(text, "# Seq: 1 kind=repartition started=2026-11-21T02:50:00Z ranks=2 from=0\n") || strings.Count(text, "ranks=") != 3 {
		t.Errorf("encoded (the counts of the first three sequences, none of the last):\n%s", text)
	}
}

// hostileSeqRanks are per-sequence rank counts that lie, each with what
// the refusal says.
var hostileSeqRanks = []struct{ name, in, want string }{
	{"a billion ranks in one sequence", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=checkpoint ranks=1000000000"), "want a rank count from 1 to"},
	{"just past the bound", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=checkpoint ranks=16777217"), "want a rank count from 1 to 16777216"},
	{"the bound, two processes", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=checkpoint ranks=16777216"), "committed sequence 0 records 2 processes but the job has 16777216 ranks"},
	{"zero ranks", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=checkpoint ranks=0"), "want a rank count from 1 to"},
	{"negative ranks", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=checkpoint ranks=-3"), "is not a non-negative number"},
	{"rank beyond the sequence's", globalHead + "# Ranks: 8\n" + seqOf(0, 8, "kind=checkpoint ranks=4"), "Process 4: the job has 4 ranks"},
	{"fewer processes than the sequence's", globalHead + "# Ranks: 2\n" + seqOf(0, 3, "kind=checkpoint ranks=4"), "records 3 processes but the job has 4 ranks"},
	{"repartition from itself", globalHead + "# Ranks: 2\n" + seqOf(0, 2, "kind=repartition from=0"), "made from an earlier sequence"},
	{"repartition from no number", globalHead + "# Ranks: 2\n" + seqOf(3, 2, "kind=repartition from=x"), "is not a non-negative number"},
	{"repartition from nothing", globalHead + "# Ranks: 2\n" + seqOf(3, 2, "kind=repartition"), "is not a non-negative number"},
}

func TestHostileSeqRanks(t *testing.T) {
	for _, tt := range hostileSeqRanks {
		t.Run(tt.name, func(t *testing.T) {
			g, err := ParseGlobal(strings.NewReader(tt.in), "hostile_meta")
			if err == nil {
				t.Fatalf("accepted: %+v", g)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "hostile_meta") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want ErrCorrupt naming the file and saying %q", err, tt.want)
			}
		})
	}
}

// FuzzParseGlobalSeqRanks: per-sequence counts and repartitions parse
// within bounds and round-trip.
func FuzzParseGlobalSeqRanks(f *testing.F) {
	f.Add(resizedRef)
	for _, tt := range hostileSeqRanks {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		g, err := ParseGlobal(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		for _, s := range g.Seqs {
			if n := g.SeqRanks(s); n < 1 || n > MaxRanks || (s.Committed && !s.Migrate && len(s.Procs) != n) {
				t.Fatalf("sequence %d: %d ranks, %d processes", s.Seq, n, len(s.Procs))
			}
		}
		var out bytes.Buffer
		if err := g.Encode(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ParseGlobal(&out, "again")
		if err != nil || !reflect.DeepEqual(again, g) {
			t.Fatalf("round trip: %v\n%s", err, out.String())
		}
	})
}
