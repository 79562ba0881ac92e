// Package e2e holds the runtime's end-to-end tests: they build gompirun,
// gompid, gompi-ps, gompi-checkpoint, gompi-restart and the test programs
// (testdata/rte/rankprog, testdata/rte/crprog, testdata/cr/ckpt,
// examples/heat) once, with -tags gompitest (the test hooks), then run real jobs over several simulated nodes
// (plm local) and over ssh to a private sshd on 127.0.0.1, and check
// output, exit statuses, abort messages, signals, that no process of a job
// outlives it, and checkpoint/restart: checkpoints, restarts on other nodes
// and transports, refusals, damaged snapshots, and crashes of every kind of
// process at each step of a checkpoint (held there by the
// snapc_full_test_pause_at test hook).
package e2e
