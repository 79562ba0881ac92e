package info

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"gompi/capi/api"
)

// --c-api lists capi/api's implemented functions, one a line; capi's
// tests check that list against the built library's symbols.
func TestCAPI(t *testing.T) {
	cmd := newCommand(&Options{})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--c-api"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if !slices.Equal(got, api.Implemented()) {
		t.Errorf("gompi-info --c-api printed\n%s\nwant capi/api's list %v", out.String(), api.Implemented())
	}
	for _, f := range []string{"MPI_Init", "MPI_Send", "MPI_Allreduce", "MPI_Comm_rank"} {
		if !slices.Contains(got, f) {
			t.Errorf("%s is not listed", f)
		}
	}
	if slices.Contains(got, "MPI_Win_fence") {
		t.Error("MPI_Win_fence (one-sided, out of scope) is listed")
	}
	cmd = newCommand(&Options{})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--c-api", "--all"})
	if err := cmd.Execute(); err == nil {
		t.Error("--c-api --all: no error")
	}
}
