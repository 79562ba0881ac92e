package rankclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gompi/mca"
	"gompi/rte"
)

func TestInitOutsideAJob(t *testing.T) {
	t.Setenv(rte.EnvRank, "")
	if InJob() {
		t.Fatal("InJob with no rank in the environment")
	}
	if _, err := Init(context.Background()); !errors.Is(err, ErrNotLaunched) {
		t.Errorf("Init: %v, want ErrNotLaunched", err)
	}
}

func TestInitBadEnvironment(t *testing.T) {
	tests := []struct {
		rank, secret, err string
	}{
		{"x", "", "GOMPI_RANK=\"x\" is not a rank"},
		{"-1", "", "is not a rank"},
		{"0", "short", "GOMPI_JOB_SECRET"},
	}
	for _, tt := range tests {
		t.Setenv(rte.EnvRank, tt.rank)
		t.Setenv(rte.EnvSecret, tt.secret)
		if _, err := Init(context.Background()); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Init with rank %q secret %q: %v, want %q", tt.rank, tt.secret, err, tt.err)
		}
	}
}

func TestSingleton(t *testing.T) {
	ctx := context.Background()
	c, err := Singleton(ctx, mca.SourceOptions{NoUserFiles: true, SysconfDir: t.TempDir(), MCA: []string{"plm_base_kill_grace=7s"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 || c.Node() != "localhost" || c.NodeOf(0) != "localhost" || c.NodeOf(1) != "" || !rte.ValidJobID(c.Job()) {
		t.Errorf("singleton: rank %d size %d node %s job %s", c.Rank(), c.Size(), c.Node(), c.Job())
	}
	if got := c.Values().String("plm_base_kill_grace"); got != "7s" {
		t.Errorf("parameter from the command line: %q", got)
	}
	all, err := c.Modex(ctx, map[string]string{"addr": "x"})
	if err != nil || len(all) != 1 || all[0]["addr"] != "x" {
		t.Errorf("Modex = %v, %v", all, err)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Error(err)
	}
	if err := c.Finalize(ctx); err != nil {
		t.Error(err)
	}
	if _, err := c.Modex(ctx, nil); !errors.Is(err, ErrFinalized) {
		t.Errorf("Modex after Finalize: %v, want ErrFinalized", err)
	}
}
