//go:build race

package e2e

// raceBuild: under `go test -race` the binaries are built with the race
// detector too, so gompirun, gompid and the rank client are checked in
// real jobs.
const raceBuild = true
