package hostfile

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Node
		err      string // substring; empty means success
	}{
		{name: "simple", in: "n1 slots=4\nn2 slots=2\n",
			want: []Node{{Name: "n1", Slots: 4, SlotsGiven: true}, {Name: "n2", Slots: 2, SlotsGiven: true}}},
		{name: "default one slot", in: "n1\n",
			want: []Node{{Name: "n1", Slots: 1}}},
		{name: "comments and blanks", in: "# cluster\n\n  n1 slots=2 # fast\n\t\n#n2\n",
			want: []Node{{Name: "n1", Slots: 2, SlotsGiven: true}}},
		{name: "max_slots", in: "n1 slots=2 max_slots=4\n",
			want: []Node{{Name: "n1", Slots: 2, MaxSlots: 4, SlotsGiven: true}}},
		{name: "max_slots only bounds default", in: "n1 max_slots=3\n",
			want: []Node{{Name: "n1", Slots: 1, MaxSlots: 3}}},
		{name: "open mpi aliases", in: "n1 count=3\nn2 cpu=2 max-slots=5\n",
			want: []Node{{Name: "n1", Slots: 3, SlotsGiven: true}, {Name: "n2", Slots: 2, MaxSlots: 5, SlotsGiven: true}}},
		{name: "repeated node adds slots", in: "n1 slots=2\nn2\nn1 slots=3\n",
			want: []Node{{Name: "n1", Slots: 5, SlotsGiven: true}, {Name: "n2", Slots: 1}}},
		{name: "ip address", in: "127.0.0.1 slots=2\n",
			want: []Node{{Name: "127.0.0.1", Slots: 2, SlotsGiven: true}}},
		{name: "upper-case key", in: "n1 SLOTS=2\n",
			want: []Node{{Name: "n1", Slots: 2, SlotsGiven: true}}},
		{name: "empty", in: "# nothing\n", err: "no nodes"},
		{name: "zero slots", in: "n1 slots=0\n", err: `hosts:1: "n1 slots=0": slots: "0" is not a count`},
		{name: "negative slots", in: "n1 slots=-2\n", err: "is not a count"},
		{name: "bad key", in: "n1\nn2 sluts=2\n", err: `hosts:2: "n2 sluts=2": unknown key "sluts"`},
		{name: "no value", in: "n1 slots\n", err: "want key=value"},
		{name: "twice", in: "n1 slots=1 count=2\n", err: "slots given twice"},
		{name: "over max", in: "n1 slots=5 max_slots=4\n", err: "slots=5 is more than max_slots=4"},
		{name: "repeat over max", in: "n1 slots=3 max_slots=4\nn1 slots=2\n", err: "5 slots in all is more than max_slots=4"},
		{name: "bad name", in: "n/1 slots=2\n", err: `"n/1" is not a node name`},
		{name: "shell name", in: "$(reboot)\n", err: "is not a node name"},
		{name: "huge", in: "n1 slots=99999999999999999999\n", err: "is not a count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in), "hosts")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSyntax) {
					t.Fatalf("Parse error %v, want ErrSyntax containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseHosts(t *testing.T) {
	tests := []struct {
		in   string
		want []Node
		err  string
	}{
		{in: "a", want: []Node{{Name: "a", Slots: 1}}},
		{in: "a,b:2", want: []Node{{Name: "a", Slots: 1}, {Name: "b", Slots: 2, SlotsGiven: true}}},
		{in: "a, a:3", want: []Node{{Name: "a", Slots: 4, SlotsGiven: true}}},
		{in: "a,,b", err: "empty node name"},
		{in: "a:0", err: "slots"},
		{in: "a:x", err: "slots"},
		{in: ":2", err: "is not a node name"},
		{in: "", err: "empty node name"},
	}
	for _, tt := range tests {
		got, err := ParseHosts(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSyntax) {
				t.Errorf("ParseHosts(%q) error %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseHosts(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// Whatever the input, Parse either fails with ErrSyntax or returns nodes
// with valid, unique names and slot counts within their limits.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"n1 slots=4\n", "# c\nn1\nn1 slots=2 max_slots=9\n", "a count=1 cpu=2", "n1 max_slots=0", "x slots=1\r\n",
		// hostile counts: huge, negative, zero, past an int, a sum past the bound
		"n1 slots=1000000000\n", "n1 slots=-1\n", "n1 slots=0\n", "n1 slots=99999999999999999999\n",
		"n1 slots=1048576\nn1 slots=1\n", "n1 max_slots=1000000000 slots=1000000000\n", "../n1 slots=1\n", "/etc/n1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := Parse(strings.NewReader(in), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		checkNodes(t, nodes)
	})
}

func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{"a,b:2", "a", "a:1,a:2", ",", "a:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ParseHosts(in)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		checkNodes(t, nodes)
	})
}

func checkNodes(t *testing.T, nodes []Node) {
	t.Helper()
	if len(nodes) == 0 {
		t.Fatal("no nodes and no error")
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if !ValidName(n.Name) || seen[n.Name] {
			t.Fatalf("bad or repeated name %q in %+v", n.Name, nodes)
		}
		seen[n.Name] = true
		if n.Slots < 1 || n.Slots > maxSlots || (n.MaxSlots > 0 && n.Slots > n.MaxSlots) {
			t.Fatalf("bad slots in %+v", n)
		}
	}
}

// endless is an endless stream of one repeated line.
type endless struct {
	line string
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.line[e.off]
		e.off = (e.off + 1) % len(e.line)
	}
	return len(p), nil
}

// A hostfile past maxFileSize (a log, /dev/zero named by mistake) is
// refused once there, with bounded allocation, naming the file.
func TestHostfileSizeBound(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(&endless{line: "# a comment\n"}, "endless")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "endless: larger than 64 MiB") {
		t.Errorf("endless hostfile: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("%d bytes allocated to refuse it", n)
	}
}
