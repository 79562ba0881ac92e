package snapshot

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"gompi/frameworks/crs"
)

func withLaunch() *GlobalMeta {
	g := sampleGlobal()
	g.Launch = crs.Launch{Argv: []string{"/opt/app/heat", "-size", "64", "", "two words", `q"uote`},
		Dir: "/work/dir with space", Env: []string{"OMP_NUM_THREADS=1", "EMPTY=", "X=a=b"}}
	return g
}

func TestLaunchRoundTrip(t *testing.T) {
	for _, g := range []*GlobalMeta{withLaunch(), sampleGlobal()} {
		var buf bytes.Buffer
		if err := g.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := ParseGlobal(bytes.NewReader(buf.Bytes()), "m")
		if err != nil {
			t.Fatalf("%v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(got, g) {
			t.Errorf("round trip differs:\n%+v\n%+v\n%s", got.Launch, g.Launch, buf.String())
		}
	}
	var buf bytes.Buffer
	withLaunch().Encode(&buf)
	for _, want := range []string{
		"# Program: /opt/app/heat cwd=\"/work/dir with space\"\n",
		"# Arg: -size\n# Arg: 64\n# Arg: \"\"\n# Arg: \"two words\"\n",
		"# Export: \"OMP_NUM_THREADS=1\"\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metadata lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestLaunchParseErrors(t *testing.T) {
	head := "# Format: 1 kind=\"gompi global snapshot metadata\"\n# Job: j\n# Ranks: 1\n"
	tests := []struct{ name, in, want string }{
		{"relative program", head + "# Program: heat\n", "not an absolute path"},
		{"relative cwd", head + "# Program: /a cwd=here\n", "cwd \"here\" is not an absolute path"},
		{"two programs", head + "# Program: /a\n# Program: /b\n", "Program recorded twice"},
		{"arg first", head + "# Arg: x\n", "Arg before Program"},
		{"export first", head + "# Export: \"A=1\"\n", "Export before Program"},
		{"bad export", head + "# Program: /a\n# Export: novalue\n", "not NAME=value"},
		{"empty export name", head + "# Program: /a\n# Export: \"=v\"\n", "not NAME=value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseGlobal(strings.NewReader(tt.in), "gm")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// FuzzParseGlobalLaunch runs the global metadata round trip from seeds
// holding the launch records.
func FuzzParseGlobalLaunch(f *testing.F) {
	var b bytes.Buffer
	withLaunch().Encode(&b)
	f.Add(b.String())
	f.Add("# Format: 1 kind=\"gompi global snapshot metadata\"\n# Job: j\n# Ranks: 1\n# Program: /p cwd=/\n# Arg: \"\"\n# Export: \"A==\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		g, err := ParseGlobal(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := g.Encode(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ParseGlobal(&out, "again")
		if err != nil {
			t.Fatalf("re-parse of encoded metadata failed: %v\n%s", err, out.String())
		}
		if !reflect.DeepEqual(again, g) {
			t.Fatalf("round trip differs:\n%+v\n%+v", again, g)
		}
	})
}

// TestLaunchFormatUnchanged reads metadata written before the launch was a
// crs.Launch (testdata/launch-v1.meta, written by the package's former
// Launch type) and writes it back byte for byte: references taken by an
// older gompi still restart, and new ones read in an older gompi.
func TestLaunchFormatUnchanged(t *testing.T) {
	old, err := os.ReadFile("testdata/launch-v1.meta")
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGlobal(bytes.NewReader(old), "launch-v1.meta")
	if err != nil {
		t.Fatal(err)
	}
	want := withLaunch().Launch
	if !reflect.DeepEqual(g.Launch, want) {
		t.Errorf("launch read as %+v, want %+v", g.Launch, want)
	}
	var out bytes.Buffer
	if err := g.Encode(&out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), old) {
		t.Errorf("re-encoded metadata differs from the stored one:\n%s\nwant:\n%s", out.Bytes(), old)
	}
}
