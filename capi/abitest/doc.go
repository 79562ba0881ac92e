// Package abitest holds the C interface's ABI test (its tests only): gompi's
// mpi.h must give every constant, predefined handle, type size and
// MPI_Status offset the MPI-5.0 standard's mpi_abi.h gives, and a program
// compiled against that mpi_abi.h alone must run on gompi's
// libmpi_abi.so.1. The standard's header comes from Debian's libmpich-dev
// 5.0.x, fetched at test time by scripts/fetch-mpich-abi.sh into
// .local/mpich-abi (never committed); $GOMPI_MPI_ABI_H names one instead.
package abitest
