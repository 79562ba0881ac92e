package info

import (
	"strings"
	"testing"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

func protectionValues(t *testing.T, settings ...string) *mca.Values {
	t.Helper()
	params := mca.NewParams()
	mca.NewFramework[snapc.Module](params, snapc.Name, "test", mca.WithParams(snapc.FrameworkParams()...))
	mca.NewFramework[sstore.Module](params, sstore.Name, "test", mca.WithParams(
		mca.ParamSpec{Name: snapshot.ParamStagePartner, Type: mca.String, Default: "ring"},
		mca.ParamSpec{Name: snapshot.ParamStageXORSet, Type: mca.Int, Default: "0"}))
	o := mca.Origin{Source: mca.SourceCommandLine, Where: "--mca"}
	var s []mca.Setting
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		s = append(s, mca.Setting{Name: k, Value: v, Origin: o})
	}
	vals, err := params.ResolveSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestProtection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []string
		want     []string // all in the line; none of the line when empty
	}{
		{"central", []string{"sstore=central"}, nil},
		{"stage, partner by default", []string{"sstore=stage"}, []string{"global storage, and snapshots on each node and in partner copies"}},
		{"stage, nothing but the node", []string{"sstore=stage", snapshot.ParamStagePartner + "=none"}, []string{"on each node only"}},
		{"no global storage", []string{"sstore=stage", snapc.ParamGlobalDir + "=none", snapshot.ParamStageXORSet + "=4"},
			[]string{"no global storage", "XOR sets of 4 nodes", "RISK: losing a node and its partner"}},
		{"none without stage", []string{"sstore=central", snapc.ParamGlobalDir + "=none"}, []string{"needs sstore stage"}},
	} {
		got := protection(protectionValues(t, tc.settings...))
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%s: %q, want nothing", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
