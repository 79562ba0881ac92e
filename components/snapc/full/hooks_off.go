//go:build !gompitest

package full

// testHooks: a build without -tags gompitest has no test hooks: the
// parameter snapc_full_test_pause_at is not registered, so gompi-info does
// not list it and a job cannot set it.
const testHooks = false
