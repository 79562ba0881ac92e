//go:build !gompitest

package stage

// testHooks: a build without -tags gompitest has no test hooks: the
// parameter sstore_stage_test_hold_fetch is not registered, so gompi-info
// does not list it and a job cannot set it.
const testHooks = false
