package daemon

import (
	"slices"
	"testing"
)

func TestGOMAXPROCS(t *testing.T) {
	tests := []struct {
		name               string
		param, cpus, ranks int
		env                []string
		want               string // the GOMAXPROCS entry, "" for none
	}{
		{"shared out", 0, 8, 2, nil, "GOMAXPROCS=4"},
		{"rounded down", 0, 8, 3, nil, "GOMAXPROCS=2"},
		{"one core each", 0, 2, 2, nil, "GOMAXPROCS=1"},
		{"oversubscribed", 0, 2, 5, nil, "GOMAXPROCS=1"},
		{"no ranks", 0, 4, 0, nil, "GOMAXPROCS=4"},
		{"parameter", 3, 2, 2, nil, "GOMAXPROCS=3"},
		{"runtime default", -1, 2, 2, nil, ""},
		{"user's environment", 0, 8, 2, []string{"A=1", "GOMAXPROCS=7"}, "GOMAXPROCS=7"},
		{"user's environment over the parameter", 3, 8, 2, []string{"GOMAXPROCS=7"}, "GOMAXPROCS=7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := withGOMAXPROCS(slices.Clone(tt.env), tt.param, tt.cpus, tt.ranks)
			var got []string
			for _, kv := range env {
				if len(kv) > 11 && kv[:11] == "GOMAXPROCS=" {
					got = append(got, kv)
				}
			}
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("env %q: want no GOMAXPROCS", env)
			case tt.want != "" && !slices.Equal(got, []string{tt.want}):
				t.Errorf("env %q: want exactly %s", env, tt.want)
			}
		})
	}
}
