#!/usr/bin/env bash
# Fetches a Debian source package's upstream tarball (bookworm, the suite
# this machine runs) and unpacks it under .local/src/PACKAGE: the MPICH
# test suite runner (scripts/mpich-tests.sh, package mpich) and
# scripts/netpipe.sh (package netpipe) use it. apt-get source
# --download-only runs through a private apt configuration with a deb-src
# line for the archive the system's apt already uses: nothing is installed,
# the system's apt state is untouched, and nothing of it is committed
# (.local is ignored). A folder already unpacked is reused.
# Prints the unpacked source folder as the last line of standard output;
# exits 1 with the reason when it cannot be fetched.
#
#   bash scripts/mpich-source.sh PACKAGE [DIR]   (default DIR .local/src in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/private-apt.sh
pkg=${1:?usage: mpich-source.sh PACKAGE [DIR]}
base=${2:-$(pwd)/.local/src}
case $base in /*) ;; *) base=$(pwd)/$base ;; esac
say() { echo "mpich-source: $*" >&2; }

dest=$base/$pkg
# .unpacked names the top folder under tree/; only its last component
# counts, so a .local shared by several worktrees (or moved) still works.
if [ -f "$dest/.unpacked" ]; then
	top=$(cat "$dest/.unpacked")
	if [ -d "$dest/tree/${top##*/}" ]; then
		echo "$dest/tree/${top##*/}"
		exit 0
	fi
fi
command -v apt-get >/dev/null || { say "needs apt-get"; exit 1; }
suite=${DEBIAN_SUITE:-bookworm}

apt_dir=$base/.apt
mkdir -p "$dest/dl"
private_apt "$apt_dir" deb-src "$suite" || exit 1
# Only the upstream tarball is needed: a failure to fetch the rest (the
# archive serves netpipe's orig tarball but not its debian tarball) is
# fine once that is here.
if ! ls "$dest"/dl/*.orig.tar.* >/dev/null 2>&1; then
	if "${APT[@]}" update >"$apt_dir/apt.log" 2>&1; then
		(cd "$dest/dl" && "${APT[@]}" source --download-only "$pkg" >>"$apt_dir/apt.log" 2>&1) || true
	fi
	if ! ls "$dest"/dl/*.orig.tar.* >/dev/null 2>&1; then
		say "apt could not fetch the source of $pkg from $suite: $(tail -n 3 "$apt_dir/apt.log")"
		exit 1
	fi
fi
orig=$(ls "$dest"/dl/*.orig.tar.* | head -n 1)
rm -rf "$dest/tree"
mkdir -p "$dest/tree"
tar -xf "$orig" -C "$dest/tree"
top=$(find "$dest/tree" -mindepth 1 -maxdepth 1 -type d | head -n 1)
[ -n "$top" ] || { say "$orig unpacked to nothing"; exit 1; }
echo "tree/${top##*/}" >"$dest/.unpacked"
echo "$top"
