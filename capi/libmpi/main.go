// Command libmpi is gompi's C library: built with -buildmode=c-shared
// (scripts/build-c.sh) it is libmpi_abi.so.1, the MPI standard ABI's
// library over package mpi. Its functions are package capi's; a c-shared
// build needs a main package and an empty main.
package main

import _ "gompi/capi"

func main() {}
