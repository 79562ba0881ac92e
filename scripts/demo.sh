#!/usr/bin/env bash
# The gompi demo: builds the binaries into ./bin, runs heat as a real job,
# checkpoints it twice, kills it, restarts it on one node, checks the answer.
# Run from anywhere: bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v go >/dev/null 2>&1; then
	echo "demo: the Go toolchain (go 1.26 or later) is needed to build gompi; install it and run again" >&2
	exit 1
fi

if [ -t 1 ]; then
	step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	step() { printf '\n== %s\n' "$*"; }
fi

step "Building the gompi binaries and examples into ./bin, the criu plugin into ./lib/gompi"
mkdir -p bin lib/gompi
go build -o bin/ ./cmd/... ./examples/...
# gompi-plugin-criu goes where gompid and gompirun look for plugins by
# default (mca_base_component_path empty: lib/gompi beside bin/), so that
# --mca crs criu finds it; it is not a command to run.
rm -f bin/gompi-plugin-criu
go build -o lib/gompi/ ./cmd/gompi-plugin-criu
ls bin lib/gompi

step "gompi-info: the frameworks, their components, and what selection would use"
./bin/gompi-info

step "gompi-info -am ft-enable-cr --mca crs_base_verbose 1 --param crs all: where each value comes from"
./bin/gompi-info -am ft-enable-cr --mca crs_base_verbose 1 --param crs all

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'node1 slots=2\nnode2 slots=2\n' >"$work/hosts"
heat=(./bin/heat -size 96 -steps 300)

step "examples/heat as one rank"
./bin/gompirun -np 1 "${heat[@]}" | tee "$work/one"

step "examples/heat as 4 ranks on two simulated nodes (one gompid each), tcp between nodes, uds within"
cat "$work/hosts"
./bin/gompirun -np 4 --hostfile "$work/hosts" --tag-output "${heat[@]}" | tee "$work/four"

one=$(sed -n 's/.*checksum: //p' "$work/one")
four=$(sed -n 's/.*checksum: //p' "$work/four")
if [ -z "$one" ] || [ "$one" != "$four" ]; then
	echo "demo: FAILED: checksum with 4 ranks ($four) differs from 1 rank ($one)" >&2
	exit 1
fi
echo "demo: the same checksum ($one) on 1 rank and on 4 ranks over two nodes"

step "Checkpoint/restart: heat on 4 ranks over two nodes with -am ft-enable-cr"
snaps="$work/snapshots"
mkdir -p "$snaps"
./bin/gompirun -np 4 --hostfile "$work/hosts" -am ft-enable-cr \
	--mca snapc_base_global_snapshot_dir "$snaps" "${heat[@]}" -sleep 20ms -every 10 >"$work/killed" 2>&1 &
job=$!
# Wait until the job answers on its control socket (its ranks are up) and
# heat has printed its first progress line (its ranks passed safe points,
# so their checkpoint coordinators run).
for _ in $(seq 300); do
	if [ "$(./bin/gompi-ps --ranks "$job" 2>/dev/null | grep -c ' connected$')" -ge 4 ] && grep -q '^step ' "$work/killed"; then break; fi
	if ! kill -0 "$job" 2>/dev/null; then cat "$work/killed"; echo "demo: FAILED: the job ended early" >&2; exit 1; fi
	sleep 0.1
done

step "gompi-checkpoint $job (twice; the second shows each phase)"
./bin/gompi-checkpoint "$job"
sleep 0.5
./bin/gompi-checkpoint --status "$job"

step "kill -9 the job's gompirun: its daemons and ranks go with it"
kill -9 "$job"
wait "$job" 2>/dev/null || true
ref=$(ls -d "$snaps"/gompi_global_snapshot_*.ckpt)

step "gompi-restart -i: what the reference holds"
./bin/gompi-restart -i "$ref" | sed -n 1,12p

step "gompi-restart on ONE node (another hostfile, no -np: it comes from the snapshot)"
printf 'solo slots=4\n' >"$work/solo"
./bin/gompi-restart --hostfile "$work/solo" "$ref" | tee "$work/restarted"

restarted=$(sed -n 's/.*checksum: //p' "$work/restarted")
if [ "$restarted" != "$one" ]; then
	echo "demo: FAILED: the restarted job's checksum ($restarted) differs from the uninterrupted run ($one)" >&2
	exit 1
fi
echo "demo: checkpointed twice, killed, restarted on one node: checksum $restarted, the same as the uninterrupted run"
