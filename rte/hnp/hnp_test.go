package hnp

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "gompi/rte/control/proto"
)

func TestResolveProgram(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644)
	t.Setenv("PATH", dir)
	tests := []struct {
		prog, want, err string
	}{
		{prog: "prog", want: exe},
		{prog: "./prog", want: exe},
		{prog: exe, want: exe},
		{prog: "./data", err: "is not executable"},
		{prog: "./nope", err: "not found"},
		{prog: "nope", err: "not found on $PATH"},
		{prog: dir, err: "is a directory"},
		{prog: "", err: "no program"},
	}
	for _, tt := range tests {
		got, err := ResolveProgram(tt.prog, dir)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ResolveProgram(%q) = %q, %v; want error %q", tt.prog, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ResolveProgram(%q) = %q, %v; want %q", tt.prog, got, err, tt.want)
		}
	}
}

func TestPrint(t *testing.T) {
	tests := []struct {
		tag    bool
		stream pb.Stream
		data   string
		out    string
		err    string
	}{
		{false, pb.Stream_STREAM_STDOUT, "a\nb\n", "a\nb\n", ""},
		{false, pb.Stream_STREAM_STDERR, "partial", "", "partial"},
		{true, pb.Stream_STREAM_STDOUT, "a\nb\n", "[j1,3]<stdout>:a\n[j1,3]<stdout>:b\n", ""},
		{true, pb.Stream_STREAM_STDERR, "x\ny", "", "[j1,3]<stderr>:x\n[j1,3]<stderr>:y\n"},
		{true, pb.Stream_STREAM_STDOUT, "\n", "[j1,3]<stdout>:\n", ""},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		j := &job{id: "j1", o: Options{TagOutput: tt.tag, Stdout: &out, Stderr: &errb}}
		j.print(&pb.RankOutput{Rank: 3, Stream: tt.stream, Data: []byte(tt.data)})
		if out.String() != tt.out || errb.String() != tt.err {
			t.Errorf("print(%q, tag=%v) wrote %q / %q, want %q / %q", tt.data, tt.tag, out.String(), errb.String(), tt.out, tt.err)
		}
	}
}

func TestNewJobID(t *testing.T) {
	a, err := NewJobID()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewJobID()
	if len(a) != 8 || a == b {
		t.Errorf("job ids %q, %q", a, b)
	}
}
