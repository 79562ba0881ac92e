package filem_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	filemraw "gompi/components/filem/raw"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/filem/filemtest"
	"gompi/mca"
)

func rawModule(t *testing.T) filem.Module {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(filemraw.New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := set.FileM.SelectOne(t.Context(), vals, mca.RoleDaemon, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Module
}

func TestBroadcastGather(t *testing.T) {
	m := rawModule(t)
	root := t.TempDir()
	src := filepath.Join(root, "snap")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "state"), []byte("rank state"), 0o600); err != nil {
		t.Fatal(err)
	}
	var nodes []filem.Remote
	for _, n := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, filem.Remote{Path: filepath.Join(root, n, "preload", "snap")})
	}
	if err := filem.Broadcast(t.Context(), m, src, nodes); err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes {
		b, err := os.ReadFile(filepath.Join(r.Path, "sub", "state"))
		if err != nil || string(b) != "rank state" {
			t.Errorf("%s: %q, %v", r, b, err)
		}
	}

	// One destination fails (a file is where its parent should be): the
	// error names only it, the others are delivered.
	blocker := filepath.Join(root, "blocked")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	to := []filem.Remote{{Path: filepath.Join(root, "ok1", "snap")}, {Path: filepath.Join(blocker, "snap")}, {Path: filepath.Join(root, "ok2", "snap")}}
	err := filem.Broadcast(t.Context(), m, src, to)
	tes := filemtest.TransferErrors(err)
	if len(tes) != 1 || tes[0].Dst != to[1].String() {
		t.Errorf("broadcast with one bad destination: %v; want exactly one transfer error, for %s", err, to[1])
	}
	for _, r := range []filem.Remote{to[0], to[2]} {
		if _, err := os.Stat(filepath.Join(r.Path, "sub", "state")); err != nil {
			t.Errorf("%s was not delivered: %v", r, err)
		}
	}

	// Gather the per-node files back under their names.
	var from []filem.Remote
	for i, n := range []string{"n1", "n2", "n3"} {
		p := filepath.Join(root, n, "gompi_snapshot_"+string(rune('0'+i))+".ckpt")
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
		from = append(from, filem.Remote{Path: p})
	}
	out := filepath.Join(root, "gathered")
	if err := filem.Gather(t.Context(), m, from, out); err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"n1", "n2", "n3"} {
		b, err := os.ReadFile(filepath.Join(out, filepath.Base(from[i].Path)))
		if err != nil || string(b) != n {
			t.Errorf("gathered %s: %q, %v", from[i], b, err)
		}
	}
	missing := append(from[:1:1], filem.Remote{Path: filepath.Join(root, "n2", "nothing")})
	err = filem.Gather(t.Context(), m, missing, filepath.Join(root, "gathered2"))
	if tes := filemtest.TransferErrors(err); len(tes) != 1 || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("gather with a missing source: %v", err)
	}

	for _, tc := range []struct {
		from []filem.Remote
		want string
	}{
		{[]filem.Remote{{Host: "a", Path: "/x/snap"}, {Host: "b", Path: "/y/snap/"}}, "same name"},
		{[]filem.Remote{{Host: "a", Path: "/"}}, "no file name"},
		{[]filem.Remote{{Host: "a", Path: ""}}, "no file name"},
	} {
		err := filem.Gather(t.Context(), m, tc.from, out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Gather(%v) = %v, want an error saying %q", tc.from, err, tc.want)
		}
	}
	if err := filem.Broadcast(t.Context(), m, src, nil); err != nil {
		t.Errorf("broadcast to nobody: %v", err)
	}
}
