// Command gompi-plugin-kit is the plugin binary of the plugin bridge's
// tests: FileM "plugraw" (filem/raw under another name), CRS "plugnone"
// (crs/none renamed), and the test fixtures CRS "context", FileM
// "plugcrash" (exits on any call), FileM "plughang" (never answers) and
// FileM "plugorphan" (leaves a child holding its stderr, then exits).
package main

import (
	crsnone "gompi/components/crs/none"
	"gompi/components/filem/raw"
	"gompi/mca/plugin"
	"gompi/testdata/plugins/fixtures"
)

func main() {
	plugin.Serve(
		plugin.FileM(fixtures.Rename(raw.New(), "plugraw")),
		plugin.CRS(fixtures.Rename(crsnone.New(), "plugnone")),
		plugin.CRS(fixtures.ContextCRS()),
		plugin.FileM(fixtures.Crash()),
		plugin.FileM(fixtures.Hang()),
		plugin.FileM(fixtures.Orphan()),
	)
}
