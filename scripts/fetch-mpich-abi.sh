#!/usr/bin/env bash
# Fetches the MPI-5.0 standard ABI header (mpi_abi.h) and MPICH's ABI
# library from Debian's libmpich-dev 5.0.x (forky, then sid), for the ABI
# test to compare gompi's mpi.h with and to compile a program against. The
# package is downloaded with `apt-get download` through a private apt
# configuration (as scripts/install-criu.sh fetches CRIU) and unpacked with
# `dpkg -x` into PREFIX: nothing is installed system-wide, and nothing of it
# is committed. A PREFIX that already holds the header is reused.
# Prints the path of mpi_abi.h as the last line of standard output; exits 1
# with the reason when it cannot be fetched.
#
#   bash scripts/fetch-mpich-abi.sh [PREFIX]   (default .local/mpich-abi in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/private-apt.sh
prefix=${1:-$(pwd)/.local/mpich-abi}
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac

say() { echo "fetch-mpich-abi: $*" >&2; }

header() { find "$prefix/root" -name mpi_abi.h -path '*mpich*' 2>/dev/null | head -n 1 || true; }

h=$(header)
if [ -n "$h" ]; then
	echo "$h"
	exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
	say "needs apt-get and dpkg"
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok=""
for suite in forky sid; do
	dir=$tmp/$suite
	mkdir -p "$dir/debs"
	private_apt "$dir" deb "$suite" || exit 1
	if "${APT[@]}" update >"$dir/apt.log" 2>&1 &&
		(cd "$dir/debs" && "${APT[@]}" download libmpich-dev >>"$dir/apt.log" 2>&1); then
		ok=$suite
		break
	fi
	say "apt could not fetch libmpich-dev from $suite: $(tail -n 2 "$dir/apt.log")"
done
[ -n "$ok" ] || exit 1
mkdir -p "$prefix"
rm -rf "$prefix/root"
for deb in "$tmp/$ok"/debs/*.deb; do dpkg -x "$deb" "$prefix/root"; done
basename "$tmp/$ok"/debs/*.deb >"$prefix/package"
h=$(header)
[ -n "$h" ] || { say "$(cat "$prefix/package") holds no mpi_abi.h"; exit 1; }
echo "$h"
