package snapc

import (
	"strings"
	"testing"
	"time"

	"gompi/mca"
)

func TestGlobalDir(t *testing.T) {
	params := mca.NewParams()
	params.Register(Name, FrameworkParams()...)
	tests := []struct {
		value, home, want, err string
	}{
		{value: "/scratch", home: "/h", want: "/scratch"},
		{value: "", home: "/h", want: "/h"},
		{value: "", home: "", err: "snapc_base_global_snapshot_dir is empty and $HOME is not set"},
	}
	for _, tt := range tests {
		t.Setenv("HOME", tt.home)
		vals, err := params.ResolveSettings([]mca.Setting{{Name: ParamGlobalDir, Value: tt.value}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := GlobalDir(vals)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: %q, %v", tt, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%+v: %q, %v", tt, got, err)
		}
	}
}

func TestNames(t *testing.T) {
	for k, want := range map[LocalKind]string{LocalQuery: "query", LocalDone: "done", 42: "LocalKind(42)"} {
		if k.String() != want {
			t.Errorf("%d: %q", int(k), k.String())
		}
	}
	for p, want := range map[Phase]string{PhaseLocalWrite: "Local Write", PhaseFailed: "Error", "new": "new"} {
		if p.Title() != want {
			t.Errorf("%s: %q", p, p.Title())
		}
	}
}

func TestSuggestedInterval(t *testing.T) {
	tests := []struct {
		mtbf, c, want time.Duration
	}{
		{24 * time.Hour, 2 * time.Second, 588 * time.Second}, // sqrt(2*86400*2) = 587.9 s
		{time.Hour, 18 * time.Second, 360 * time.Second},
		{0, time.Second, 0},
		{time.Hour, 0, 0},
	}
	for _, tt := range tests {
		got := SuggestedInterval(tt.mtbf, tt.c).Round(time.Second)
		if got != tt.want {
			t.Errorf("SuggestedInterval(%v, %v) = %v, want %v", tt.mtbf, tt.c, got, tt.want)
		}
	}
}
