//go:build race

package mpi_test

// raceOn: the race detector slows message traffic about tenfold, so the
// heaviest tests run shorter programs (the same checks).
const raceOn = true
