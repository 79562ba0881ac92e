//go:build !race

package mpi_test

// raceOn: see race_test.go.
const raceOn = false
