package hnp

import (
	"os"
	"strings"
	"testing"
	"time"

	"gompi/frameworks/sstore/snapshot"
)

func TestCheckRestart(t *testing.T) {
	ref := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("abcd0001")}
	os.MkdirAll(ref.Path(), 0o755)
	now := time.Now()
	if err := snapshot.WriteGlobal(ref, &snapshot.GlobalMeta{Job: "abcd0001", Ranks: 4, Seqs: []snapshot.SeqRecord{
		{Seq: 0, Started: now, Finished: now, Committed: true, Procs: []snapshot.ProcRecord{ // every rank, as a commit records
			{Rank: 0, Node: "n1", CRS: "self"}, {Rank: 1, Node: "n1", CRS: "self"}, {Rank: 2, Node: "n2", CRS: "self"}, {Rank: 3, Node: "n2", CRS: "self"}}},
		{Seq: 1, Started: now}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		r    Restart
		np   int
		want string
	}{
		{Restart{Ref: ref, Seq: 0}, 4, ""},
		{Restart{Ref: ref, Seq: 1}, 4, "sequence 1 of " + ref.Path() + " was never committed"},
		{Restart{Ref: ref, Seq: 0}, 3, "holds a job of 4 ranks, not 3: restart it with -np 4"},
		{Restart{Ref: snapshot.Ref{Dir: ref.Dir, Name: "nope.ckpt"}, Seq: 0}, 4, "no snapshot reference"},
	}
	for _, tt := range tests {
		err := checkRestart(&tt.r, tt.np)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("checkRestart(%+v, %d) = %v, want %q", tt.r, tt.np, err, tt.want)
		}
	}
}
