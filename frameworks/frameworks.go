// Package frameworks holds one registry per framework of a process: the
// seven C/R frameworks (crs, crcp, inc, sstore, filem, snapc, errmgr) and
// the runtime's three (btl, the transports between ranks, coll, how a
// communicator's collectives run, and plm, how gompirun starts its
// daemons). Built-in components are added by package
// components/builtin, plugins by mca/plugin.
package frameworks

import (
	"gompi/frameworks/btl"
	"gompi/frameworks/coll"
	"gompi/frameworks/crcp"
	"gompi/frameworks/crs"
	"gompi/frameworks/errmgr"
	"gompi/frameworks/filem"
	"gompi/frameworks/inc"
	"gompi/frameworks/plm"
	"gompi/frameworks/snapc"
	"gompi/frameworks/sstore"
	"gompi/mca"
)

// Set is every framework registry of one process.
type Set struct {
	Params *mca.Params
	CRS    *mca.Framework[crs.Module]
	CRCP   *mca.Framework[crcp.Module]
	INC    *mca.Framework[inc.Module]
	SStore *mca.Framework[sstore.Module]
	FileM  *mca.Framework[filem.Module]
	SnapC  *mca.Framework[snapc.Module]
	ErrMgr *mca.Framework[errmgr.Module]
	BTL    *mca.Framework[btl.Module]
	Coll   *mca.Framework[coll.Module]
	PLM    *mca.Framework[plm.Module]
}

// New creates the registries and registers their framework parameters in params.
func New(params *mca.Params) *Set {
	return &Set{
		Params: params,
		CRS:    mca.NewFramework[crs.Module](params, crs.Name, "Checkpoint/Restart Service: capture and restore one process"),
		CRCP:   mca.NewFramework[crcp.Module](params, crcp.Name, "Checkpoint/Restart Coordination Protocol: consistent channel state between ranks"),
		INC:    mca.NewFramework[inc.Module](params, inc.Name, "Interlayer Notification Callbacks: the ordered callback stack around a checkpoint"),
		SStore: mca.NewFramework[sstore.Module](params, sstore.Name, "Stable Storage: where local snapshots go and when they are stable", mca.WithParams(sstore.FrameworkParams()...)),
		FileM:  mca.NewFramework[filem.Module](params, filem.Name, "File Management: moving files across node boundaries"),
		SnapC:  mca.NewFramework[snapc.Module](params, snapc.Name, "Snapshot Coordination: the life cycle of a global checkpoint", mca.WithParams(snapc.FrameworkParams()...)),
		ErrMgr: mca.NewFramework[errmgr.Module](params, errmgr.Name, "Error Manager: the stack of fault policies", mca.Stacked(), mca.WithParams(errmgr.FrameworkParams()...)),
		BTL:    mca.NewFramework[btl.Module](params, btl.Name, "Byte Transfer Layer: the transports between ranks; every allowed one is kept and each peer uses the best that reaches it", mca.Stacked()),
		Coll:   mca.NewFramework[coll.Module](params, coll.Name, "Collective operations: every allowed component is kept, and each operation of a communicator runs on the best one that applies to it and takes the call", mca.Stacked()),
		PLM:    plm.NewFramework(params),
	}
}

// All returns the frameworks in the order gompi-info lists them.
func (s *Set) All() []mca.FrameworkInfo {
	return []mca.FrameworkInfo{s.CRS, s.CRCP, s.INC, s.SStore, s.FileM, s.SnapC, s.ErrMgr, s.BTL, s.Coll, s.PLM}
}
