#!/usr/bin/env bash
# Builds NetPIPE's NPmpi (Debian's netpipe source package, fetched by
# scripts/mpich-source.sh into .local/src, never committed) with an MPI
# compiler wrapper, through NetPIPE's own makefile (`make mpi`), in a copy
# of the source under OUT. Prints the path of NPmpi as the last line.
# capi/ctest's TestNetPIPE builds it with mpicc and gompicc and runs it;
# run it by hand as `gompirun -np 2 NPmpi -u 1048576 -o np.out`.
#
#   bash scripts/netpipe.sh [-c WRAPPER] [-o OUT]   (default mpicc, .local/netpipe/<wrapper name>)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cc=mpicc out=""
while getopts "c:o:" opt; do
	case $opt in
	c) cc=$OPTARG ;;
	o) out=$OPTARG ;;
	*) exit 2 ;;
	esac
done
out=${out:-$(pwd)/.local/netpipe/$(basename "$cc")}
src=$(bash scripts/mpich-source.sh netpipe | tail -n 1)
rm -rf "$out"
mkdir -p "$out"
cp -a "$src/." "$out/"
# The makefile compiles NPmpi with $(MPICC); CC too, as the issue names it.
if ! make -C "$out" mpi MPICC="$cc" CC="$cc" >"$out/make.log" 2>&1; then
	echo "netpipe: make mpi with $cc failed: $(tail -n 5 "$out/make.log")" >&2
	exit 1
fi
echo "$out/NPmpi"
