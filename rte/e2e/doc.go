// Package e2e holds the runtime's end-to-end tests: they build gompirun,
// gompid, gompi-ps, gompi-checkpoint, gompi-restart and the test programs
// (testdata/rte/rankprog, testdata/rte/crprog, testdata/cr/ckpt,
// examples/heat) once, with -tags gompitest (the test hooks), then run real jobs over several simulated nodes
// (plm local) and over ssh to a private sshd on 127.0.0.1, and check
// output, exit statuses, abort messages, signals, that no process of a job
// outlives it, and checkpoint/restart: checkpoints, restarts on other nodes
// and transports, refusals, damaged snapshots, and crashes of every kind of
// process at each step of a checkpoint (held there by the
// snapc_full_test_pause_at test hook). The crs=criu tests of a C program
// (criu_c_test.go) also compile examples/c/mixloop.c with gompicc, against
// GOMPI_C_PREFIX's C interface when set, else one scripts/build-c.sh
// builds into the tests' tree.
package e2e
