#!/usr/bin/env bash
# Measures gompi's message path side by side with Open MPI 4.1 (Debian's
# openmpi-bin) on this machine, in one run: one-way ping-pong latency of an
# 8-byte message and streaming bandwidth of 1 MiB messages (window 16), for
# gompi tcp and uds and Open MPI's tcp and shared-memory (vader) transports.
# Rounds alternate between the four so load drifts hit them alike; the
# median of each is reported with the ratios the project's goals name.
# Not part of CI (it installs Open MPI and takes a few minutes).
#
#   bash scripts/bench-vs-openmpi.sh [ROUNDS]     (default 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}

if ! command -v mpicc >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench: Open MPI is missing: apt-get install -y openmpi-bin libopenmpi-dev" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./examples/bench
mpicc -O2 -o "$work/ompi_pingpong" examples/bench/testdata/ompi_pingpong.c

# Each runner prints two numbers: 8 B one-way latency (us) and 1 MiB
# streaming bandwidth (MB/s).
gompi() { # BTL
	local lat bw
	lat=$("$work/gompirun" -np 2 --host n1,n1 --mca btl "$1" "$work/bench" -tests latency -min 8 -max 8 -iters 100000 -json |
		sed -n 's/.*"latency_us":\([0-9.]*\).*/\1/p')
	bw=$("$work/gompirun" -np 2 --host n1,n1 --mca btl "$1" "$work/bench" -tests bandwidth -min 1MiB -max 1MiB -iters 4000 -window 16 -json |
		sed -n 's/.*"mb_per_s":\([0-9.]*\).*/\1/p')
	echo "$lat $bw"
}
ompi() { # BTL list
	mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl "$1" --mca btl_tcp_if_include lo "$work/ompi_pingpong" |
		awk '/^pingpong 8B:/ {lat=$3} /^stream 1MiB:/ {bw=$3} END {print lat, bw}'
}

declare -A lat bw
names=("gompi-tcp" "ompi-tcp" "gompi-uds" "ompi-sm")
for ((r = 1; r <= rounds; r++)); do
	for n in "${names[@]}"; do
		case $n in
		gompi-tcp) out=$(gompi tcp) ;;
		gompi-uds) out=$(gompi uds) ;;
		ompi-tcp) out=$(ompi tcp,self) ;;
		ompi-sm) out=$(ompi vader,self) ;;
		esac
		read -r l b <<<"$out"
		lat[$n]+="$l "
		bw[$n]+="$b "
	done
	echo "round $r/$rounds done" >&2
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
declare -A mlat mbw
printf '%-10s %14s %14s   (median of %d rounds)\n' transport "8B lat (us)" "1MiB BW (MB/s)" "$rounds"
for n in "${names[@]}"; do
	mlat[$n]=$(median <<<"${lat[$n]}")
	mbw[$n]=$(median <<<"${bw[$n]}")
	printf '%-10s %14.2f %14.0f\n' "$n" "${mlat[$n]}" "${mbw[$n]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo
echo "gompi tcp / Open MPI tcp: latency $(ratio "${mlat[gompi-tcp]}" "${mlat[ompi-tcp]}")x (goal <= 1.0), bandwidth $(ratio "${mbw[gompi-tcp]}" "${mbw[ompi-tcp]}")x (goal >= 1.0)"
echo "gompi uds / Open MPI sm:  latency $(ratio "${mlat[gompi-uds]}" "${mlat[ompi-sm]}")x, bandwidth $(ratio "${mbw[gompi-uds]}" "${mbw[ompi-sm]}")x"
