#!/usr/bin/env bash
# Builds and installs gompi's C interface into PREFIX (default: the
# repository's root):
#   PREFIX/lib/libmpi_abi.so.1   the library (soname libmpi_abi.so.1), with
#                                libmpi_abi.so and libmpi.so links beside it
#   PREFIX/include/mpi.h         the header (MPI-5.0 standard ABI), with
#                                mpi-ext.h (ULFM) and gompi_cr.h (C/R API)
#   PREFIX/bin/gompicc, gompicxx the compiler wrappers
#   PREFIX/share/gompi/wrappers/ mpicc, mpicxx, mpiexec and mpirun (links
#                                to gompicc, gompicxx and gompirun): the
#                                folder a user puts first on PATH
#   PREFIX/lib/pkgconfig/        gompi.pc and mpi.pc (relocatable)
# and the runtime's commands (gompirun, gompid, ...) into PREFIX/bin when
# missing there, so `PREFIX/bin/gompirun -np 2 ./prog` runs a C program.
#
#   bash scripts/build-c.sh [PREFIX]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix=${1:-$(pwd)}
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/share/gompi/wrappers" "$prefix/lib/gompi"

# The library: the soname is what programs record, so a program linked with
# -lmpi (libmpi.so) or against any MPI-5.0 ABI library loads this one.
go build -buildmode=c-shared -ldflags "-extldflags=-Wl,-soname,libmpi_abi.so.1" \
	-o "$prefix/lib/libmpi_abi.so.1" ./capi/libmpi
rm -f "$prefix/lib/libmpi_abi.so.1.h" # cgo's header of the Go exports: internal
ln -sf libmpi_abi.so.1 "$prefix/lib/libmpi_abi.so"
ln -sf libmpi_abi.so.1 "$prefix/lib/libmpi.so"
install -m 644 capi/include/mpi.h capi/include/mpi-ext.h capi/include/gompi_cr.h "$prefix/include/"

go build -o "$prefix/bin/" ./cmd/gompicc ./cmd/gompicxx
ln -sf ../../../bin/gompicc "$prefix/share/gompi/wrappers/mpicc"
ln -sf ../../../bin/gompicxx "$prefix/share/gompi/wrappers/mpicxx"
# mpiexec too: CMake's FindMPI finds mpiexec first and then takes the
# compiler wrappers from its folder, so without it another MPI's wins.
ln -sf ../../../bin/gompirun "$prefix/share/gompi/wrappers/mpiexec"
ln -sf ../../../bin/gompirun "$prefix/share/gompi/wrappers/mpirun"

for pc in gompi mpi; do
	cat >"$prefix/lib/pkgconfig/$pc.pc" <<PC
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: $pc
Description: gompi's MPI (MPI-5.0 standard ABI, libmpi_abi.so.1)
Version: 5.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmpi
PC
done

# gompi-info lists the C functions the library implements (--c-api), so
# it is rebuilt with the library; the other commands only when missing.
go build -o "$prefix/bin/" ./cmd/gompi-info
missing=()
for c in gompirun gompid gompi-checkpoint gompi-restart gompi-migrate gompi-ps gompi; do
	[ -x "$prefix/bin/$c" ] || missing+=("./cmd/$c")
done
[ ${#missing[@]} -eq 0 ] || go build -o "$prefix/bin/" "${missing[@]}"
[ -x "$prefix/lib/gompi/gompi-plugin-criu" ] || go build -o "$prefix/lib/gompi/" ./cmd/gompi-plugin-criu
echo "$prefix"
