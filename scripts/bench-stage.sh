#!/usr/bin/env bash
# The storage pipeline's figures (the dissertation's tables 3.9-3.12 at
# this machine's scale), in one run: examples/noop with 4 ranks x MIB MiB
# of compressible and of random state on two simulated nodes, checkpointed
# with sstore central, stage, stage+zstd and stage+s2, the global snapshot
# folder behind a private sshd on 127.0.0.1 (sftp; central, which writes
# straight into the global folder and cannot go through sftp, writes the
# same folder as a local path). For each: the application's stall (Target
# to the last node's Local Write, the time ranks spend saving), the
# checkpoint latency (request to commit) and the bytes stored. Each
# configuration is checkpointed ROUNDS times (after a first, warm-up
# checkpoint) and the medians are reported. Root and openssh-server are
# needed (apt-get install -y openssh-server). Not part of CI.
#
#   [STATES="compressible random"] bash scripts/bench-stage.sh [ROUNDS] [MIB]   (default 3 256)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-3}
mib=${2:-256}
sshd=/usr/sbin/sshd
[ -x "$sshd" ] || { echo "bench-stage: sshd is missing: apt-get install -y openssh-server" >&2; exit 1; }

work=$(mktemp -d)
pid= sshd_pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-checkpoint ./examples/noop

# A private sshd with its own keys.
keys="$work/keys"
mkdir -p "$keys" /run/sshd
for k in host user; do ssh-keygen -q -t ed25519 -N "" -C "$k" -f "$keys/$k"; done
cp "$keys/user.pub" "$keys/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$keys/host.pub")" >"$keys/known_hosts"
cat >"$keys/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $keys/host
AuthorizedKeysFile $keys/authorized_keys
PermitRootLogin yes
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxStartups 200
MaxSessions 100
Subsystem sftp internal-sftp
PidFile $keys/sshd.pid
CONF
"$sshd" -D -e -f "$keys/sshd_config" 2>"$keys/sshd.log" &
sshd_pid=$!
until grep -q "Server listening" "$keys/sshd.log"; do sleep 0.1; done
printf 'n1 slots=2\nn2 slots=2\n' >"$work/hosts"

# run CONFIG STATE -> one line per round: "stall latency bytes"
run() {
	local name=$1 state=$2 global="$work/global-$1-$2" local="$work/local-$1-$2"
	mkdir -p "$global" "$local"
	local mca=(-am ft-enable-cr --mca sstore_stage_local_snapshot_dir "$local")
	case $name in
	central) mca+=(--mca sstore central --mca snapc_base_global_snapshot_dir "$global") ;;
	stage*)
		mca+=(--mca sstore stage --mca filem sftp --mca filem_sftp_identity "$keys/user"
			--mca filem_sftp_known_hosts "$keys/known_hosts"
			--mca snapc_base_global_snapshot_dir "sftp://root@127.0.0.1:$port$global")
		case $name in
		stage+zstd) mca+=(--mca sstore_stage_compress zstd) ;;
		stage+s2) mca+=(--mca sstore_stage_compress s2) ;;
		esac
		;;
	esac
	"$work/gompirun" -np 4 --hostfile "$work/hosts" "${mca[@]}" "$work/noop" -mib "$mib" -state "$state" >"$work/noop.out" 2>&1 &
	pid=$!
	until [ "$(grep -c holds "$work/noop.out" || true)" = 4 ]; do
		kill -0 "$pid" 2>/dev/null || { cat "$work/noop.out" >&2; exit 1; }
		sleep 0.1
	done
	"$work/gompi-checkpoint" "$pid" >/dev/null # warm-up: the ranks' pages are written once
	for ((r = 1; r <= rounds; r++)); do
		sync
		out=$("$work/gompi-checkpoint" --status "$pid")
		seq=$(sed -n 's/^Snapshot Ref\.: *\([0-9]*\) .*/\1/p' <<<"$out")
		ref=$(sed -n 's/^Snapshot Ref\.: *[0-9]* //p' <<<"$out")
		# Stall: from Target's end to the last Local Write (column 2 is the
		# time since the request).
		awk -v bytes="$(du -sb "$global/$ref/$seq" | cut -f1)" '
			/ Target - / { gsub(/[\[\]]/, ""); t = $3 }
			/ Local Write / { gsub(/[\[\]]/, ""); w = $3 }
			/ Commit - / { gsub(/[\[\]]/, ""); c = $3 }
			END { printf "%.2f %.2f %d\n", w - t, c, bytes }' <<<"$out"
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$global" "$local"
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
printf '%-12s %-13s %10s %12s %12s   (4 ranks x %d MiB, medians of %d)\n' config state "stall (s)" "latency (s)" "stored (MiB)" "$mib" "$rounds"
for state in ${STATES:-compressible random}; do
	for name in central stage stage+zstd stage+s2; do
		res=$(run "$name" "$state")
		stall=$(cut -d' ' -f1 <<<"$res" | median)
		lat=$(cut -d' ' -f2 <<<"$res" | median)
		bytes=$(cut -d' ' -f3 <<<"$res" | median)
		printf '%-12s %-13s %10.2f %12.2f %12.1f\n' "$name" "$state" "$stall" "$lat" "$(awk -v b="$bytes" 'BEGIN {print b / 1048576}')"
	done
done
