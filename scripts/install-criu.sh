#!/usr/bin/env bash
# Finds or installs a CRIU that works on this machine, for checkpointing
# unmodified programs (crs=criu). A CRIU is accepted only when it is 4.2 or
# newer, `criu check` passes, and it dumps and restores a small process
# that then goes on counting. Tried in order:
#   1. the one already in PREFIX (reused: nothing is downloaded again);
#   2. the system's `criu` (Debian 12's 3.17.1 fails `criu check` here, and
#      13's 4.1.1 hangs in every dump: see the project's CRIU notes);
#   3. as root with apt: Debian's criu from the forky suite (then sid) of the
#      archive the system's apt already uses, with the dependencies apt
#      resolves against an empty dpkg status (libc included), unpacked into
#      PREFIX and pointed at PREFIX's loader and libraries with patchelf
#      (itself downloaded the same way, from the system's suite). A private
#      apt configuration is used; nothing is installed system-wide and the
#      system's libc is untouched.
# Prints the accepted criu's path as the last line of standard output;
# exits 1 with the reason when there is none.
#
#   bash scripts/install-criu.sh [PREFIX]   (default .local/criu in the repository)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/private-apt.sh
prefix=${1:-$(pwd)/.local/criu}
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
min_version=40200 # 4.2.0, as criu --version's X.Y.Z reads in CRIU's own numbering

say() { echo "install-criu: $*" >&2; }

# version_of CRIU prints its version as XYYZZ (4.2.1 -> 40201).
version_of() {
	timeout 60 "$1" --version 2>/dev/null | awk '/^Version:/ { split($2, v, "."); printf "%d\n", v[1] * 10000 + v[2] * 100 + v[3] }'
}

# smoke CRIU dumps a counting shell (its own PID namespace's init and its
# session's leader, as ranks will run) and restores it; the restored one
# must go on counting.
smoke() {
	local criu=$1 dir rc=0
	dir=$(mktemp -d)
	unshare --pid --fork setsid sh -c 'i=0; while :; do i=$((i + 1)); echo $i >"$1/count.tmp"; mv "$1/count.tmp" "$1/count"; sleep 0.05; done' sh "$dir" </dev/null >/dev/null 2>&1 &
	local outer=$! pid="" n
	for _ in $(seq 200); do
		pid=$(pgrep -P "$outer" || true)
		[ -n "$pid" ] && [ -s "$dir/count" ] && break
		sleep 0.05
	done
	mkdir "$dir/img"
	if [ -z "$pid" ] || ! timeout 120 "$criu" dump -t "$pid" -D "$dir/img" -o dump.log; then
		say "$criu: dump failed: $(tail -n 3 "$dir/img/dump.log" 2>/dev/null)"
		rc=1
	elif n=$(cat "$dir/count") && ! timeout 120 "$criu" restore -d -D "$dir/img" -o restore.log --pidfile "$dir/restored.pid"; then
		say "$criu: restore failed: $(tail -n 3 "$dir/img/restore.log" 2>/dev/null)"
		rc=1
	else
		rc=1
		for _ in $(seq 200); do
			if [ "$(cat "$dir/count")" -gt $((n + 2)) ] 2>/dev/null; then rc=0 && break; fi
			sleep 0.05
		done
		[ $rc -eq 0 ] || say "$criu: the restored process does not run"
		kill -9 "$(cat "$dir/restored.pid")" 2>/dev/null || true
	fi
	kill -9 "$outer" "$pid" 2>/dev/null || true
	wait "$outer" 2>/dev/null || true
	rm -rf "$dir"
	return $rc
}

# usable CRIU says whether CRIU is new enough, passes `criu check` and the
# smoke test; it says why not on standard error.
usable() {
	local criu=$1 v
	[ -x "$criu" ] || return 1
	v=$(version_of "$criu") || v=0
	if [ "${v:-0}" -lt $min_version ]; then
		say "$criu is version ${v:-unknown} (XYYZZ), older than 4.2"
		return 1
	fi
	if ! timeout 120 "$criu" check >/dev/null 2>&1; then
		say "$criu: criu check fails"
		return 1
	fi
	smoke "$criu"
}

# fetch SUITE DIR downloads criu and its dependencies from SUITE into
# DIR/debs with a private apt configuration.
fetch() {
	local suite=$1 dir=$2 APT
	private_apt "$dir" deb "$suite" || return 1
	"${APT[@]}" update >"$dir/apt.log" 2>&1 &&
		"${APT[@]}" install -y --download-only --no-install-recommends criu >>"$dir/apt.log" 2>&1 ||
		{ say "apt could not fetch criu from $suite: $(tail -n 2 "$dir/apt.log")"; return 1; }
}

# patchelf_in DIR downloads the system suite's patchelf into DIR and prints
# its path.
patchelf_in() {
	local dir=$1
	mkdir -p "$dir/cache/archives/partial"
	: >"$dir/status"
	apt-get -q -o Dir::State::status="$dir/status" -o Dir::Cache="$dir/cache" -o Debug::NoLocking=1 \
		install -y --download-only --no-install-recommends patchelf >"$dir/apt.log" 2>&1 ||
		{ say "apt could not fetch patchelf: $(tail -n 2 "$dir/apt.log")"; return 1; }
	dpkg -x "$dir"/cache/archives/patchelf_*.deb "$dir/x"
	echo "$dir/x/usr/bin/patchelf"
}

# install_into TMP unpacks Debian's criu into TMP, for TMP to become the prefix.
install_into() {
	local tmp=$1 suite pe lib
	for suite in forky sid; do
		rm -rf "$tmp/apt"
		fetch "$suite" "$tmp/apt" && break
		suite=""
	done
	[ -n "$suite" ] || return 1
	for deb in "$tmp"/apt/cache/archives/*.deb; do dpkg -x "$deb" "$tmp/root"; done
	pe=$(patchelf_in "$tmp/patchelf") || return 1
	# The binary's path holds the final prefix: it is moved there whole.
	lib=$prefix/root/usr/lib/x86_64-linux-gnu
	"$pe" --set-interpreter "$lib/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$lib" "$tmp/root/usr/sbin/criu"
	rm -rf "$tmp/apt" "$tmp/patchelf"
	echo "$suite" >"$tmp/suite"
}

main() {
	local criu=$prefix/root/usr/sbin/criu
	if [ -x "$criu" ] && usable "$criu"; then echo "$criu" && return 0; fi
	local sys
	if sys=$(command -v criu) && usable "$sys"; then echo "$sys" && return 0; fi
	if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
		say "no usable criu, and installing one needs root, apt-get and dpkg"
		return 1
	fi
	say "installing Debian's criu into $prefix"
	mkdir -p "$(dirname "$prefix")"
	local tmp
	tmp=$(mktemp -d "$prefix.new.XXXXXX")
	if ! install_into "$tmp"; then rm -rf "$tmp"; return 1; fi
	# Swapped in whole, so a prefix is never half installed.
	rm -rf "$prefix.old"
	[ ! -e "$prefix" ] || mv "$prefix" "$prefix.old"
	mv "$tmp" "$prefix"
	rm -rf "$prefix.old"
	if ! usable "$criu"; then
		say "the installed criu ($(cat "$prefix/suite")) is not usable; removed"
		rm -rf "$prefix"
		return 1
	fi
	say "installed $("$criu" --version | head -n 1) from $(cat "$prefix/suite") into $prefix"
	echo "$criu"
}

main
