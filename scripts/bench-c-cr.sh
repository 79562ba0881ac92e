#!/usr/bin/env bash
# Measures the two ways a C program's state is saved, side by side in one
# run (issue 24's figure): examples/c/heat_cr.c (gompi_cr.h) at -size SIZE
# (2048: 32 MiB of grid over the job, tens of MiB of state) with 4 ranks
# on two simulated nodes (n1:2, n2:2) is checkpointed ROUNDS times with
# crs=criu (the processes saved whole, from outside; the program's
# gompi_cr.h calls do nothing then, as package cr documents) and ROUNDS
# times with crs=self (its protected grid and state only), each with
# gompi-checkpoint --status (request to commit, from its Commit line);
# bytes are those each sequence holds on disk. Then each CRS's last
# sequence is restarted ROUNDS times with gompi-restart, timed from the
# command to the first step the restarted job completes (heat_cr runs
# with -every 1: rank 0 prints every step), which includes reading the
# state back (crs=self fills the grid after MPI_Init). Medians, with the
# machine's load average before and after. Needs root and a CRIU (as
# crs criu: PATH or .local/criu; scripts/install-criu.sh); sync before
# each measurement. Not part of CI.
#
#   bash scripts/bench-c-cr.sh [ROUNDS] [SIZE]   (default 5 2048)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}
size=${2:-2048}
criu=$(bash scripts/install-criu.sh | tail -n 1)
export PATH="$(dirname "$criu"):$PATH"

work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
bash scripts/build-c.sh "$work/prefix" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
go build -o "$work/prefix/lib/gompi/" ./cmd/gompi-plugin-criu
bin=$work/prefix/bin
"$bin/gompicc" -O2 -o "$work/heat_cr" examples/c/heat_cr.c -lm

# connected prints how many ranks of job $1 are connected.
connected() {
	"$bin/gompi-ps" --json --ranks "$1" 2>/dev/null | jq '[.[].ranks[]? | select(.state == "connected")] | length' || echo 0
}
# start CRS: runs the job and waits for every rank to be connected and
# the first step done.
start() {
	rm -rf "$work/ck" "$work/out" && mkdir "$work/ck"
	"$bin/gompirun" -np 4 --host n1:2,n2:2 -am ft-enable-cr --mca crs "$1" \
		--mca snapc_base_global_snapshot_dir "$work/ck" "$work/heat_cr" -size "$size" -steps 1000000000 -every 1 >"$work/out" 2>&1 &
	pid=$!
	until [ "$(connected "$pid")" = 4 ] && grep -q '^step ' "$work/out"; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; exit 1; }
		sleep 0.2
	done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# checkpoint prints the request-to-commit seconds of one checkpoint.
checkpoint() {
	sync
	"$bin/gompi-checkpoint" --status "$pid" | awk '/Commit -/ {gsub(/[\[\]]/, ""); print $3}'
}
seqbytes() { du -sb "$work/ck"/*/"$1" | awk '{print $1}'; }
# restart writes to $work/t the seconds from gompi-restart of the last
# sequence to the restarted job's first step line; the job runs on as
# $pid (not in a subshell, for stop).
restart() {
	local start
	rm -f "$work/out" && : >"$work/out" # not the last job's lines
	sync
	start=$(date +%s.%N)
	"$bin/gompi-restart" "$work"/ck/*.ckpt >>"$work/out" 2>&1 &
	pid=$!
	until grep -q '^step ' "$work/out"; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; exit 1; }
		awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {exit !(b - a > 300)}' &&
			{ echo "bench-c-cr: the restarted job printed no step in 300 s:" >&2; cat "$work/out" >&2; exit 1; }
		sleep 0.02
	done
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f\n", b - a}' >"$work/t"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

declare -A ck bytes rs
for crs in criu self; do
	ck[$crs]= bytes[$crs]= rs[$crs]=
	start "$crs"
	for ((r = 0; r < rounds; r++)); do
		t=$(checkpoint)
		b=$(seqbytes "$r")
		ck[$crs]+=" $t" bytes[$crs]+=" $b"
		echo "round $((r + 1))/$rounds: crs $crs checkpoint $t s, $b bytes" >&2
	done
	stop
	for ((r = 0; r < rounds; r++)); do
		restart
		stop
		rs[$crs]+=" $(cat "$work/t")"
		echo "restart $((r + 1))/$rounds of the last sequence: crs $crs $(cat "$work/t") s" >&2
	done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
printf 'heat_cr.c -size %d (%.1f MiB of grid), 4 ranks on two simulated nodes, %d rounds (medians)\n' \
	"$size" "$(awk -v n="$size" 'BEGIN {print n * (n + 2) * 8 / 1048576}')" "$rounds"
printf '%-28s %14s %14s\n' "" "crs=criu" "gompi_cr.h"
printf '%-28s %14s %14s\n' "bytes written" "$(median ${bytes[criu]})" "$(median ${bytes[self]})"
printf '%-28s %12s s %12s s\n' "checkpoint (request-commit)" "$(median ${ck[criu]})" "$(median ${ck[self]})"
printf '%-28s %12s s %12s s\n' "restart (to the first step)" "$(median ${rs[criu]})" "$(median ${rs[self]})"
echo "load average: $load0 before, $load1 after ($(nproc) cores)"
