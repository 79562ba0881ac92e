#!/usr/bin/env bash
# Restart time on another rank count (gompi-restart -np M) against a
# restart on the same count, for 1 GiB of state in total: examples/noop
# -spread holds MIB MiB block-distributed over 4 ranks on two simulated
# nodes (cr.ProtectDistributed), is checkpointed with --term (sstore
# central), then restarted from that sequence on 4 ranks (N→N, no
# repartition), on 2 and on 8 (N→M: gompi-restart checks the sequence,
# links the old files into a repartition sequence, and each new rank reads
# the runs it needs). Time: from gompi-restart's start to every rank past
# its restore (each noop rank prints its line once Protect filled its
# state). Side by side in each round (the order rotating), a fresh
# checkpoint per round, ROUNDS rounds, medians reported, with the
# machine's load. The snapshot files
# are in the page cache (written just before): this measures gompi, not
# the disk. Not part of CI.
#
#   bash scripts/bench-ntom.sh [ROUNDS] [MIB] [COUNTS]   (default 3 1024 "4 2 8")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
mib=${2:-1024}
counts=${3:-"4 2 8"}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./cmd/gompi-restart ./examples/noop
printf 'n1 slots=4\nn2 slots=4\n' >"$work/hosts"

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
count() { grep -c "$1" "$2" 2>/dev/null || true; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $mib MiB of state in total, checkpointed on 4 ranks"
declare -A times
for ((r = 1; r <= rounds; r++)); do
	rm -rf "$work/global" && mkdir -p "$work/global"
	"$work/gompirun" -np 4 --hostfile "$work/hosts" -am ft-enable-cr --mca sstore central --mca snapc_base_global_snapshot_dir "$work/global" \
		"$work/noop" -spread -mib "$mib" >"$work/out" 2>"$work/err" &
	pid=$!
	until [ "$(count holds "$work/out")" = 4 ]; do sleep 0.1; done
	# The job may still be starting (a daemon not connected yet): the
	# checkpoint says "try again".
	for ((try = 0; try < 50; try++)); do
		if ref=$("$work/gompi-checkpoint" --term "$pid" 2>"$work/cerr" | awk '{print $NF}') && [ -n "$ref" ]; then break; fi
		grep -q "try again" "$work/cerr" || { cat "$work/cerr" >&2; exit 1; }
		sleep 0.2
	done
	wait "$pid" || true
	pid=
	sync
	line="round $r:"
	# Each round starts with another count, so no count always pays for
	# the checkpoint's writes still in flight.
	all=($counts)
	k=$(((r - 1) % ${#all[@]}))
	for m in "${all[@]:k}" "${all[@]:0:k}"; do
		t0=$(date +%s.%N)
		"$work/gompi-restart" -np "$m" --hostfile "$work/hosts" "$work/global/$ref" >"$work/rout" 2>"$work/rerr" &
		pid=$!
		until [ "$(count restarted "$work/rout")" = "$m" ]; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "restart on $m ranks ended early:" >&2
				cat "$work/rerr" >&2
				exit 1
			fi
			sleep 0.02
		done
		t=$(echo "$(date +%s.%N) - $t0" | bc)
		kill -INT "$pid"
		wait "$pid" 2>/dev/null || true
		pid=
		times[$m]+="$t "
		line+=$(printf ' 4→%d %.2fs' "$m" "$t")
	done
	echo "$line"
done
printf '%-8s %10s\n' restart median
for m in $counts; do
	printf '4→%-6d %9.2fs\n' "$m" "$(printf '%s\n' ${times[$m]} | median)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
