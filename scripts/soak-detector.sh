#!/usr/bin/env bash
# The unresponsive-rank detector's soak (issue 23): one long job with the
# detector at its defaults (errmgr_base_rank_heartbeat_period and _timeout,
# gompi-info shows them) on a machine kept busy the whole time, a busy loop
# per core plus a Go build over and over (GC pauses, the scheduler's
# delays), under errmgr sustain so a false alarm would not end the job but
# show up as a rank gompirun reports unresponsive. Passes when the job ends
# with every rank, its traffic verified (examples/traffic checks every
# message), and gompirun reported no rank. Not part of CI (10 minutes).
# LOAD=0 leaves the load out, for a machine something else keeps busy (a
# run of .ci/run beside it).
#
#   [LOAD=0] bash scripts/soak-detector.sh [MINUTES] [RANKS]   (default 10, 4)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=${1:-10}
ranks=${2:-4}
work=$(mktemp -d)
load_pid=
cleanup() {
	if [ -n "$load_pid" ]; then
		kill -- -"$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./examples/traffic
printf 'n1 slots=%d\nn2 slots=%d\n' "$ranks" "$ranks" >"$work/hosts"

# The load runs in its own process group so it is stopped whole.
if [ "${LOAD:-1}" != 0 ]; then
	set -m
	(
		for ((i = 0; i < $(nproc); i++)); do
			while :; do :; done &
		done
		while :; do
			go build -a -o /dev/null ./cmd/gompirun >/dev/null 2>&1 || true
		done
	) &
	load_pid=$!
	set +m
fi

# About MINUTES of traffic: rounds paced at 50 ms.
rounds=$((minutes * 60 * 20))
start=$SECONDS
status=0
"$work/gompirun" --mca errmgr sustain,default -np "$ranks" --hostfile "$work/hosts" \
	"$work/traffic" -rounds "$rounds" -pace 50ms >"$work/out" 2>"$work/err" || status=$?
echo "soak: $((SECONDS - start)) s, $ranks ranks, load average $(cut -d' ' -f1-3 /proc/loadavg), exit status $status"
tail -n 1 "$work/out"
if grep -E 'unresponsive|sustain: the job runs on without' "$work/err"; then
	echo "soak: FAIL: the detector reported a rank on a busy machine (a false alarm)"
	exit 1
fi
if [ "$status" -ne 0 ] || ! grep -q '^traffic: rounds=' "$work/out"; then
	echo "soak: FAIL: the job did not end well; its stderr:"
	tail -n 20 "$work/err"
	exit 1
fi
echo "soak: PASS: no false alarm"
