package mca

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParseParamFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string // substring; empty = no error
	}{
		{name: "empty", in: "", want: nil},
		{name: "simple", in: "crs = self\n", want: []Entry{{"crs", "self", 1}}},
		{name: "no spaces", in: "crs=self", want: []Entry{{"crs", "self", 1}}},
		{name: "empty value", in: "crs =\n", want: []Entry{{"crs", "", 1}}},
		{name: "comments and blanks", in: "# a comment\n\n  // another\nsnapc = full # kept\n",
			want: []Entry{{"snapc", "full # kept", 4}}},
		{name: "value kept verbatim", in: "x_y = a  b=c\t \n", want: []Entry{{"x_y", "a  b=c", 1}}},
		{name: "last wins order kept", in: "a = 1\na = 2\n", want: []Entry{{"a", "1", 1}, {"a", "2", 2}}},
		{name: "open mpi name chars", in: "opal.crs-x = 1", want: []Entry{{"opal.crs-x", "1", 1}}},
		{name: "crlf", in: "a = 1\r\nb = 2\r\n", want: []Entry{{"a", "1", 1}, {"b", "2", 2}}},
		{name: "bom", in: "\xef\xbb\xbfa = 1\n", want: []Entry{{"a", "1", 1}}},
		{name: "no equals", in: "ok = 1\njunk here\n", wantErr: "f.conf:2: \"junk here\" has no '='"},
		{name: "missing name", in: " = 3\n", wantErr: "f.conf:1: missing parameter name"},
		{name: "bad name char", in: "a b = 3\n", wantErr: "f.conf:1: parameter name \"a b\" has the character \" \""},
		{name: "invalid utf8", in: "a = \xff\n", wantErr: "f.conf:1: not valid UTF-8"},
		{name: "too long", in: "a = " + strings.Repeat("x", maxParamLine+10) + "\n", wantErr: "f.conf:1: line longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseParamFile(strings.NewReader(tt.in), "f.conf")
			if tt.wantErr != "" {
				var pe *ParseError
				if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ParseError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func FuzzParseParamFile(f *testing.F) {
	for _, s := range []string{"crs = self\n", "# c\na=\n", "a b\n", "x = y = z", "\xef\xbb\xbfq=1\r\n", "=\n",
		// hostile: a line past the bound, bad UTF-8, NUL, a count-like value
		"a = " + strings.Repeat("x", maxParamLine) + "\n", "a = \xff\n", "a\x00b = 1\n", "errmgr_autor_max_recoveries = 1000000000000000000000\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		entries, err := ParseParamFile(strings.NewReader(in), "fuzz")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, e := range entries {
			if e.Name == "" || strings.ContainsAny(e.Name, " =\n\t") {
				t.Fatalf("bad name %q", e.Name)
			}
			if e.Value != strings.TrimSpace(e.Value) || strings.ContainsAny(e.Value, "\n") {
				t.Fatalf("value not trimmed: %q", e.Value)
			}
			// What we parsed must parse back to itself.
			again, err := ParseParamFile(strings.NewReader(e.Name+" = "+e.Value+"\n"), "again")
			if err != nil || len(again) != 1 || again[0].Name != e.Name || again[0].Value != e.Value {
				t.Fatalf("round trip of %+v gave %+v, %v", e, again, err)
			}
		}
	})
}

// endlessComments is an endless parameter file of comment lines.
type endlessComments struct{ off int }

func (e *endlessComments) Read(p []byte) (int, error) {
	const line = "# a comment\n"
	for i := range p {
		p[i] = line[e.off]
		e.off = (e.off + 1) % len(line)
	}
	return len(p), nil
}

// A parameter file past MaxParamFileSize is refused once there, naming
// the file and the line, with bounded allocation; config.yaml likewise,
// before it is read.
func TestParamFileSizeBound(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ParseParamFile(&endlessComments{}, "endless.conf")
	runtime.ReadMemStats(&after)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.File != "endless.conf" || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("endless parameter file: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("%d bytes allocated to refuse it", n)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, MaxParamFileSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := readBounded(path); err == nil || !strings.Contains(err.Error(), path+" is larger than 16 MiB") {
		t.Errorf("oversized config.yaml: %v", err)
	}
}
