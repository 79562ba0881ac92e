package info

import (
	"strings"
	"testing"
	"time"

	"gompi/frameworks/errmgr"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

func intervalValues(t *testing.T, dir, mtbf string) *mca.Values {
	t.Helper()
	params := mca.NewParams()
	mca.NewFramework[snapc.Module](params, snapc.Name, "test", mca.WithParams(snapc.FrameworkParams()...))
	mca.NewFramework[errmgr.Module](params, errmgr.Name, "test", mca.WithParams(errmgr.FrameworkParams()...))
	o := mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}
	vals, err := params.ResolveSettings([]mca.Setting{{Name: snapc.ParamGlobalDir, Value: dir, Origin: o}, {Name: errmgr.ParamMTBF, Value: mtbf, Origin: o}})
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestSuggestInterval(t *testing.T) {
	withCkpt := t.TempDir()
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ref := snapshot.Ref{Dir: withCkpt, Name: snapshot.RefName("aa11")}
	both := []snapshot.ProcRecord{{Rank: 0, Node: "n1", CRS: "self"}, {Rank: 1, Node: "n1", CRS: "self"}} // a commit records every rank
	if err := snapshot.ThisNode.WriteGlobal(t.Context(), ref, &snapshot.GlobalMeta{Job: "aa11", Ranks: 2, Seqs: []snapshot.SeqRecord{
		{Seq: 0, Started: t0, Finished: t0.Add(9 * time.Second), Committed: true, Procs: both},
		{Seq: 1, Started: t0.Add(time.Minute), Finished: t0.Add(time.Minute + 2*time.Second), Committed: true, Procs: both}, // the newest: C = 2 s
		{Seq: 2, Started: t0.Add(2 * time.Minute)},                                                                          // never committed
	}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, mtbf string
		want            time.Duration // suggested, rounded to seconds
		wantText        string
	}{
		{"measured", withCkpt, "24h", 588 * time.Second, "suggested snapc_base_periodic = 9m48s (sqrt(2 x errmgr_base_mtbf 24h0m0s x checkpoint time 2.00s, measured on " + ref.Name + " sequence 1))"},
		{"nothing timed", t.TempDir(), "1h", 0, "no committed checkpoint in"},
		{"remote folder", "sftp://node7/ckpt", "1h", 0, "is remote"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iv := suggestInterval(intervalValues(t, tt.dir, tt.mtbf))
			if iv == nil {
				t.Fatal("no interval with an MTBF set")
			}
			if got := iv.Suggested.Round(time.Second); got != tt.want {
				t.Errorf("suggested %v, want %v (%+v)", got, tt.want, iv)
			}
			if !strings.Contains(iv.text(), tt.wantText) {
				t.Errorf("text %q lacks %q", iv.text(), tt.wantText)
			}
		})
	}
	if iv := suggestInterval(intervalValues(t, withCkpt, "0")); iv != nil {
		t.Errorf("an interval without an MTBF: %+v", iv)
	}
}
