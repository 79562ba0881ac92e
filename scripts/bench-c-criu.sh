#!/usr/bin/env bash
# Measures a transparent checkpoint of a C program under gompi (crs criu)
# against a bare CRIU dump of as many processes of the same program, side
# by side in one run (issue 24's figure): examples/c/mixloop.c, built with
# gompicc, as 4 ranks with MIB MiB of state each (its pthread rewrites all
# of it every iteration; the iteration's laggard is held 20 ms, so most
# ranks wait inside collectives) on two simulated nodes (n1:2, n2:2), is
# checkpointed ROUNDS times with gompi-checkpoint --status (request to
# commit, from its Commit line); after each, the same CRIU dumps 4 mixloop
# processes of the same size, each started alone as a rank's tree is (PID
# 1 of its own PID namespace, session leader; a 1-rank job of its own, no
# plugin: a running rank of a job holds sockets a bare dump refuses), with
# `criu dump --leave-running`, one after the other as gompid's host lock
# makes them, timed as a whole. Both write their images under the same
# temporary folder. Bytes are those each sequence (crs criu) and each set
# of 4 image folders (bare) holds on disk. Prints the medians and the
# machine's load. Needs root, gcc and a CRIU (as crs criu: PATH or
# .local/criu); sync before each measurement. Not part of CI.
#
#   bash scripts/bench-c-criu.sh [ROUNDS] [MIB]   (default 5 32)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}
mib=${2:-32}
criu=$(bash scripts/install-criu.sh | tail -n 1)
export PATH="$(dirname "$criu"):$PATH"

work=$(mktemp -d)
pid=
singles=()
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	for u in "${singles[@]}"; do kill -KILL "$u" 2>/dev/null || true; done
	wait 2>/dev/null || true # reaped quietly: no "Killed" line for each
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/noplugins"
# The C interface and the commands (build-c.sh), the criu plugin beside
# them in lib/gompi, and the program.
bash scripts/build-c.sh "$work" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
go build -o "$work/lib/gompi/" ./cmd/gompi-plugin-criu
"$work/bin/gompicc" -O2 -o "$work/mixloop" examples/c/mixloop.c -lpthread
args=(-iters 100000000 -every 1 -state "$mib" -pace-us 20000)

# start runs the job and waits for its first iteration (every rank then
# holds its state).
start() {
	rm -rf "$work/ck" && mkdir "$work/ck"
	"$work/bin/gompirun" -np 4 --host n1:2,n2:2 -am ft-enable-cr --mca crs criu \
		--mca snapc_base_global_snapshot_dir "$work/ck" "$work/mixloop" "${args[@]}" >"$work/out" 2>&1 &
	pid=$!
	until grep -q '^iter' "$work/out"; do
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
# startSingles starts 4 mixloop processes alone (1-rank jobs), each PID 1
# of its own PID namespace and session leader, and waits until each has
# done an iteration.
startSingles() {
	for i in 1 2 3 4; do
		GOMPI_MCA_mca_base_component_path="$work/noplugins" \
			unshare --pid --fork --kill-child setsid "$work/mixloop" "${args[@]}" >"$work/single.$i" 2>&1 &
		singles+=($!)
	done
	for i in 1 2 3 4; do
		until grep -q '^iter' "$work/single.$i"; do sleep 0.2; done
	done
}
# bare dumps the 4 single processes with CRIU itself, one after the other,
# and leaves the images' bytes in $work/bytes.bare.
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

cr=() br=() cb=() bb=()
startSingles
start
for ((r = 0; r < rounds; r++)); do
	cr+=("$(checkpoint)")
	cb+=("$(seqbytes "$r")")
	br+=("$(bare)")
	bb+=("$(cat "$work/bytes.bare")")
	echo "round $((r + 1))/$rounds: crs criu ${cr[-1]} s (${cb[-1]} bytes), bare criu dump ${br[-1]} s (${bb[-1]} bytes)" >&2
done
stop
mc=$(median "${cr[@]}") mb=$(median "${br[@]}") mcb=$(median "${cb[@]}") mbb=$(median "${bb[@]}")
awk -v c="$mc" -v b="$mb" -v cb="$mcb" -v bb="$mbb" -v n="$rounds" -v m="$mib" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" -v cpus="$(nproc)" 'BEGIN {
	printf "mixloop.c, 4 ranks x %d MiB of state on two simulated nodes, %d rounds (medians; load %s on %d CPUs):\n", m, n, load, cpus
	printf "  gompi-checkpoint, crs criu (request to commit): %.2f s, %.1f MiB of images\n", c, cb / 1048576
	printf "  bare criu dump --leave-running of 4 such:       %.2f s, %.1f MiB of images  (gompi / bare = %.2f)\n", b, bb / 1048576, c / b
}'
