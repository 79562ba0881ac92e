//go:build !race

package sm

// raceOn: see race_test.go.
const raceOn = false
