#!/usr/bin/env bash
# Measures gompi's message path side by side with Open MPI 4.1 (Debian's
# openmpi-bin) on this machine, in one run: ping-pong latency and
# streaming bandwidth (window 16) from 1 B to 4 MiB, and Allreduce from
# 8 B to 1 MiB, for gompi tcp vs Open MPI tcp and gompi's on-node
# transport (sm when gompi-info lists it, else uds) vs Open MPI's shared
# memory (vader), 2 ranks on one node. Rounds alternate between the
# series so load drifts hit them alike; the table gives the medians, the
# plot the curves (scripts/benchplot), the summary the ratios the
# project's goals name. Not part of CI (it installs Open MPI and takes
# minutes).
#
#   bash scripts/bench-vs-openmpi.sh [-r ROUNDS] [-l] [-b REV] [-c] [-n] [-q] [-o DIR]
#
#   -r ROUNDS  rounds (default 5)
#   -l         load test: the same run with other work on the machine, a
#              busy loop per core (LOAD_PROCS overrides the count) that the
#              script starts and stops itself
#   -b REV     also measure gompi tcp as built from git revision REV (a
#              series "gompi-tcp@REV"), for before/after in one run
#   -c         also the C interface: the same ompi_bench.c compiled with
#              gompicc (scripts/build-c.sh into the run's folder) and run
#              under gompirun, series "gompi-c-tcp" and "gompi-c-<on-node>"
#              beside gompi's Go API and Open MPI (issue 22's goals: C 8 B
#              latency <= 1.1x Go's on the same BTL, <= 1.2x Open MPI's tcp)
#   -n         also NetPIPE (scripts/netpipe.sh): NPmpi built with Open
#              MPI's mpicc and with gompicc, 1 B to 4 MiB without
#              perturbation, series "np-ompi-tcp", "np-gompi-c-tcp",
#              "np-ompi-vader", "np-gompi-c-<on-node>" (test "netpipe":
#              NetPIPE's one-way time and throughput); implies -c's build
#   -q         quick smoke: few iterations and sizes
#   -o DIR     where rows.jsonl, table.txt and plot.svg/plot.png go
#              (default: a new folder under /tmp)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=5 load=0 base="" quick=0 out="" capi=0 netpipe=0
while getopts "r:lb:cnqo:" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	l) load=1 ;;
	b) base=$OPTARG ;;
	c) capi=1 ;;
	n) netpipe=1 ;;
	q) quick=1 ;;
	o) out=$OPTARG ;;
	*) exit 2 ;;
	esac
