#!/usr/bin/env bash
# Float-aware compression's figures, side by side in one run: on a 32 MiB
# smooth float64 field (examples/field's formula: sines around 300, no
# zeros) the ratio and MB per processor second of zstd and s2 alone, with
# the byte shuffle before them, with the delta-shuffle before them, and of
# the filters alone (compress.BenchmarkFloat); what sampling a 64 MiB file
# costs (compress.BenchmarkChoose: random bytes must be given up on after
# one sample); and the stage component's drain of a 64 MiB file, smooth or
# random (examples/noop's state), stored as is, compressed without a filter
# and with the filter chosen by sampling (stage.BenchmarkDrainFloat). Each
# benchmark runs COUNT times; the load average before and after is printed
# (figures taken on a loaded machine are not worth comparing across runs;
# MB/cpu-s, processor time rather than wall time, holds up best). Not part
# of CI.
#
#   bash scripts/bench-compress.sh [COUNT]   (default 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
count=${1:-3}
echo "# $(nproc) processors; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -count="$count" -run '^$' -bench 'BenchmarkFloat|BenchmarkChoose' -benchtime=5x ./frameworks/sstore/compress | grep -E '^(Benchmark|cpu:)'
go test -count="$count" -run '^$' -bench 'BenchmarkDrainFloat' -benchtime=5x ./components/sstore/stage | grep -E '^Benchmark'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
