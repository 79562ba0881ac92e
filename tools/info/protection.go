package info

import (
	"fmt"
	"slices"
	"strings"

	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/frameworks/sstore/snapshot"
	"gompi/mca"
)

// protection says where a job with vals keeps its snapshots and what it
// survives, when it stores with sstore stage or asks for no global
// storage; "" otherwise.
func protection(vals *mca.Values) string {
	if vals == nil {
		return ""
	}
	stage := vals.Has(sstore.Name) && slices.ContainsFunc(strings.Split(vals.String(sstore.Name), ","), func(c string) bool { return strings.TrimSpace(c) == "stage" })
	none := snapc.NoGlobal(vals)
	if !stage && !none {
		return ""
	}
	var on []string
	if vals.Has(snapshot.ParamStagePartner) && vals.String(snapshot.ParamStagePartner) != "none" {
		on = append(on, "partner copies ("+snapshot.ParamStagePartner+" "+vals.String(snapshot.ParamStagePartner)+")")
	}
	if vals.Has(snapshot.ParamStageXORSet) && vals.Int(snapshot.ParamStageXORSet) > 0 {
		on = append(on, fmt.Sprintf("XOR sets of %d nodes (%s)", vals.Int(snapshot.ParamStageXORSet), snapshot.ParamStageXORSet))
	}
	nodes := "on each node only"
	if len(on) > 0 {
		nodes = "on each node and in " + strings.Join(on, " and ")
	}
	switch {
	case none && !stage:
		return fmt.Sprintf("Snapshot protection: %s = %s needs sstore stage, which is not selected", snapc.ParamGlobalDir, snapc.GlobalNone)
	case none:
		return fmt.Sprintf("Snapshot protection: no global storage (%s = %s): snapshots %s. RISK: losing a node and its partner (or two nodes of one XOR set) loses the sequence", snapc.ParamGlobalDir, snapc.GlobalNone, nodes)
	}
	return "Snapshot protection: global storage, and snapshots " + nodes
}