done
out=${out:-$(mktemp -d /tmp/gompi-vs-openmpi.XXXXXX)}
mkdir -p "$out"

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
burners=()
cleanup() {
	for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-info ./examples/bench
mpicc -O2 -o "$work/ompi_bench" examples/bench/testdata/ompi_bench.c
if ((capi || netpipe)); then
	bash scripts/build-c.sh "$work/cprefix" >"$work/build-c.log" 2>&1 || { cat "$work/build-c.log" >&2; exit 1; }
	"$work/cprefix/bin/gompicc" -O2 -o "$work/gompi_c_bench" examples/bench/testdata/ompi_bench.c
fi
if ((netpipe)); then
	np_ompi=$(bash scripts/netpipe.sh -c mpicc -o "$work/np-ompi" | tail -n 1)
	np_gompi=$(bash scripts/netpipe.sh -c "$work/cprefix/bin/gompicc" -o "$work/np-gompi" | tail -n 1)
fi
if [ -n "$base" ]; then
	mkdir -p "$work/base/src" "$work/base/bin"
	git archive "$base" | tar -x -C "$work/base/src"
	(cd "$work/base/src" && go build -o "$work/base/bin/" ./cmd/gompirun ./cmd/gompid ./examples/bench)
fi
# The on-node BTL: sm once it is registered, uds before.
onnode=uds
if "$work/gompi-info" | grep -q '^ *MCA btl: sm '; then
	onnode=sm
fi

# Iterations per size up to 64 KiB (the bench programs scale them down
# above), warm-up, and the sizes of each sweep.
if ((quick)); then
	iters=200 warmup=10 p2p=(-min 1 -max 4MiB) coll=(-min 8 -max 1MiB)
else
	iters=5000 warmup=50 p2p=(-min 1 -max 4MiB) coll=(-min 8 -max 1MiB)
fi
common=(-iters "$iters" -warmup "$warmup" -window 16 -json)

# gompi SERIES BINDIR BTL: both sweeps, each row tagged with the series.
gompi() {
	local series=$1 bin=$2 btl=$3
	for sweep in "latency,bandwidth ${p2p[*]}" "allreduce ${coll[*]}"; do
		set -- $sweep
		"$bin/gompirun" -np 2 --host n1,n1 --mca btl "$btl" "$bin/bench" -tests "$1" "${@:2}" "${common[@]}"
	done | sed -n "s/^{/{\"series\":\"$series\",/p"
}
# gompic SERIES BTL: the C program (ompi_bench.c built with gompicc) under
# gompirun, flags as Open MPI's run gets them.
gompic() {
	local series=$1 btl=$2
	for sweep in "latency,bandwidth ${p2p[*]}" "allreduce ${coll[*]}"; do
		set -- $sweep
		"$work/gompirun" -np 2 --host n1,n1 --mca btl "$btl" "$work/gompi_c_bench" -tests "$1" "${@:2}" "${common[@]/-json/}"
	done | sed -n "s/^{/{\"series\":\"$series\",/p"
}
# ompi SERIES BTLS: the same with Open MPI.
ompi() {
	local series=$1 btl=$2
	for sweep in "latency,bandwidth ${p2p[*]}" "allreduce ${coll[*]}"; do
		set -- $sweep
		mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl "$btl" --mca btl_tcp_if_include lo \
			"$work/ompi_bench" -tests "$1" "${@:2}" "${common[@]/-json/}"
	done | sed -n "s/^{/{\"series\":\"$series\",/p"
}

# np SERIES NPmpi LAUNCHER...: one NetPIPE run, its output file (bytes,
# Mbit/s as 2^20 bits, one-way seconds a line) turned into rows.
np() {
	local series=$1 bin=$2 f
	shift 2
	f=$(mktemp "$work/np.XXXXXX")
	(cd "$work" && "$@" "$bin" -u $((4 << 20)) -p 0 -o "$f" >/dev/null)
	awk -v s="$series" '{printf "{\"series\":\"%s\",\"test\":\"netpipe\",\"size\":%d,\"latency_us\":%.4f,\"mb_per_s\":%.4f}\n", s, $1, $3 * 1e6, $1 / $3 / 1e6}' "$f"
}
ompirun=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl_tcp_if_include lo --mca btl)

if ((load)); then
	n=${LOAD_PROCS:-$(nproc)}
	for ((i = 0; i < n; i++)); do
		bash -c 'while :; do :; done' &
		burners+=($!)
	done
	echo "load test: $n busy loops running" >&2
fi
names=("gompi-tcp" "ompi-tcp" "gompi-$onnode" "ompi-vader")
[ -n "$base" ] && names+=("gompi-tcp@$base")
((capi)) && names+=("gompi-c-tcp" "gompi-c-$onnode")
((netpipe)) && names+=("np-ompi-tcp" "np-gompi-c-tcp" "np-ompi-vader" "np-gompi-c-$onnode")
: >"$out/rows.jsonl"
for ((r = 1; r <= rounds; r++)); do
	for n in "${names[@]}"; do
		case $n in
		np-ompi-tcp) np "$n" "$np_ompi" "${ompirun[@]}" tcp,self ;;
		np-ompi-vader) np "$n" "$np_ompi" "${ompirun[@]}" vader,self ;;
		np-gompi-c-tcp) np "$n" "$np_gompi" "$work/gompirun" -np 2 --host n1,n1 --mca btl tcp ;;
		np-gompi-c-*) np "$n" "$np_gompi" "$work/gompirun" -np 2 --host n1,n1 --mca btl "$onnode" ;;
		gompi-tcp) gompi "$n" "$work" tcp ;;
		gompi-tcp@*) gompi "$n" "$work/base/bin" tcp ;;
		gompi-c-tcp) gompic "$n" tcp ;;
		gompi-c-*) gompic "$n" "$onnode" ;;
		gompi-*) gompi "$n" "$work" "$onnode" ;;
		ompi-tcp) ompi "$n" tcp,self ;;
		ompi-vader) ompi "$n" vader,self ;;
		esac >>"$out/rows.jsonl"
	done
	echo "round $r/$rounds done" >&2
