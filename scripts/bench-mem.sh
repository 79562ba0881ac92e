#!/usr/bin/env bash
# Memory of an idle job: N ranks of examples/heat (a small grid, a step a
# second: idle between steps) on N/4 simulated nodes, a gompid each, with
# checkpoint/restart on (-am ft-enable-cr) and off. Once every rank has
# stepped, each process's /proc/PID/smaps_rollup gives its resident set
# (RSS), its proportional set (PSS: each shared page divided among the
# processes that map it, so the program text shared by N ranks counts
# 1/N in each) and its anonymous memory (heap, stacks: the process's own).
# Printed per rank and per gompid as the median over the processes, with
# the smallest and largest, in MB (10^6 bytes), and gompirun's. With
# BASE=<git revision> the same jobs run from binaries built at that
# revision too, side by side; BTL=tcp (or another btl value) selects the
# ranks' transports (default: sm within a node, tcp between; over tcp
# only, each rank holds a connection to more peers). Not part of CI.
#
#   bash scripts/bench-mem.sh [N] [SETTLE]   (default 16 ranks, 3 s after every rank stepped)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n=${1:-16}
settle=${2:-3}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

build() { # build DIR SRC
	(cd "$2" && go build -o "$1/" ./cmd/gompirun ./cmd/gompid ./examples/heat)
}
mkdir -p "$work/new"
build "$work/new" "$PWD"
variants=(new)
if [ -n "${BASE:-}" ]; then
	mkdir -p "$work/base-src" "$work/base"
	git archive "$BASE" | tar -x -C "$work/base-src"
	build "$work/base" "$work/base-src"
	variants+=(base)
fi
nodes=$(((n + 3) / 4))
for ((i = 1; i <= nodes; i++)); do echo "n$i slots=4"; done >"$work/hosts"

# rollup PID: "rss pss anon" in kB.
rollup() {
	awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} /^Anonymous:/ {a=$2} END {print r, p, a}' "/proc/$1/smaps_rollup"
}
# stats: median min max of a column of kB figures, in MB.
stats() {
	sort -g | awk '{v[NR]=$1} END {m=(NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); printf "%6.1f (%5.1f-%5.1f)", m/1000, v[1]/1000, v[NR]/1000}'
}
report() { # report LABEL PIDS...
	local label=$1; shift
	local rows=()
	for p in "$@"; do rows+=("$(rollup "$p")"); done
	printf '%-34s %3d  rss %s  pss %s  anon %s\n' "$label" $# \
		"$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | stats)" \
		"$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | stats)" \
		"$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | stats)"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $n heat ranks on $nodes simulated nodes${BTL:+, btl $BTL}"
echo "MB, median (min-max) over the processes"
for v in "${variants[@]}"; do
	for cr in on off; do
		am=()
		[ "$cr" = on ] && am=(-am ft-enable-cr)
		[ -n "${BTL:-}" ] && am+=(--mca btl "$BTL")
		"$work/$v/gompirun" -np "$n" --hostfile "$work/hosts" "${am[@]}" \
			"$work/$v/heat" -size 64 -steps 100000000 -every 1 -sleep 1s >"$work/out" 2>"$work/err" &
		pid=$!
		until [ "$(grep -c '^step 2: residual' "$work/out" || true)" -ge 1 ]; do
			kill -0 "$pid" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
			sleep 0.2
		done
		sleep "$settle"
		daemons=($(pgrep -P "$pid" -x gompid || true))
		ranks=()
		for d in "${daemons[@]}"; do ranks+=($(pgrep -P "$d" -x heat || true)); done
		[ ${#ranks[@]} -eq "$n" ] || { echo "found ${#ranks[@]} ranks of $n" >&2; exit 1; }
		tag=$v
		[ "$v" = base ] && tag="base ${BASE:0:10}"
		report "rank ($tag, C/R $cr)" "${ranks[@]}"
		report "gompid ($tag, C/R $cr)" "${daemons[@]}"
		report "gompirun ($tag, C/R $cr)" "$pid"
		kill -INT "$pid"
		wait "$pid" || true
		pid=
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
