#!/usr/bin/env bash
# Recovery time under errmgr autor (the dissertation's figure 4.3 at this
# machine's scale): examples/noop with 8 ranks x MIB MiB on two simulated
# nodes, sstore stage, checkpointed once; then a rank is killed and
# gompirun reports when every rank runs again from the snapshot. With the
# cache (sstore_stage_cache 2) the ranks that stay on their node read
# their node's copy; without it (0) every rank fetches from global
# storage. ROUNDS kills per configuration, medians reported. Not part of CI.
#
#   bash scripts/bench-recovery.sh [ROUNDS] [MIB]   (default 3 64)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
mib=${2:-64}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./cmd/gompi-ps ./examples/noop
printf 'n1 slots=4\nn2 slots=4\n' >"$work/hosts"

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for cache in 2 0; do
	times=()
	for ((r = 1; r <= rounds; r++)); do
		rm -rf "$work/global" "$work/local" && mkdir -p "$work/global" "$work/local"
		"$work/gompirun" -np 8 --hostfile "$work/hosts" -am ft-enable-cr --mca errmgr autor,default \
			--mca snapc_base_global_snapshot_dir "$work/global" --mca sstore stage --mca sstore_stage_cache "$cache" \
			--mca sstore_stage_local_snapshot_dir "$work/local" "$work/noop" -mib "$mib" >"$work/out" 2>"$work/err" &
		pid=$!
		until [ "$(grep -c holds "$work/out" || true)" = 8 ]; do sleep 0.1; done
		"$work/gompi-checkpoint" "$pid" >/dev/null
		victim=$("$work/gompi-ps" --json --ranks "$pid" | python3 -c 'import json,sys; print([r["pid"] for r in json.load(sys.stdin)[0]["ranks"] if r["rank"] == 5][0])')
		kill -KILL "$victim"
		until grep -q "every rank runs again" "$work/err"; do sleep 0.1; done
		times+=("$(sed -n 's/.*every rank runs again, \([0-9.]*\) s.*/\1/p' "$work/err")")
		kill "$pid"
		wait "$pid" 2>/dev/null || true
		pid=
	done
	printf 'sstore_stage_cache=%d: recovery of 8 ranks x %d MiB: median %.2f s (rounds: %s)\n' "$cache" "$mib" "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}"
done
