//go:build gompitest

package full

// testHooks: this build registers the test hooks' parameters
// (snapc_full_test_pause_at). Only the end-to-end tests build gompi with
// -tags gompitest; the binaries users get do not list or accept them.
const testHooks = true
