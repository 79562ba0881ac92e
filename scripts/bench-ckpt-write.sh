#!/usr/bin/env bash
# Measures checkpoint write throughput against dd with fsync of the same
# bytes, in one run: examples/noop with 4 ranks x MIB MiB of random state
# under -am ft-enable-cr (sstore central on this disk) is checkpointed
# ROUNDS times with gompi-checkpoint --status, and between checkpoints dd
# writes the same number of bytes with conv=fsync into the same folder,
# once as one dd and once as 4 parallel dd of MIB MiB each (one per rank:
# a virtual disk can be far faster with several writes in flight).
# Before each measurement dirty pages are flushed (sync) so neither inherits
# the other's writeback. Reports each checkpoint's phases and the medians.
# Not part of CI.
#
#   bash scripts/bench-ckpt-write.sh [ROUNDS] [MIB] [DIR]   (default 5 256 $TMPDIR)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-5}
mib=${2:-256}
base=${3:-${TMPDIR:-/tmp}}

work=$(mktemp -d)
ckpt=$(mktemp -d "$base/gompi-bench-ckpt.XXXXXX")
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work" "$ckpt"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./examples/noop

"$work/gompirun" -np 4 --host n1:4 -am ft-enable-cr --mca snapc_base_global_snapshot_dir "$ckpt" \
	"$work/noop" -mib "$mib" >"$work/noop.out" 2>&1 &
pid=$!
until [ "$(grep -c holds "$work/noop.out" || true)" = 4 ]; do
	kill -0 "$pid" 2>/dev/null || { cat "$work/noop.out" >&2; exit 1; }
	sleep 0.2
done

bytes=$((4 * mib * 1024 * 1024))
ck=() dd=() dd4=()
for ((r = 1; r <= rounds; r++)); do
	sync
	out=$("$work/gompi-checkpoint" --status "$pid")
	t=$(awk '/Commit -/ {gsub(/[\[\]]/, ""); print $3}' <<<"$out")
	echo "$out" | sed 's/^/  /' >&2
	ck+=("$t")
	sync
	/usr/bin/time -f %e -o "$work/t" dd if=/dev/zero of="$ckpt/dd.$r" bs=1M count=$((4 * mib)) conv=fsync 2>/dev/null
	t=$(cat "$work/t")
	rm -f "$ckpt/dd.$r"
	dd+=("$t")
	sync
	start=$(date +%s.%N)
	ddp=()
	for i in 1 2 3 4; do
		dd if=/dev/zero of="$ckpt/dd.$r.$i" bs=1M count="$mib" conv=fsync 2>/dev/null &
		ddp+=($!)
	done
	wait "${ddp[@]}"
	t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
	rm -f "$ckpt"/dd.$r.*
	dd4+=("$t")
	echo "round $r/$rounds: checkpoint ${ck[-1]} s, dd ${dd[-1]} s, 4 x dd ${dd4[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
mc=$(median "${ck[@]}")
md=$(median "${dd[@]}")
md4=$(median "${dd4[@]}")
awk -v c="$mc" -v d="$md" -v d4="$md4" -v b="$bytes" -v n="$rounds" 'BEGIN {
	printf "checkpoint (request to commit): median %.2f s = %.0f MB/s\n", c, b / c / 1e6
	printf "dd conv=fsync, same bytes:      median %.2f s = %.0f MB/s\n", d, b / d / 1e6
	printf "4 parallel dd conv=fsync:       median %.2f s = %.0f MB/s\n", d4, b / d4 / 1e6
	printf "checkpoint throughput / dd: %.0f %%, / 4 parallel dd: %.0f %% (goal >= 80 %%), %d rounds\n", d / c * 100, d4 / c * 100, n
}'
