#!/usr/bin/env bash
# What a checkpoint's coordination costs as the job grows.
#
# Simulated ranks (scripts/benchscale sim, package cr/crsim): a halo
# program on SIZES in-process ranks, 8 per simulated node, connected
# through memory; the real SnapC coordinators (snapc full) and the ranks'
# real protocol (crcp bkmrk over the mpi control tree); gompirun and the
# daemons linked flat or through a radix-RADIX tree. Per size and shape,
# ROUNDS checkpoints of tiny state (snapshots on tmpfs: coordination, not
# a disk), each: query time (request -> every rank answered), coordination
# time (request -> every node's local snapshots written), commit time,
# messages (ranks' control tree, gompirun <-> daemons hop by hop, daemons
# <-> ranks), daemon tree depth and gompirun's fan-out, the ranks' control
# tree depth, and the all-to-all count the exchange replaced. The job's
# result is checked against the program's.
#
# Real ranks: heat (-size 128, tiny state) on REAL ranks, 4 per simulated
# node (a gompid each), ROUNDS gompi-checkpoint --json each; coordination
# time from its events. With BASE=<git revision> the same jobs run from
# binaries built at that revision too, each size side by side (the
# revision before the exchange went over a tree: BASE=9f20f47).
#
# Prints the table of medians, writes the plot to OUT (default
# scale.svg) and the rows beside it (scale.jsonl). Not part of CI; the 1,024-rank simulation takes minutes and
# about 3 GiB.
#
#   bash scripts/bench-scale.sh [SIZES] [REAL] [ROUNDS]
#       (default "8,64,256,1024" "4 8 16 32 64" 3; RADIX=8, OUT=scale.svg)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sizes=${1:-8,64,256,1024}
real=${2:-"4 8 16 32 64"}
rounds=${3:-3}
radix=${RADIX:-8}
out=${OUT:-scale.svg}
work=$(mktemp -d)
shm=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && shm=$(mktemp -d /dev/shm/bench-scale.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work" "$shm"
}
trap cleanup EXIT

go build -o "$work/" ./scripts/benchscale
build() { # build DIR SRC
	(cd "$2" && go build -o "$1/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./examples/heat)
}
mkdir -p "$work/new"
build "$work/new" "$PWD"
variants=(new)
if [ -n "${BASE:-}" ]; then
	mkdir -p "$work/base-src" "$work/base"
	git archive "$BASE" | tar -x -C "$work/base-src"
	build "$work/base" "$work/base-src"
	variants+=(base)
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
echo "simulated: $sizes ranks, flat and radix $radix, $rounds checkpoints each"
"$work/benchscale" sim -sizes "$sizes" -radix "$radix" -rounds "$rounds" -dir "$shm" >>"$work/rows.jsonl"

# realjob BIN N: heat on N ranks, ROUNDS checkpoints, then --term.
realjob() {
	local bin=$1 n=$2 nodes=$((($2 + 3) / 4)) hosts="$work/hosts-$2" global="$shm/global-$1-$2"
	: >"$hosts"
	for ((i = 1; i <= nodes; i++)); do echo "n$i slots=4" >>"$hosts"; done
	rm -rf "$global" && mkdir -p "$global"
	"$work/$bin/gompirun" -np "$n" --hostfile "$hosts" -am ft-enable-cr --mca sstore central \
		--mca snapc_base_global_snapshot_dir "$global" \
		"$work/$bin/heat" -size 128 -steps 100000000 -every 1 -sleep 20ms >"$work/out" 2>"$work/err" &
	pid=$!
	until grep -q "^step 1: residual" "$work/out"; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
		sleep 0.1
	done
	for ((r = 1; r <= rounds; r++)); do
		# A daemon may still be connecting: the checkpoint says "try again".
		for ((try = 0; try < 50; try++)); do
			if "$work/$bin/gompi-checkpoint" --json "$pid" >"$work/real-$bin-$n-$r.json" 2>"$work/cerr"; then break; fi
			grep -q "try again" "$work/cerr" || { cat "$work/cerr" >&2; exit 1; }
			sleep 0.2
		done
	done
	"$work/$bin/gompi-checkpoint" --term "$pid" >/dev/null
	wait "$pid" || true
	pid=
	local series="real"
	[ "$bin" = base ] && series="real ($BASE)"
	"$work/benchscale" real -n "$n" -series "$series" "$work"/real-"$bin"-"$n"-*.json >>"$work/rows.jsonl"
}
for n in $real; do
	echo "real: $n ranks on $((($n + 3) / 4)) simulated nodes (${variants[*]})"
	for v in "${variants[@]}"; do realjob "$v" "$n"; done
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
cp "$work/rows.jsonl" "${out%.*}.jsonl"
"$work/benchscale" plot -in "$work/rows.jsonl" -out "$out"
echo "plot: $out; rows: ${out%.*}.jsonl (benchscale plot -in ROWS -out PLOT draws them again)"
