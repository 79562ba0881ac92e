#!/usr/bin/env bash
# Differential checkpoints of CRIU images (crs criu): what fraction of
# blocks change between two dumps of heat, and what CRIU's own incremental
# dump (--track-mem, --prev-images-dir) stores instead, in one run.
# examples/plainheat (heat without C/R code) on 4 ranks over two simulated
# nodes, an N x N grid (N = SIZE, default 1024), is checkpointed twice
# STEPS progress steps apart (default 20, heat's front moving a row a step)
# with sstore stage's differential checkpoints, once with 4 KiB blocks
# (CRIU's page size) and once with 1 MiB blocks; for the second sequence:
# the blocks it stored of its files' blocks, and its bytes against the
# first (full) one. Then a plainheat alone (its own PID namespace, no
# gompirun, as a rank's tree is) is dumped twice by CRIU itself, the second
# time as an incremental dump on top of the first; the bytes of each dump
# folder. Needs root and CRIU (scripts/install-criu.sh). Not part of CI.
#
#   [SIZE=1024] [STEPS=20] bash scripts/bench-dcp-criu.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
size=${SIZE:-1024}
steps=${STEPS:-20}
criu=$(bash scripts/install-criu.sh | tail -n 1)
export PATH="$(dirname "$criu"):$PATH"
work=$(mktemp -d)
pid= single=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$single" ] && kill -KILL "$single" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/bin" "$work/lib/gompi" "$work/noplugins"
go build -o "$work/bin/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./examples/plainheat
go build -o "$work/lib/gompi/" ./cmd/gompi-plugin-criu
heat=("$work/bin/plainheat" -size "$size" -steps 1000000 -every 1 -sleep 20ms)

# progress FILE N waits for N more progress lines in FILE.
progress() {
	local want=$(($(grep -c '^step ' "$1" || true) + $2))
	until [ "$(grep -c '^step ' "$1" || true)" -ge "$want" ]; do sleep 0.1; done
}

# gompi BS: two checkpoints with differential blocks of BS.
gompi() {
	local ck="$work/ck-$1" local="$work/local-$1"
	mkdir -p "$ck" "$local"
	"$work/bin/gompirun" -np 4 --host n1:2,n2:2 -am ft-enable-cr --mca crs criu \
		--mca mca_base_component_path "$work/lib/gompi" --mca sstore stage \
		--mca snapc_base_global_snapshot_dir "$ck" --mca sstore_stage_local_snapshot_dir "$local" \
		--mca sstore_stage_differential on --mca sstore_stage_block_size "$1" "${heat[@]}" >"$work/out" 2>&1 &
	pid=$!
	progress "$work/out" 3
	"$work/bin/gompi-checkpoint" "$pid" >/dev/null
	progress "$work/out" "$steps"
	"$work/bin/gompi-checkpoint" "$pid" >/dev/null
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	python3 - "$1" "$ck"/*/ <<'PY'
import os, sys
bs, ref = sys.argv[1], sys.argv[2]
def scan(seq):
    d = os.path.join(ref, str(seq))
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
    own = total = 0
    for r, _, fs in os.walk(d):
        for f in fs:
            if f.endswith(".blocks"):
                for l in open(os.path.join(r, f)):
                    p = l.split()
                    if p and p[0] == "block":
                        total += 1
                        own += p[2] == str(seq)
    return size, own, total
s0, _, _ = scan(0)
s1, own, total = scan(1)
print(f"crs criu, stage differential, {bs:>6} blocks: seq 1 stores {own}/{total} blocks ({100 * own / total:.1f} %), "
      f"{s1 / 1e6:.1f} MB against seq 0's {s0 / 1e6:.1f} MB ({100 * s1 / s0:.1f} %)")
PY
}

# bare: CRIU's own incremental dump of a plainheat alone.
bare() {
	GOMPI_MCA_mca_base_component_path="$work/noplugins" \
		unshare --pid --fork --kill-child setsid "${heat[@]}" >"$work/single" 2>&1 &
	single=$!
	progress "$work/single" 3
	local p
	p=$(pgrep -P "$single")
	mkdir "$work/d1" "$work/d2"
	if ! criu dump -t "$p" -D "$work/d1" --leave-running --shell-job --track-mem -o dump.log 2>"$work/d1.err"; then
		# Incremental dumps need the kernel's soft-dirty page tracking.
		echo "criu alone, --prev-images-dir: not measurable here: $(grep -h Error "$work/d1.err" "$work/d1/dump.log" 2>/dev/null | head -n 1)"
		kill -KILL "$single"
		wait "$single" 2>/dev/null || true
		single=
		return
	fi
	progress "$work/single" "$steps"
	criu dump -t "$p" -D "$work/d2" --leave-running --shell-job --track-mem --prev-images-dir ../d1 -o dump.log ||
		{ tail -n 5 "$work/d2/dump.log" >&2; exit 1; }
	kill -KILL "$single"
	wait "$single" 2>/dev/null || true
	single=
	rm -f "$work"/d?/dump.log
	local b1 b2
	b1=$(du -sb "$work/d1" | cut -f1)
	b2=$(du -sb "$work/d2" | cut -f1)
	awk -v a="$b1" -v b="$b2" 'BEGIN {printf "criu alone, --prev-images-dir: the second dump stores %.1f MB against the first one'"'"'s %.1f MB (%.1f %%)\n", b / 1e6, a / 1e6, 100 * b / a}'
}

echo "plainheat -size $size, two dumps $steps steps apart; load: $(cut -d' ' -f1 /proc/loadavg)"
gompi 4KiB
gompi 1MiB
bare
