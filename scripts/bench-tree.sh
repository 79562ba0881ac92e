#!/usr/bin/env bash
# The daemon tree against the star: NODES simulated daemons (plm local,
# one gompid each) of one tiny rank each (examples/noop -mib 0), started
# by one gompirun with routed_radix 0 (every daemon linked to gompirun)
# and with routed_radix RADIX, side by side in each round (the order
# alternating), ROUNDS rounds, medians reported with the machine's load.
# For each it prints:
#   launch    gompirun's start to every daemon attached (routed_stats'
#             attached_seconds), and to the ranks' modex done
#   job       gompirun's start to its exit (launch, modex, the ranks'
#             end, every daemon gone)
#   per daemon PSS and anonymous RSS of each gompid (smaps_rollup), mean
#             and max, sampled while the ranks idle
#   gompirun  the messages it received and sent on its own links (heartbeats
#             aside), and the links themselves
# Not part of CI. With -c it runs rte/e2e's TestTreeManyDaemons at NODES
# and RADIX instead (the count assertions, race-built binaries).
#
#   bash scripts/bench-tree.sh [-c] [NODES] [RADIX] [ROUNDS]   (default 128 8 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" = -c ]; then
	shift
	GOMPI_TREE_DAEMONS=${1:-128} GOMPI_TREE_RADIX=${2:-8} exec go test -race -timeout 30m -count 1 -v -run '^TestTreeManyDaemons$' ./rte/e2e
fi
nodes=${1:-128}
radix=${2:-8}
rounds=${3:-3}
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-ps ./examples/noop
hosts=$(seq -s, -f 'n%g' 1 "$nodes")

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

# run RADIX: one job; appends "attached modex job pss_mean pss_max anon_mean anon_max in out links" to $work/r$RADIX
run() {
	local r=$1 t0 t1 mem
	t0=$(date +%s.%N)
	"$work/gompirun" --host "$hosts" -np "$nodes" --mca routed_radix "$r" --mca routed_stats "$work/stats.json" \
		--mca plm_base_launch_timeout 5m "$work/noop" -mib 0 -seconds 4 >"$work/out" 2>"$work/err" &
	pid=$!
	until [ "$(grep -c holds "$work/out" || true)" = "$nodes" ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/err" >&2; exit 1; }
		sleep 0.1
	done
	# Every rank runs and idles: each gompid's memory now.
	mem=$(for d in $(pgrep -P "$pid" -x gompid); do
		awk '/^Pss:/ {p=$2} /^Anonymous:/ {a=$2} END {print p, a}' "/proc/$d/smaps_rollup" 2>/dev/null || true
	done | awk '{n++; p+=$1; a+=$2; if ($1>pm) pm=$1; if ($2>am) am=$2}
		END {printf "%.1f %.1f %.1f %.1f", p/n/1024, pm/1024, a/n/1024, am/1024}')
	wait "$pid" || { cat "$work/err" >&2; exit 1; }
	pid=
	t1=$(date +%s.%N)
	python3 - "$work/stats.json" "$t0" "$t1" "$mem" >>"$work/r$r" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
top = [d["link"] or {} for d in rep["daemons"] if d["parent"] == ""]
got = sum(int(l.get("msgs_up", 0)) for l in top)
sent = sum(int(l.get("msgs_down", 0)) for l in top)
print("%.3f %.3f %.3f" % (rep["attached_seconds"], rep["modex_seconds"], float(sys.argv[3]) - float(sys.argv[2])), sys.argv[4], got, sent, len(top), rep["depth"])
EOF
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $nodes simulated daemons, one noop rank each (idling 4 s); star vs radix $radix"
for ((i = 1; i <= rounds; i++)); do
	if ((i % 2)); then run 0; run "$radix"; else run "$radix"; run 0; fi
	echo "round $i done (load $(cut -d' ' -f1 /proc/loadavg))"
done
col() { awk -v c="$1" '{print $c}' "$2" | median; }
printf '\n%-34s %14s %14s\n' "median of $rounds rounds" "star (radix 0)" "tree (radix $radix)"
for row in "launch: all daemons attached (s):1" "launch: modex done (s):2" "job, start to exit (s):3" \
	"gompid PSS, mean (MiB):4" "gompid PSS, max (MiB):5" "gompid anon RSS, mean (MiB):6" "gompid anon RSS, max (MiB):7" \
	"gompirun: messages received:8" "gompirun: messages sent:9" "gompirun: daemon links:10" "tree depth:11"; do
	printf '%-34s %14s %14s\n' "${row%:*}" "$(col "${row##*:}" "$work/r0")" "$(col "${row##*:}" "$work/r$radix")"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
