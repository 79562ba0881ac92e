#!/usr/bin/env bash
# The partner level's figure: how long the copy of each node's local
# snapshots to its partner node takes next to their drain to global
# storage. examples/noop with 4 ranks x MIB MiB of random state on two
# simulated nodes (sstore stage, no compression, filem raw, a global
# snapshot folder on this machine), in three jobs: partner copy and drain
# side by side as sstore stage runs them (sstore_stage_partner ring), the
# partner copy alone (snapc_base_global_snapshot_dir none) and the drain
# alone (sstore_stage_partner none). Each job is checkpointed ROUNDS times
# after a warm-up checkpoint; each node's daemon logs both times per
# sequence (sstore_base_verbose 1), and a round's time is its slower
# node's. Prints the median and the spread (min-max) over the rounds, and
# the machine's load. The simulated nodes share one disk, so side by side
# both copies wait for the same writes (and syncs). Not part of CI.
#
#   bash scripts/bench-partner.sh [ROUNDS] [MIB]   (default 5 256)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}
mib=${2:-256}

work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./examples/noop
printf 'n1 slots=2\nn2 slots=2\n' >"$work/hosts"

# run NAME GLOBAL MCA...: one job (GLOBAL: none, or - for a folder here) of the configuration, ROUNDS checkpoints after a
# warm-up; its daemons' log goes to $work/NAME.err.
run() {
	local name=$1 global=$2
	shift 2
	mkdir -p "$work/global-$name" "$work/local-$name"
	[ "$global" = none ] || global="$work/global-$name"
	"$work/gompirun" -np 4 --hostfile "$work/hosts" -am ft-enable-cr --mca sstore stage --mca sstore_base_verbose 1 \
		--mca sstore_stage_local_snapshot_dir "$work/local-$name" --mca snapc_base_global_snapshot_dir "$global" "$@" \
		"$work/noop" -mib "$mib" -state random >"$work/noop.out" 2>"$work/$name.err" &
	pid=$!
	until [ "$(grep -c holds "$work/noop.out" || true)" = 4 ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/noop.out" "$work/$name.err" >&2; exit 1; }
		sleep 0.1
	done
	"$work/gompi-checkpoint" "$pid" >/dev/null # warm-up: the ranks' pages are written once
	for ((r = 1; r <= rounds; r++)); do
		sync
		"$work/gompi-checkpoint" "$pid" >/dev/null
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$work/global-$name" "$work/local-$name"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run both - --mca sstore_stage_partner ring
run partner none --mca sstore_stage_partner ring
run drain - --mca sstore_stage_partner none
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# seconds DURATION: a Go duration (1.5s, 830ms, 1m2.5s) in seconds.
seconds() {
	awk -v d="$1" 'BEGIN {
		s = 0
		while (match(d, /^[0-9.]+(h|ms|µs|us|ns|m|s)/)) {
			tok = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
			match(tok, /[a-zµ]+$/); unit = substr(tok, RSTART); v = substr(tok, 1, RSTART - 1)
			if (unit == "h") s += v * 3600; else if (unit == "m") s += v * 60; else if (unit == "s") s += v
			else if (unit == "ms") s += v / 1e3; else if (unit == "µs" || unit == "us") s += v / 1e6; else s += v / 1e9
		}
		printf "%.3f\n", s
	}'
}

# node_times NAME MSG: per sequence after the warm-up (seq 0), the slowest
# node's elapsed time of the log lines MSG of configuration NAME.
node_times() {
	grep "msg=\"$2\"" "$work/$1.err" | while read -r line; do
		seq=$(sed -n 's/.* seq=\([0-9]*\) .*/\1/p' <<<"$line")
		el=$(sed -n 's/.* elapsed=\([^ ]*\).*/\1/p' <<<"$line")
		[ "$seq" -gt 0 ] && echo "$seq $(seconds "$el")"
	done | awk '{ if ($2 > m[$1]) m[$1] = $2 } END { for (s in m) print m[s] }'
}

stats() { sort -g | awk '{v[NR]=$1} END { if (NR == 0) { print "- - -"; exit } m = (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); print m, v[1], v[NR] }'; }

printf '4 ranks x %d MiB on 2 simulated nodes (one disk), %d rounds (load %s before, %s after)\n' "$mib" "$rounds" "$load_before" "$load_after"
printf '%-34s %10s %10s %10s %10s\n' what "median (s)" "min (s)" "max (s)" "MB/s/node"
for row in "both:copied to the partner node:partner copy, beside the drain" "both:drained to global storage:drain, beside the partner copy" \
	"partner:copied to the partner node:partner copy alone (global none)" "drain:drained to global storage:drain alone (partner none)"; do
	conf=${row%%:*} rest=${row#*:}
	msg=${rest%%:*} name=${rest#*:}
	read -r med lo hi < <(node_times "$conf" "$msg" | stats)
	rate=$(awk -v s="$med" -v mib="$mib" 'BEGIN { if (s > 0) printf "%.0f", 2 * mib * 1048576 / s / 1e6; else print "-" }')
	printf '%-34s %10s %10s %10s %10s\n' "$name" "$med" "$lo" "$hi" "$rate"
done
