// Command gompi-plugin-builtins is a plugin binary of the plugin bridge's
// tests carrying built-in components under their own names, so each
// framework's conformance kit runs against them through the bridge as it
// runs in process: sstore central and stage (stage drains through the
// host's FileM, lent back over the bridge), errmgr autor (whose job is a
// Recoverer) and sustain, plm local and snapc full (its coordinators held
// in the plugin, the job's links lent back); and the test fixtures CRS
// restorer, which takes a crs.Host (a rank's Save, a daemon's node) and
// is a crs.Restorer (a Restore's descriptors cross), and SStore reporter,
// whose Sync reports progress. Its names clash with the built-ins, so it
// is only loaded where no built-in is registered.
package main

import (
	"gompi/components/errmgr/autor"
	errmgrsustain "gompi/components/errmgr/sustain"
	plmlocal "gompi/components/plm/local"
	snapcfull "gompi/components/snapc/full"
	"gompi/components/sstore/central"
	"gompi/components/sstore/stage"
	"gompi/mca/plugin"
	"gompi/testdata/plugins/fixtures"
)

func main() {
	plugin.Serve(
		plugin.SStore(central.New()),
		plugin.SStore(stage.New()),
		plugin.ErrMgr(autor.New()),
		plugin.ErrMgr(errmgrsustain.New()),
		plugin.PLM(plmlocal.New()),
		plugin.SnapC(snapcfull.New()),
		plugin.CRS(fixtures.RestorerCRS()),
		plugin.SStore(fixtures.ReporterSStore()),
	)
}
