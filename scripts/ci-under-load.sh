#!/usr/bin/env bash
# Checks that the test suite holds on a busy machine: clones the committed
# tree fresh, then runs .ci/run in it RUNS times in a row while a second
# clone runs `go test -race ./...` over and over beside it (a second
# developer, or a second CI job, on the same two cores). The runs share a
# Go build cache of their own that starts empty: the first run is cold,
# the next ones warm. Prints each run's wall time and summary line; exits
# non-zero if any run of .ci/run failed.
# The load's own results are kept in its log but do not decide the outcome.
# Not part of CI (it runs CI).
#
#   bash scripts/ci-under-load.sh [RUNS] [WORKDIR]   (default 2, a new temporary folder)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-2}
work=${2:-$(mktemp -d)}
src=$(pwd)

git clone -q "$src" "$work/ci"
git clone -q "$src" "$work/load"

load_pid=
cleanup() {
	if [ -n "$load_pid" ]; then
		kill -- -"$load_pid" 2>/dev/null || true
		wait "$load_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# The load runs in its own process group so it can be stopped whole.
set -m
(
	cd "$work/load"
	while true; do
		go test -race -count=1 ./... >>"$work/load.log" 2>&1 || true
		echo "load round ended $(date -u +%T)" >>"$work/load.log"
	done
) &
load_pid=$!
set +m

failed=0
for i in $(seq "$runs"); do
	t0=$SECONDS
	rc=0
	(cd "$work/ci" && GOCACHE="$work/gocache" bash .ci/run) >"$work/ci-$i.log" 2>&1 || rc=$?
	echo "run $i: exit $rc in $((SECONDS - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
	grep -E '^(ci:|tests:)' "$work/ci-$i.log" | sed 's/^/  /'
	[ "$rc" -eq 0 ] || failed=1
done
echo "logs in $work (ci-N.log, load.log)"
exit "$failed"
