#!/usr/bin/env bash
# Differential checkpoints' figure: stored bytes and checkpoint time per
# sequence, differential against full, side by side in one run. examples/heat
# on 4 ranks over two simulated nodes (an N x N grid, N = SIZE, default
# 4096: 33.6 MB per rank) checkpoints itself every 10 steps for 100 steps
# (-checkpoint-every: 10 sequences at known steps, no timing) with sstore
# stage draining into a global folder on this machine. Heat's hot region is
# the top edge: its front moves one row a step, so between two checkpoints
# only the rows above it change, with each rank's first block (step and
# residual) and its small library state: at N = 4096 and 1 MiB blocks,
# 12 to 15 of the job's 136 blocks (9-11 %), the case differential
# checkpoints are for. Each configuration: full or differential
# (sstore_stage_differential, 1 MiB blocks, a full sequence every 8), with
# no compression and with zstd (per block). For each sequence: the bytes
# its folder holds on global storage, the blocks it stored of the blocks
# of its files, and the checkpoint's time (request to commit, from the
# global metadata). Not part of CI.
#
#   [SIZE=4096] bash scripts/bench-dcp.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size=${SIZE:-4096}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./examples/heat
printf 'n1 slots=2\nn2 slots=2\n' >"$work/hosts"

# run NAME MCA... -> the reference's folder
run() {
	local name=$1 global="$work/global-$1" local="$work/local-$1"
	shift
	mkdir -p "$global" "$local"
	"$work/gompirun" -np 4 --hostfile "$work/hosts" -am ft-enable-cr --mca sstore stage \
		--mca snapc_base_global_snapshot_dir "$global" --mca sstore_stage_local_snapshot_dir "$local" "$@" \
		"$work/heat" -size "$size" -steps 100 -checkpoint-every 10 >"$work/$name.out" 2>&1 ||
		{ cat "$work/$name.out" >&2; exit 1; }
	echo "$global"/*
}

declare -A refs
refs[full]=$(run full)
refs[dcp]=$(run dcp --mca sstore_stage_differential on)
refs[full+zstd]=$(run full+zstd --mca sstore_stage_compress zstd)
refs[dcp+zstd]=$(run dcp+zstd --mca sstore_stage_compress zstd --mca sstore_stage_differential on)

python3 - "$size" "${refs[full]}" "${refs[dcp]}" "${refs[full+zstd]}" "${refs[dcp+zstd]}" <<'PY'
import datetime, os, re, sys
size, refs = sys.argv[1], dict(zip(["full", "dcp", "full+zstd", "dcp+zstd"], sys.argv[2:]))

def parse_time(s):
    # RFC 3339 with nanoseconds: keep microseconds for Python.
    s = re.sub(r"(\.\d{6})\d*", r"\1", s).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(s)

def seqs(ref):
    started, finished = {}, {}
    for line in open(os.path.join(ref, "global_snapshot_meta")):
        m = re.match(r"# Seq: (\d+) .*started=(\S+)", line)
        if m: started[int(m[1])] = parse_time(m[2])
        m = re.match(r"# Committed Seq: (\d+) finished=(\S+)", line)
        if m: finished[int(m[1])] = parse_time(m[2])
    out = {}
    for s in sorted(finished):
        d = os.path.join(ref, str(s))
        stored = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
        own = total = 0
        for r, _, fs in os.walk(d):
            for f in fs:
                if f.endswith(".blocks"):
                    for l in open(os.path.join(r, f)):
                        p = l.split()
                        if p and p[0] == "block":
                            total += 1
                            own += p[2] == str(s)
        out[s] = (stored, own, total, (finished[s] - started[s]).total_seconds())
    return out

data = {k: seqs(v) for k, v in refs.items()}
print(f"heat -size {size}, 4 ranks, 2 nodes, a checkpoint every 10 steps; load: {open('/proc/loadavg').read().split()[0]}")
print(f"{'seq':>3}  " + "  ".join(f"{k + ' MB':>12} {k + ' s':>12}" for k in data) + "   dcp blocks stored")
for s in sorted(data["full"]):
    row = [f"{data[k][s][0] / 1e6:12.2f} {data[k][s][3]:12.2f}" for k in data]
    own, total = data["dcp"][s][1], data["dcp"][s][2]
    print(f"{s:>3}  " + "  ".join(row) + f"   {own}/{total}")
for k in data:
    print(f"{k:>10}: {sum(v[0] for v in data[k].values()) / 1e6:8.2f} MB in all, {sum(v[3] for v in data[k].values()):6.2f} s of checkpoints")
for a, b in (("dcp", "full"), ("dcp+zstd", "full+zstd")):
    diff = [s for s in data[a] if data[a][s][1] < data[a][s][2]]
    if diff:
        r = sum(data[a][s][0] for s in diff) / sum(data[b][s][0] for s in diff)
        print(f"{a} stores {100 * r:.1f} % of {b}'s bytes over its differential sequences {diff}")
PY
