#!/usr/bin/env bash
# Measures a transparent checkpoint (crs criu) against a bare CRIU dump of
# the same processes and against crs self, in one run (issue 21's figure):
# examples/noop with 4 ranks x MIB MiB of random state on two simulated
# nodes (n1:2, n2:2) is checkpointed ROUNDS times under each CRS with
# gompi-checkpoint --status (request to commit, from its Commit line);
# between crs criu's checkpoints the same CRIU dumps 4 noop processes of
# the same size, each started alone as a rank's tree is (PID 1 of its own
# PID namespace, session leader; alone, since a running rank holds
# sockets a bare dump refuses), with `criu dump --leave-running`, one
# after the other as gompid's host lock makes them, timed as a whole. Bytes are
# those each sequence holds on disk. Then each CRS's last sequence is
# restarted ROUNDS times with gompi-restart, timed from the command to
# every rank connected again (gompi-ps, polled every 20 ms), each crs
# criu restart paired with a bare `criu restore --restore-detached` of
# the same images (crs criu's last sequence: each rank with its init),
# one after the other. Needs root and a CRIU (as crs criu: PATH or
# .local/criu); sync before each measurement. Not part of CI.
#
#   bash scripts/bench-criu.sh [ROUNDS] [MIB]   (default 5 256)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}
mib=${2:-256}
criu=$(bash scripts/install-criu.sh | tail -n 1)
export PATH="$(dirname "$criu"):$PATH"

work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for u in "${singles[@]}"; do pkill -KILL -P "$u" 2>/dev/null; kill -KILL "$u" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/bin" "$work/lib/gompi" "$work/noplugins"
go build -o "$work/bin/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./cmd/gompi-restart ./cmd/gompi-ps ./examples/noop
go build -o "$work/lib/gompi/" ./cmd/gompi-plugin-criu

