//go:build race

package sm

// raceOn reports a -race build. The race detector cannot see memory shared
// between processes, so the cross-process stress test gains nothing from
// it beyond what a short run shows, while every access it instruments
// makes a million frames take minutes: under -race the test runs a
// twentieth of its count, and CI runs it whole without -race.
const raceOn = true
