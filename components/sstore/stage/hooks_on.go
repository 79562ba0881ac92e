//go:build gompitest

package stage

// testHooks: this build registers the test hooks' parameters
// (sstore_stage_test_hold_fetch). Only the end-to-end tests build gompi
// with -tags gompitest; the binaries users get do not list or accept them.
const testHooks = true