# start CRS: runs the job and waits for every rank to hold its state.
start() {
	rm -rf "$work/ck" && mkdir "$work/ck"
	"$work/bin/gompirun" -np 4 --host n1:2,n2:2 -am ft-enable-cr --mca crs "$1" \
		--mca snapc_base_global_snapshot_dir "$work/ck" "$work/bin/noop" -mib "$mib" >"$work/out" 2>&1 &
	pid=$!
	until [ "$(grep -c holds "$work/out" || true)" = 4 ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; exit 1; }
		sleep 0.2
	done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# checkpoint prints the request-to-commit seconds of one checkpoint.
checkpoint() {
	sync
	"$work/bin/gompi-checkpoint" --status "$pid" | awk '/Commit -/ {gsub(/[\[\]]/, ""); print $3}'
}
seqbytes() { du -sb "$work/ck"/*/"$1" | awk '{print $1}'; }
# singles starts 4 noop processes alone, each PID 1 of its own PID
# namespace and session leader, and waits until each holds its state.
singles=()
startSingles() {
	for i in 1 2 3 4; do
		# No plugins (a singleton would start lib/gompi's as its child, and
		# CRIU would dump that too): an empty plugin folder.
		GOMPI_MCA_mca_base_component_path="$work/noplugins" \
			unshare --pid --fork --kill-child setsid "$work/bin/noop" -mib "$mib" >"$work/single.$i" 2>&1 &
		singles+=($!)
	done
	for i in 1 2 3 4; do
		until grep -q holds "$work/single.$i"; do sleep 0.2; done
	done
}
# restart writes to $work/t the seconds from gompi-restart of the last
# sequence of the reference in $work/ck to every rank of the restarted
# job connected; the job runs on as $pid (not in a subshell, for stop).
restart() {
	local start n
	sync
	start=$(date +%s.%N)
	"$work/bin/gompi-restart" "$work"/ck/*.ckpt >"$work/out" 2>&1 &
	pid=$!
	until n=$("$work/bin/gompi-ps" --json --ranks "$pid" 2>/dev/null |
		jq '[.[].ranks[]? | select(.state == "connected")] | length') && [ "${n:-0}" = 4 ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/out" >&2; exit 1; }
		sleep 0.02
	done
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f\n", b - a}' >"$work/t"
}
# bareRestore restores, with CRIU itself, one after the other, the images
# of every rank of sequence $1 crs criu wrote: the same processes (a rank
# and its init) restarted with nothing of gompi around them. Each restored
# tree ends when CRIU exits (its init has a parent-death signal).
bareRestore() {
	local start
	sync
	start=$(date +%s.%N)
	for d in "$work"/ck/*/"$1"/*/; do
		criu restore -D "$d" --restore-detached --shell-job -o "$work/restore.log" ||
			{ tail -n 5 "$work/restore.log" >&2; exit 1; }
	done
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f\n", b - a}'
}
# bare dumps the 4 single processes with CRIU itself, one after the other.
bare() {
	local start pids
	pids=$(for u in "${singles[@]}"; do pgrep -P "$u"; done)
	sync
	start=$(date +%s.%N)
	for i in $pids; do
		rm -rf "$work/bare.$i" && mkdir "$work/bare.$i"
		criu dump -t "$i" -D "$work/bare.$i" --leave-running --shell-job -o dump.log ||
			{ tail -n 5 "$work/bare.$i/dump.log" >&2; exit 1; }
	done
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f\n", b - a}'
	du -scb "$work"/bare.* | tail -n 1 | awk '{print $1}' >"$work/bytes.bare"
	rm -rf "$work"/bare.*
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

cr=() br=() sf=() rc=() rb=() rs=()
startSingles
start criu
for ((r = 0; r < rounds; r++)); do
	cr+=("$(checkpoint)")
	crb=$(seqbytes "$r")
	br+=("$(bare)")
	echo "round $((r + 1))/$rounds: crs criu ${cr[-1]} s ($crb bytes), bare criu dump ${br[-1]} s ($(cat "$work/bytes.bare") bytes)" >&2
done
stop
for ((r = 0; r < rounds; r++)); do
	restart
	stop
	rc+=("$(cat "$work/t")")
	rb+=("$(bareRestore $((rounds - 1)))")
	echo "restart $((r + 1))/$rounds of the last sequence: crs criu ${rc[-1]} s, bare criu restore ${rb[-1]} s" >&2
done
start self
for ((r = 0; r < rounds; r++)); do
	sf+=("$(checkpoint)")
	echo "round $((r + 1))/$rounds: crs self ${sf[-1]} s ($(seqbytes "$r") bytes)" >&2
done
stop
for ((r = 0; r < rounds; r++)); do
	restart
	stop
	rs+=("$(cat "$work/t")")
	echo "restart $((r + 1))/$rounds of the last sequence: crs self ${rs[-1]} s" >&2
done
mc=$(median "${cr[@]}") mb=$(median "${br[@]}") ms=$(median "${sf[@]}")
mrc=$(median "${rc[@]}") mrb=$(median "${rb[@]}") mrs=$(median "${rs[@]}")
awk -v c="$mc" -v b="$mb" -v s="$ms" -v n="$rounds" -v m="$mib" -v rc="$mrc" -v rb="$mrb" -v rs="$mrs" 'BEGIN {
	printf "noop 4 ranks x %d MiB on two simulated nodes, %d rounds (medians):\n", m, n
	printf "  crs criu checkpoint (request to commit): %.2f s\n", c
	printf "  bare criu dump of 4 such processes:      %.2f s  (crs criu / bare = %.2f, goal <= 1.2)\n", b, c / b
	printf "  crs self checkpoint:                     %.2f s\n", s
	printf "restart of the last sequence, %d times each (medians):\n", n
	printf "  crs criu (command to all ranks connected): %.2f s\n", rc
	printf "  bare criu restore of the same images:      %.2f s  (crs criu / bare = %.2f, goal <= 1.2)\n", rb, rc / rb
	printf "  crs self (command to all ranks connected): %.2f s\n", rs
}'
