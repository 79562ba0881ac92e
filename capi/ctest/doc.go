// Package ctest holds the differential tests of gompi's C interface (issue
// 22): its tests compile every C and C++ program under testdata/ twice,
// with Open MPI's mpicc/mpicxx (the reference) and with gompi's
// gompicc/gompicxx, run both at 1 to 8 ranks, and compare what each rank
// printed. The package has no code of its own beside the tests.
//
// A program includes testdata/ctest.h, takes the output folder as its
// first argument and writes one file per rank there (rank.N), one line per
// case: integers must be equal under both MPIs, floating-point numbers
// (tokens with a '.', an exponent, inf or nan) within a relative 1e-9.
// Lines a program prints starting with "FAIL" are its own checks of known
// results and fail the test under either MPI; lines starting with "mpi4:"
// are cases guarded by MPI_VERSION >= 4 (Open MPI 4.1 is MPI 3.1): they
// must pass their own checks but are not compared.
//
// A program needs the C functions its binary leaves undefined (nm -u); it
// is not applicable to gompi while `gompi-info --c-api` does not list them
// all. testdata/expected-pass names the programs that must pass on gompi:
// the test fails when one of them is not applicable or differs, so what
// works stays working. TestHeat compares examples/c/heat.c with
// examples/heat, and TestNetPIPE builds and runs NetPIPE's NPmpi
// (scripts/netpipe.sh) under both MPIs; the same file names them ("heat",
// "netpipe") once they must pass on gompi.
//
// The fault-tolerance tests run on gompi alone (Open MPI's packages ship
// without ULFM, and without gompi_cr.h): TestULFM and TestResilientC run
// testdata/ulfm/ulfm.c and examples/c/resilient.c under errmgr sustain,
// killing ranks; TestULFMCompiles builds an Open MPI-style ULFM program
// with both MPIs; TestHeatCR and TestHeatCRTerm checkpoint
// examples/c/heat_cr.c (gompi_cr.h) and restart it on other layouts, and
// TestHeatCRUnderCRIU does with crs=criu named (root and CRIU, else
// skipped).
package ctest
