package jobs

import (
	"os"
	"strings"
	"testing"
	"time"

	"gompi/rte"
	"gompi/rte/control"
)

func TestParseProcStart(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 20 21"
	tests := []struct {
		in   string
		want uint64
		err  bool
	}{
		{"42 (gompirun)" + tail, 777, false},
		{"42 (a (b) c)" + tail, 777, false}, // a command name with spaces and parentheses
		{"42 (x) S 1 2", 0, true},
		{"no paren", 0, true},
		{"42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 zz 20", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseProcStart(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseProcStart(%q) = %d, %v", tt.in, got, err)
		}
	}
	if st, err := ProcStart(os.Getpid()); err != nil || st == 0 {
		t.Errorf("ProcStart(self) = %d, %v", st, err)
	}
}

func FuzzParseProcStart(f *testing.F) {
	f.Add("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 55 1 2")
	f.Add("9 ()) ) S")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseProcStart(s)
		if err == nil && !strings.Contains(s, ")") {
			t.Fatalf("parsed %d from a line without ')'", v)
		}
	})
}

// A job's directory holds a record and a secret only the owner can read;
// List returns live records and drops dead ones.
func TestWriteListRead(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	self := os.Getpid()
	ps, err := ProcStart(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := rte.HNPDir(self)
	if err := control.PrivateDir(dir); err != nil {
		t.Fatal(err)
	}
	s, _ := control.NewSecret()
	if err := WriteSecret(dir, s); err != nil {
		t.Fatal(err)
	}
	rec := Record{Job: "abcd0123", PID: self, NP: 2, Nodes: []string{"n1"}, Start: time.Now().Round(0), ProcStart: ps}
	if err := Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rte.JobRecordFile, rte.SecretFile} {
		st, err := os.Stat(dir + "/" + f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, st.Mode().Perm())
		}
	}
	got, err := List()
	if err != nil || len(got) != 1 || got[0].Job != rec.Job || !got[0].Start.Equal(rec.Start) {
		t.Fatalf("List() = %+v, %v", got, err)
	}
	// A directory still being set up (no record yet) by a live process stays.
	os.Remove(dir + "/" + rte.JobRecordFile)
	if got, _ := List(); len(got) != 0 {
		t.Errorf("List() = %+v without a record", got)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the directory of a live process without a record was removed: %v", err)
	}
	if _, err := Read(self); err == nil {
		t.Error("Read without a record succeeded")
	}
}
