package slurm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseNodeList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{in: "n1", want: []string{"n1"}},
		{in: "n[1-3]", want: []string{"n1", "n2", "n3"}},
		{in: "n[1-3,7],gpu[01-02]", want: []string{"n1", "n2", "n3", "n7", "gpu01", "gpu02"}},
		{in: "n[08-11]", want: []string{"n08", "n09", "n10", "n11"}},
		{in: "n[8-11]", want: []string{"n8", "n9", "n10", "n11"}},
		{in: "n[001-2]", want: []string{"n001", "n002"}},
		{in: "r[1-2]n[01-02]", want: []string{"r1n01", "r1n02", "r2n01", "r2n02"}},
		{in: "rack[1-2]-node[3]-ib", want: []string{"rack1-node3-ib", "rack2-node3-ib"}},
		{in: "a,b.example.org,c_1", want: []string{"a", "b.example.org", "c_1"}},
		{in: "n[3],n[3]", want: []string{"n3", "n3"}},
		{in: "[1-2]x", want: []string{"1x", "2x"}},
		{in: "", err: ErrSyntax},
		{in: "n1,,n2", err: ErrSyntax},
		{in: "n1,", err: ErrSyntax},
		{in: "n[1-3", err: ErrSyntax},
		{in: "n1-3]", err: ErrSyntax},
		{in: "n[[1]]", err: ErrSyntax},
		{in: "n[]", err: ErrSyntax},
		{in: "n[3-1]", err: ErrSyntax},
		{in: "n[1-]", err: ErrSyntax},
		{in: "n[-1]", err: ErrSyntax},
		{in: "n[a-b]", err: ErrSyntax},
		{in: "n[1,,2]", err: ErrSyntax},
		{in: "n[1-2-3]", err: ErrSyntax},
		{in: "n[1234567890]", err: ErrSyntax},
		{in: "n 1", err: ErrSyntax},
		{in: "n;rm", err: ErrSyntax},
		{in: "-n[1]", err: ErrSyntax},
		{in: "n[1-2]-", err: ErrSyntax},
		// hostile sizes: one range, a product of small ranges, many entries
		{in: "n[0-99999999]", err: ErrTooMany},
		{in: "n[0-999]m[0-999]", err: ErrTooMany},
		{in: "a[0-255]b[0-255]c[0-1]", err: ErrTooMany},
		{in: strings.Repeat("n[1-40000],", 2) + "n1", err: ErrTooMany},
		{in: "n[1-40000,1-40000]", err: ErrTooMany},
	}
	for _, tt := range tests {
		got, err := ParseNodeList(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseNodeList(%q) = %v, %v; want an error matching %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseNodeList(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// The largest list allowed expands; one name more is refused.
func TestParseNodeListBound(t *testing.T) {
	got, err := ParseNodeList("n[1-65536]")
	if err != nil || len(got) != MaxNodes || got[MaxNodes-1] != "n65536" {
		t.Fatalf("ParseNodeList(n[1-65536]) = %d names, %v", len(got), err)
	}
	if _, err := ParseNodeList("n[1-65536],m"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("one name over the bound: %v, want ErrTooMany", err)
	}
	if _, err := ParseNodeList(strings.Repeat("n", maxListLen+1)); !errors.Is(err, ErrTooMany) {
		t.Fatalf("list over the byte bound: %v, want ErrTooMany", err)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		err  error
	}{
		{in: "1", want: []int{1}},
		{in: "2(x3)", want: []int{2, 2, 2}},
		{in: "2(x3),1", want: []int{2, 2, 2, 1}},
		{in: "4,1(x2),16", want: []int{4, 1, 1, 16}},
		{in: "", err: ErrSyntax},
		{in: "0", err: ErrSyntax},
		{in: "2(x0)", err: ErrSyntax},
		{in: "2(3)", err: ErrSyntax},
		{in: "2(x3", err: ErrSyntax},
		{in: "(x3)", err: ErrSyntax},
		{in: "2(x3)x", err: ErrSyntax},
		{in: "-1", err: ErrSyntax},
		{in: "1,,2", err: ErrSyntax},
		{in: "2 ", err: ErrSyntax},
		{in: "1(x99999999)", err: ErrTooMany},
		{in: "1(x40000),1(x40000)", err: ErrTooMany},
	}
	for _, tt := range tests {
		got, err := ParseTasksPerNode(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseTasksPerNode(%q) = %v, %v; want an error matching %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseTasksPerNode(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// Whatever the input, ParseNodeList either fails with ErrSyntax or
// ErrTooMany, or returns at most MaxNodes valid node names; and a list of
// its names (written out in full) parses back to the same names.
func FuzzParseNodeList(f *testing.F) {
	for _, s := range []string{"n[1-3,7],gpu[01-02]", "r[1-2]n[01-02]", "n[08-11]", "a,b", "n[0-99999999]", "n[[1]]", "n[3-1]", "x[1-2]-y", "[0]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseNodeList(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("ParseNodeList(%q): error %v matches neither ErrSyntax nor ErrTooMany", s, err)
			}
			return
		}
		if len(got) == 0 || len(got) > MaxNodes {
			t.Fatalf("ParseNodeList(%q) = %d names", s, len(got))
		}
		for _, n := range got {
			if !validName(n) {
				t.Fatalf("ParseNodeList(%q) gave %q, not a node name", s, n)
			}
		}
		again, err := ParseNodeList(strings.Join(got, ","))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("names of %q written out parse as %q, %v", s, again, err)
		}
	})
}

// Whatever the input, ParseTasksPerNode either fails with ErrSyntax or
// ErrTooMany, or returns 1 to MaxNodes counts, each at least 1.
func FuzzParseTasksPerNode(f *testing.F) {
	for _, s := range []string{"2(x3),1", "1", "0", "1(x99999999)", "2(x", "3(x2),4(x1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTasksPerNode(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("ParseTasksPerNode(%q): error %v matches neither", s, err)
			}
			return
		}
		if len(got) == 0 || len(got) > MaxNodes {
			t.Fatalf("ParseTasksPerNode(%q) = %d counts", s, len(got))
		}
		for _, c := range got {
			if c < 1 {
				t.Fatalf("ParseTasksPerNode(%q) has count %d", s, c)
			}
		}
	})
}
