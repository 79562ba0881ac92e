package hnp

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gompi/components/filem/raw"
	"gompi/frameworks"
	"gompi/frameworks/filem"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

func replicaValues(t *testing.T, settings ...string) *mca.Values {
	t.Helper()
	params := mca.NewParams()
	mca.NewFramework[snapc.Module](params, snapc.Name, "test", mca.WithParams(snapc.FrameworkParams()...))
	mca.NewFramework[sstore.Module](params, sstore.Name, "test", mca.WithParams(
		mca.ParamSpec{Name: snapshot.ParamStageRoot, Type: mca.String},
		mca.ParamSpec{Name: snapshot.ParamStagePartner, Type: mca.String, Default: "ring"},
		mca.ParamSpec{Name: snapshot.ParamStageXORSet, Type: mca.Int, Default: "0"}))
	var s []mca.Setting
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		s = append(s, mca.Setting{Name: k, Value: v, Origin: mca.Origin{Source: mca.SourceCommandLine}})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestReplicaStore: with partner copies on, each commit of the reference's
// metadata is copied into the stage folder of every node of the job that
// is on this machine; a node whose folder is not here is skipped with a
// warning; without stage, or with stage protecting nothing elsewhere, the
// store is the inner one.
func TestReplicaStore(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"n1", "n2"} {
		if err := os.MkdirAll(snapshot.StageNodeDir(root, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	global := snapshot.Ref{Dir: t.TempDir(), Name: snapshot.RefName("ab12")}
	vals := replicaValues(t, "sstore=stage", snapshot.ParamStageRoot+"="+root)
	// This machine's own name stands for a node elsewhere: its folder is
	// not here, and filem raw reaches the host of that name (itself).
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var opened int
	open := func(ctx context.Context) (filem.Module, error) {
		opened++
		set, rv := replicaFileM(t)
		c, err := set.FileM.SelectOne(ctx, rv, mca.RoleHNP, nil)
		return c.Module, err
	}
	ms := newReplicaStore(nil, vals, []string{"n1", "n1", "n2", host, "far"}, open, log)
	g := &snapshot.GlobalMeta{Job: "ab12", Ranks: 4}
	if err := ms.WriteGlobal(context.Background(), global, g); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2", host} {
		got, err := snapshot.ReadGlobal(snapshot.Ref{Dir: snapshot.StageRefsDir(root, n), Name: global.Name})
		if err != nil || got.Job != "ab12" {
			t.Errorf("node %s's copy: %+v, %v", n, got, err)
		}
	}
	// raw cannot reach a host "far": a warning, once, and no copy.
	if err := ms.WriteGlobal(context.Background(), global, g); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapshot.StageRefsDir(root, "far")); !os.IsNotExist(err) {
		t.Errorf("a copy was made for an unreachable node: %v", err)
	}
	if n := strings.Count(logBuf.String(), "node=far"); n != 1 || !strings.Contains(logBuf.String(), "host unreachable") {
		t.Errorf("%d warnings for the unreachable node: %s", n, logBuf.String())
	}
	if opened != 1 {
		t.Errorf("FileM selected %d times, want once", opened)
	}
	if err := ms.(*replicaStore).Close(); err != nil {
		t.Error(err)
	}

	for _, settings := range [][]string{
		{"sstore=central"},
		{"sstore=stage", snapshot.ParamStagePartner + "=none"},
	} {
		if _, ok := newReplicaStore(snapshot.ThisNode, replicaValues(t, settings...), []string{"n1", "n2"}, nil, log).(*replicaStore); ok {
			t.Errorf("%v: metadata copied to the nodes", settings)
		}
	}
}

// replicaFileM is a FileM framework with raw, as gompirun selects it.
func replicaFileM(t *testing.T) (*frameworks.Set, *mca.Values) {
	t.Helper()
	params := mca.NewParams()
	set := frameworks.New(params)
	set.FileM.Register(raw.New())
	vals, err := params.ResolveSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	return set, vals
}

func TestNoGlobalRef(t *testing.T) {
	root := t.TempDir()
	ref, err := noGlobalRef(replicaValues(t, "sstore=stage", snapshot.ParamStageRoot+"="+root, snapc.ParamGlobalDir+"=none"), []string{"n7", "n8"}, "r")
	if err != nil || ref.Dir != filepath.Join(root, "n7", ".refs") || ref.Name != "r" {
		t.Errorf("ref %+v, %v", ref, err)
	}
	if _, err := noGlobalRef(replicaValues(t, "sstore=central", snapc.ParamGlobalDir+"=none"), []string{"n7"}, "r"); err == nil || !strings.Contains(err.Error(), "needs sstore stage") {
		t.Errorf("none with central: %v", err)
	}
	if !protectsOnNodes(replicaValues(t, "sstore=stage", snapshot.ParamStagePartner+"=none", snapc.ParamGlobalDir+"=none")) {
		t.Errorf("none does not copy the metadata to the nodes")
	}
}
