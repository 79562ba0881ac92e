// Command gompi-plugin-criu carries the transparent CRS criu
// (components/crs/criu) as a plugin, so that go-criu and CRIU's RPC live
// in a child of gompid and gompirun, never in a rank's binary: placed
// where mca_base_component_path looks (by default the installation's
// lib/gompi beside bin, or $HOME/.gompi/plugins), it adds crs=criu to the
// processes that load plugins. The processes it restores are its
// children (CRIU's restore-sibling mode); the daemon waits on them
// through the bridge.
package main

import (
	crscriu "gompi/components/crs/criu"
	"gompi/mca/plugin"
)

func main() {
	plugin.Serve(plugin.CRS(crscriu.New()))
}
