#!/usr/bin/env bash
# Recovery time of in-job rollback (errmgr rollback) against autor's full
# restart, side by side in one run: examples/heat on two simulated nodes
# (NP/2 ranks each), sstore stage with its node cache, checkpointed once;
# then rank NP-3 (on n2) is killed with SIGKILL. Recovery time is from the
# failure handled (the ErrMgr stack's decision) to every rank computing
# again, which gompirun observes and reports for both the same way: the
# first fence of the ranks after the failure has completed (rollback: the
# survivors' address exchange, which the restarted ranks' modex joins;
# autor: the new run's modex), i.e. every rank has left the library's
# start-up and is back in the program's loop:
#   gompirun: rollback 1: every rank computes again from sequence 0, X s ...
#   gompirun: recovery 1: every rank computes again, X s ...
# Cases: tiny state (heat -size 64) at 8 and 32 ranks, where the
# runtime's own work dominates, and 64 MiB per rank at 8 ranks (heat
# -size 8192: each rank protects its 1024+2 rows of 8194 float64s), where
# reloading state dominates both (compression off). ROUNDS per case and
# mode, medians reported with each round. Not part of CI.
#
#   bash scripts/bench-rollback.sh [ROUNDS] [CASES]
#   (default 3 and "8:64:tiny 32:64:tiny 8:8192:64MiB/rank", each NP:SIZE:LABEL)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
cases=${2:-"8:64:tiny 32:64:tiny 8:8192:64MiB/rank"}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./cmd/gompi-ps ./examples/heat

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

# connected NP: wait until gompi-ps shows NP connected ranks of $pid.
connected() {
	until [ "$("$work/gompi-ps" --json --ranks "$pid" 2>/dev/null | python3 -c 'import json,sys
try: print(sum(r["state"] == "connected" for r in json.load(sys.stdin)[0]["ranks"]))
except Exception: print(0)')" = "$1" ]; do sleep 0.2; done
}

# round MODE NP SIZE: one kill under errmgr MODE; prints the seconds.
round() {
	local mode=$1 np=$2 size=$3 sel
	case $mode in
	rollback) sel=rollback,autor,default ;;
	autor) sel=autor,default ;;
	esac
	printf 'n1 slots=%d\nn2 slots=%d\n' $((np / 2)) $((np / 2)) >"$work/hosts"
	rm -rf "$work/global" "$work/local" && mkdir -p "$work/global" "$work/local"
	"$work/gompirun" -np "$np" --hostfile "$work/hosts" -am ft-enable-cr --mca errmgr "$sel" \
		--mca snapc_base_global_snapshot_dir "$work/global" --mca sstore stage --mca sstore_stage_compress none \
		--mca sstore_stage_local_snapshot_dir "$work/local" \
		"$work/heat" -size "$size" -steps 100000000 -sleep 2ms >"$work/out" 2>"$work/err" &
	pid=$!
	connected "$np"
	"$work/gompi-checkpoint" "$pid" >/dev/null
	victim=$("$work/gompi-ps" --json --ranks "$pid" | python3 -c "import json,sys; print([r['pid'] for r in json.load(sys.stdin)[0]['ranks'] if r['rank'] == $np - 3][0])")
	kill -KILL "$victim"
	until grep -q "every rank computes again" "$work/err"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "gompirun ended before the recovery:" >&2
			cat "$work/err" >&2
			exit 1
		fi
		sleep 0.1
	done
	sed -n 's/.*every rank computes again[^,]*, \([0-9.]*\) s.*/\1/p' "$work/err" | head -1
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf '%-22s %12s %12s %8s   %s\n' case rollback autor ratio "rounds (rollback | autor)"
for c in $cases; do
	IFS=: read -r np size what <<<"$c"
	rb=() au=()
	for ((r = 1; r <= rounds; r++)); do
		rb+=("$(round rollback "$np" "$size")")
		au+=("$(round autor "$np" "$size")")
	done
	mr=$(printf '%s\n' "${rb[@]}" | median)
	ma=$(printf '%s\n' "${au[@]}" | median)
	printf '%-22s %11.3fs %11.3fs %7.0f%%   %s | %s\n' "$np ranks, $what" "$mr" "$ma" "$(echo "100 * $mr / $ma" | bc -l)" "${rb[*]}" "${au[*]}"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
