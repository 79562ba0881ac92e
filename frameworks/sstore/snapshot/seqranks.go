package snapshot

import (
	"fmt"
	"strconv"
	"time"
)

// The rank count of each sequence. A reference's Ranks is the rank count
// of the job that writes it now; a job restarted on another rank count
// (gompi-restart -np M) goes on in the same reference, so a Seq record
// whose count differs carries its own (ranks=N), and a sequence
// gompi-restart made for such a restart says from which one
// (kind=repartition from=S). Both fields are written only when they say
// something: metadata of a reference that never changed its rank count
// reads as before.

// MaxRanks bounds a sequence's rank count as the metadata states it: a
// committed sequence must then record that many Process lines, which
// MaxMetaSize bounds far below; this bound only keeps the number sane.
const MaxRanks = 1 << 24

// SeqRanks is seq's rank count: its own, or the reference's when the
// record (one being built) has none.
func (g *GlobalMeta) SeqRanks(s SeqRecord) int {
	if s.Ranks > 0 {
		return s.Ranks
	}
	return g.Ranks
}

// SetRanks makes n the reference's rank count, the count of the job
// writing it now, and pins every recorded sequence to the count it was
// taken with.
func (g *GlobalMeta) SetRanks(n int) {
	for i := range g.Seqs {
		g.Seqs[i].Ranks = g.SeqRanks(g.Seqs[i])
	}
	g.Ranks = n
}

// seqFields are the fields of s's Seq record.
func seqFields(g *GlobalMeta, s SeqRecord) []string {
	kind := "checkpoint"
	switch {
	case s.Migrate:
		kind = "migrate"
	case s.Repartition:
		kind = "repartition"
	}
	kv := []string{"kind", kind, "started", s.Started.UTC().Format(time.RFC3339Nano)}
	if n := g.SeqRanks(s); n != g.Ranks {
		kv = append(kv, "ranks", strconv.Itoa(n))
	}
	if s.Repartition {
		kv = append(kv, "from", strconv.Itoa(s.FromSeq))
	}
	return kv
}

// seqExtra reads the rank count and origin of a Seq record into s.
func (p *globalParser) seqExtra(s SeqRecord, rec record) (SeqRecord, error) {
	if v, ok := rec.fields["ranks"]; ok {
		n, err := rec.atoi(v, "rank count")
		if err != nil {
			return s, err
		}
		if n < 1 || n > MaxRanks {
			return s, fmt.Errorf("ranks=%d: want a rank count from 1 to %d", n, MaxRanks)
		}
		if n != p.g.Ranks {
			s.Ranks = n // the reference's count stays implicit, as Encode writes it
		}
	}
	if rec.fields["kind"] != "repartition" {
		return s, nil
	}
	from, err := rec.atoi(rec.fields["from"], "sequence it was made from")
	if err != nil {
		return s, err
	}
	if from > maxSeq || from >= s.Seq {
		return s, fmt.Errorf("from=%d: a repartition is made from an earlier sequence", from)
	}
	s.Repartition, s.FromSeq = true, from
	return s, nil
}