done
for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
burners=()

title="gompi vs Open MPI 4.1, 2 ranks on one node ($(nproc) cores), median of $rounds rounds"
((load)) && title+=", under load"
go run ./scripts/benchplot -in "$out/rows.jsonl" -out "$out/plot.svg" -title "$title" >"$out/table.txt"
go run ./scripts/benchplot -in "$out/rows.jsonl" -out "$out/plot.png" -title "$title" >/dev/null
cat "$out/table.txt"

# The goals' figures: 8 B latency, 1 MiB bandwidth, Allreduce 8 B and 1 MiB.
med() { # SERIES TEST SIZE FIELD
	grep "\"series\":\"$1\",\"test\":\"$2\",\"size\":$3," "$out/rows.jsonl" |
		sed -n "s/.*\"$4\":\([0-9.e+-]*\).*/\1/p" | sort -g |
		awk '{v[NR]=$1} END {if (NR) print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
summary() { # GOMPI OMPI
	local l8 o8 b1 ob1 a8 oa8 a1 oa1
	l8=$(med "$1" latency 8 latency_us) o8=$(med "$2" latency 8 latency_us)
	b1=$(med "$1" bandwidth 1048576 mb_per_s) ob1=$(med "$2" bandwidth 1048576 mb_per_s)
	a8=$(med "$1" allreduce 8 latency_us) oa8=$(med "$2" allreduce 8 latency_us)
	a1=$(med "$1" allreduce 1048576 latency_us) oa1=$(med "$2" allreduce 1048576 latency_us)
	printf '%-16s vs %-10s 8B latency %7.2f vs %7.2f us (%sx)  1MiB bandwidth %7.0f vs %7.0f MB/s (%sx)\n' \
		"$1" "$2" "$l8" "$o8" "$(ratio "$l8" "$o8")" "$b1" "$ob1" "$(ratio "$b1" "$ob1")"
	printf '%-16s    %-10s Allreduce 8B %7.2f vs %7.2f us (%sx)  Allreduce 1MiB %7.0f vs %7.0f us (%sx)\n' \
		"" "" "$a8" "$oa8" "$(ratio "$a8" "$oa8")" "$a1" "$oa1" "$(ratio "$a1" "$oa1")"
}
{
	echo "# summary (goals: tcp latency <= 1.0x, bandwidth >= 1.0x; sm latency <= 2x vader, bandwidth >= 1.0x;"
	echo "#          Allreduce <= 1.5x latency at 8 B, 1 MiB time <= 1.25x)"
	summary gompi-tcp ompi-tcp
	summary "gompi-$onnode" ompi-vader
	[ -n "$base" ] && summary "gompi-tcp@$base" ompi-tcp
	if ((capi)); then
		summary gompi-c-tcp gompi-tcp
		summary gompi-c-tcp ompi-tcp
		summary "gompi-c-$onnode" "gompi-$onnode"
	fi
	if ((netpipe)); then
		nps() { # GOMPI OMPI: NetPIPE's 8 B time and 1 MiB throughput
			local a b c d
			a=$(med "$1" netpipe 8 latency_us) b=$(med "$2" netpipe 8 latency_us)
			c=$(med "$1" netpipe 1048576 mb_per_s) d=$(med "$2" netpipe 1048576 mb_per_s)
			printf '%-16s vs %-12s NetPIPE 8B %7.2f vs %7.2f us (%sx)  1MiB %7.0f vs %7.0f MB/s (%sx)\n' \
				"$1" "$2" "$a" "$b" "$(ratio "$a" "$b")" "$c" "$d" "$(ratio "$c" "$d")"
		}
		nps np-gompi-c-tcp np-ompi-tcp
		nps "np-gompi-c-$onnode" np-ompi-vader
	fi
	echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)$( ((load)) && echo ", with the script's own busy loops")"
} | tee -a "$out/table.txt"
echo "rows, table and plots (plot.svg, plot.png) in $out" >&2
