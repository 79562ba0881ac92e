// Package e2e holds the runtime's end-to-end tests: they build gompirun,
// gompid, gompi-ps and the test rank program (testdata/rte/rankprog) once,
// then run real jobs over several simulated nodes (plm local) and over ssh
// to a private sshd on 127.0.0.1, and check output, exit statuses, abort
// messages, signals, and that no process of a job outlives it.
package e2e
