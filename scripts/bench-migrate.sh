#!/usr/bin/env bash
# Migration time of 2 ranks as the job grows (the dissertation's figure
# 4.4 at this machine's scale): examples/noop with NP ranks x MIB MiB on
# two simulated nodes (NP/2 each) and a spare node n3; gompi-migrate moves
# ranks 0 and 1 to n3 (--json gives the time to every moved rank running
# again, and its save and restart parts). Side by side, in the same job,
# a checkpoint of every rank (gompi-checkpoint), the baseline a migration
# by whole-job checkpoint/restart would pay before its restart. For each
# SStore configuration, ROUNDS migrations per size, medians reported.
# Not part of CI.
#
#   bash scripts/bench-migrate.sh [ROUNDS] [MIB] [SIZES]   (default 3 64 "4 8 16")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
mib=${2:-64}
sizes=${3:-"4 8 16"}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./cmd/gompi-migrate ./cmd/gompi-ps ./examples/noop

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
secs() { python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.3f %.3f %.3f" % (d["duration_ns"]/1e9, d["checkpoint_ns"]/1e9, d["restart_ns"]/1e9))'; }

printf '%-12s %4s %10s %10s %10s %14s\n' config ranks migrate save restart "full ckpt"
for config in central stage stage+zstd; do
	case $config in
	central) mca=(--mca sstore central) ;;
	stage) mca=(--mca sstore stage --mca sstore_stage_local_snapshot_dir "$work/local") ;;
	stage+zstd) mca=(--mca sstore stage --mca sstore_stage_local_snapshot_dir "$work/local" --mca sstore_stage_compress zstd) ;;
	esac
	for np in $sizes; do
		printf 'n1 slots=%d\nn2 slots=%d\nn3 slots=2\n' $((np / 2)) $((np / 2)) >"$work/hosts"
		tot=() sav=() rst=() full=()
		for ((r = 1; r <= rounds; r++)); do
			rm -rf "$work/global" "$work/local" && mkdir -p "$work/global" "$work/local"
			"$work/gompirun" -np "$np" --hostfile "$work/hosts" -am ft-enable-cr --mca snapc_base_global_snapshot_dir "$work/global" \
				"${mca[@]}" "$work/noop" -mib "$mib" >"$work/out" 2>"$work/err" &
			pid=$!
			until [ "$(grep -c holds "$work/out" || true)" = "$np" ]; do sleep 0.1; done
			sync
			t0=$(date +%s.%N)
			"$work/gompi-checkpoint" "$pid" >/dev/null
			full+=("$(echo "$(date +%s.%N) - $t0" | bc)")
			sync
			read -r a b c < <("$work/gompi-migrate" "$pid" --ranks 0,1 --onto n3 --json | secs)
			tot+=("$a") sav+=("$b") rst+=("$c")
			kill "$pid"
			wait "$pid" 2>/dev/null || true
			pid=
		done
		m() { printf '%s\n' "$@" | median; }
		printf '%-12s %4d %9.2fs %9.2fs %9.2fs %13.2fs\n' "$config" "$np" "$(m "${tot[@]}")" "$(m "${sav[@]}")" "$(m "${rst[@]}")" "$(m "${full[@]}")"
	done
done
