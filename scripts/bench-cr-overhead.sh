#!/usr/bin/env bash
# Measures the failure-free cost of -am ft-enable-cr on the message path, in
# one run: 8-byte one-way ping-pong latency and 1 MiB streaming bandwidth
# (window 16) of examples/bench under gompirun, with C/R off and on, over
# the uds and tcp BTLs. Rounds alternate off/on so load drifts hit both
# alike; medians are reported with the overhead the issue's goals name
# (<= 2 % latency, <= 0.5 % bandwidth). Not part of CI: run it on a quiet
# machine.
#
#   [BTLS="uds tcp"] bash scripts/bench-cr-overhead.sh [ROUNDS]     (default 7)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-7}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./examples/bench
mkdir -p "$work/ckpt"

run() { # BTL on|off -> "latency_us mb_per_s"
	local cr=()
	[ "$2" = on ] && cr=(-am ft-enable-cr --mca snapc_base_global_snapshot_dir "$work/ckpt")
	local lat bw
	lat=$("$work/gompirun" -np 2 --host n1,n1 --mca btl "$1" "${cr[@]}" "$work/bench" -tests latency -min 8 -max 8 -iters 100000 -json |
		sed -n 's/.*"latency_us":\([0-9.]*\).*/\1/p')
	bw=$("$work/gompirun" -np 2 --host n1,n1 --mca btl "$1" "${cr[@]}" "$work/bench" -tests bandwidth -min 1MiB -max 1MiB -iters 4000 -window 16 -json |
		sed -n 's/.*"mb_per_s":\([0-9.]*\).*/\1/p')
	echo "$lat $bw"
}

declare -A lat bw
btls=${BTLS:-uds tcp}
names=()
for t in $btls; do names+=("$t-off" "$t-on"); done
for ((r = 1; r <= rounds; r++)); do
	for n in "${names[@]}"; do
		read -r l b <<<"$(run "${n%-*}" "${n#*-}")"
		lat[$n]+="$l "
		bw[$n]+="$b "
	done
	echo "round $r/$rounds done" >&2
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
declare -A mlat mbw
printf '%-8s %14s %14s   (median of %d rounds)\n' run "8B lat (us)" "1MiB BW (MB/s)" "$rounds"
for n in "${names[@]}"; do
	mlat[$n]=$(median <<<"${lat[$n]}")
	mbw[$n]=$(median <<<"${bw[$n]}")
	printf '%-8s %14.3f %14.0f\n' "$n" "${mlat[$n]}" "${mbw[$n]}"
done
pct() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.2f %%", (a - b) / b * 100}'; }
echo
for t in $btls; do
	echo "$t: ft-enable-cr latency $(pct "${mlat[$t-on]}" "${mlat[$t-off]}") (goal <= +2 %), bandwidth $(pct "${mbw[$t-on]}" "${mbw[$t-off]}") (goal >= -0.5 %)"
done
