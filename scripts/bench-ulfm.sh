#!/usr/bin/env bash
# Figures of the fault-tolerant agreement (issue 23): latency of Agree and
# Shrink next to an Allreduce of one int, side by side in one run, at 4-64
# in-process ranks and 4-16 ranks as separate processes (medians of 7
# samples of 10 calls, at rank 0), with the messages and rounds of one
# call as the library counted them; then the protocol's own counts at
# 1..1024 ranks on an in-memory network (the same state machine). Not part
# of CI.
#
#   bash scripts/bench-ulfm.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GOMPI_ULFM_FIGURES=1 go test -count=1 -run 'TestULFMFigures$' -v ./mpi | grep -E '^(in-process|processes)'
go test -count=1 -run 'TestAgreeSimFailureFree$' -v ./mpi | sed -n 's/.*agree_internal_test.go:[0-9]*: //p'
