package run

import (
	"slices"
	"strings"
	"testing"
)

func TestNormalizeArgs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"-np 4 ./a", "--np 4 ./a"},
		{"-n 4 -host a,b ./a -np 2", "-n 4 --host a,b ./a -np 2"},
		{"-hostfile h -map-by node -tag-output -oversubscribe ./a", "--hostfile h --map-by node --tag-output --oversubscribe ./a"},
		{"-machinefile h ./a", "--machinefile h ./a"},
		{"-np=4 ./a", "--np=4 ./a"},
		{"-mca plm ssh -np 2 ./a -mca x y", "--mca=plm=ssh --np 2 ./a -mca x y"},
		{"-am ft-enable-cr -x A -x B=1 ./a", "--am=ft-enable-cr -x A -x B=1 ./a"},
		{"--np 2 -- -np", "--np 2 -- -np"},
		{"-H a -np 1 prog", "-H a --np 1 prog"},
		{"-x -np ./a", "-x -np ./a"}, // -np is -x's value
		{"", ""},
	}
	for _, tt := range tests {
		got := strings.Join(NormalizeArgs(strings.Fields(tt.in)), " ")
		if got != tt.want {
			t.Errorf("NormalizeArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Normalizing is idempotent (cli.Execute normalizes again) and never
// grows the arguments.
func FuzzNormalizeArgs(f *testing.F) {
	f.Add("-np 4 ./a -np 2")
	f.Add("-mca a b -x C ./p --mca d e")
	f.Add("-- -np")
	f.Add("-mca a=b -am x -host h prog")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		once := NormalizeArgs(args)
		if twice := NormalizeArgs(once); !slices.Equal(once, twice) {
			t.Fatalf("NormalizeArgs(%q) = %q, again %q", args, once, twice)
		}
		if len(once) > len(args) {
			t.Fatalf("NormalizeArgs(%q) = %q grew", args, once)
		}
	})
}
