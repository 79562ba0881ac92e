// Package builtin is the one list of components compiled into gompi. Adding
// a built-in component means adding a line here; nothing registers itself.
package builtin

import (
	btlsm "gompi/components/btl/sm"
	btltcp "gompi/components/btl/tcp"
	btluds "gompi/components/btl/uds"
	collbasic "gompi/components/coll/basic"
	collhan "gompi/components/coll/han"
	crcpbkmrk "gompi/components/crcp/bkmrk"
	crcpflag "gompi/components/crcp/flag"
	crcpnone "gompi/components/crcp/none"
	crsnone "gompi/components/crs/none"
	crsself "gompi/components/crs/self"
	errmgrautor "gompi/components/errmgr/autor"
	errmgrcrmig "gompi/components/errmgr/crmig"
	errmgrdefault "gompi/components/errmgr/default"
	errmgrrollback "gompi/components/errmgr/rollback"
	errmgrsustain "gompi/components/errmgr/sustain"
	filemraw "gompi/components/filem/raw"
	filemrsh "gompi/components/filem/rsh"
	filemsftp "gompi/components/filem/sftp"
	incdefault "gompi/components/inc/default"
	plmlocal "gompi/components/plm/local"
	plmslurm "gompi/components/plm/slurm"
	plmssh "gompi/components/plm/ssh"
	snapcfull "gompi/components/snapc/full"
	snapcnone "gompi/components/snapc/none"
	sstorecentral "gompi/components/sstore/central"
	sstorenone "gompi/components/sstore/none"
	sstorestage "gompi/components/sstore/stage"
	"gompi/frameworks"
)

// Register adds every built-in component to the frameworks of set.
func Register(set *frameworks.Set) {
	set.CRS.Register(crsnone.New())
	set.CRS.Register(crsself.New())
	set.CRCP.Register(crcpnone.New())
	set.CRCP.Register(crcpbkmrk.New())
	set.CRCP.Register(crcpflag.New())
	set.INC.Register(incdefault.New())
	set.SStore.Register(sstorenone.New())
	set.SStore.Register(sstorecentral.New())
	set.SStore.Register(sstorestage.New())
	set.FileM.Register(filemraw.New())
	set.SnapC.Register(snapcnone.New())
	set.SnapC.Register(snapcfull.New())
	set.ErrMgr.Register(errmgrdefault.New())
	set.ErrMgr.Register(errmgrautor.New())
	set.ErrMgr.Register(errmgrcrmig.New())
	set.ErrMgr.Register(errmgrsustain.New())
	set.ErrMgr.Register(errmgrrollback.New())
	set.BTL.Register(btltcp.New())
	set.BTL.Register(btluds.New())
	set.BTL.Register(btlsm.New())
	set.Coll.Register(collbasic.New())
	set.Coll.Register(collhan.New())
	set.PLM.Register(plmlocal.New())
	set.PLM.Register(plmssh.New())
	set.PLM.Register(plmslurm.New())
	set.FileM.Register(filemrsh.New())
	set.FileM.Register(filemsftp.New())
}
