package e2e

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The launcher gives each rank GOMAXPROCS = max(1, cores / ranks on its
// node) unless plm_base_gomaxprocs or the ranks' environment says
// otherwise.
func TestGOMAXPROCS(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want0 int // rank 0's GOMAXPROCS (on n1); 0: the machine's cores
	}{
		// Ranks 0 and 1 share n1, rank 2 is alone on n2.
		{"shared out", nil, max(1, runtime.NumCPU()/2)},
		{"parameter", []string{"--mca", "plm_base_gomaxprocs", "3"}, 3},
		{"runtime default", []string{"--mca", "plm_base_gomaxprocs", "-1"}, runtime.NumCPU()},
		{"user's environment", []string{"-x", "GOMAXPROCS=5", "--mca", "plm_base_gomaxprocs", "3"}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"-np", "3", "--host", "n1:2,n2"}, tt.args...), rankprog(), "-gomaxprocs")
			code, out, errs := start(t, args...).wait()
			if code != 0 {
				t.Fatalf("exit status %d; stderr:\n%s", code, errs)
			}
			text := strings.Join(out, "\n") + "\n"
			want := fmt.Sprintf("rank 0 GOMAXPROCS %d\n", tt.want0)
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
			if tt.name == "shared out" {
				// Alone on its node, rank 2 gets every core.
				if want := fmt.Sprintf("rank 2 GOMAXPROCS %d\n", runtime.NumCPU()); !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
		})
	}
}
