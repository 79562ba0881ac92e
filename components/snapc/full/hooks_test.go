package full

import (
	"gompi/frameworks/snapc"
	"gompi/mca"
)

// newWithHooks is the component with its test hooks registered, whatever
// the build's tags: the package's tests drive the pause points through it.
func newWithHooks() mca.Component[snapc.Module] { return newComponent(true) }
