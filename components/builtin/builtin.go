// Package builtin is the one list of components compiled into gompi. Adding
// a built-in component means adding a line here; nothing registers itself.
package builtin

import (
	"gompi/frameworks"
)

// Register adds every built-in component to the frameworks of set.
func Register(set *frameworks.Set) {
}
