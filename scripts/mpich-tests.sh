#!/usr/bin/env bash
# Runs MPICH's test suite (test/mpi of Debian's mpich source package,
# fetched by scripts/mpich-source.sh, never committed) against an MPI:
# Open MPI (the mpicc/mpirun on PATH, to prove the runner) or gompi
# (gompicc and gompirun of a prefix scripts/build-c.sh made). The suite is
# configured once per MPI under .local/mpich-tests/MPI (reused), with a
# shim header for the MPI-1 names removed in MPI-3 that its dtpools
# library still calls; the tests of pt2pt coll comm group datatype init
# errhan attr topo are built (a test that does not compile counts as
# "nobuild") and run one at a time at <= 4 ranks, each bounded at 60 s.
# Variants of a test for MPICH's own control variables (env=MPIR_CVAR_...)
# and tests of non-standard behaviour (strict=false) are left out, and of
# the datatype-pool variants (testlist.dtp) one run per test and element
# type is kept.
#
# With gompi a test is applicable only when every MPI_ function its binary
# leaves undefined (nm -u) is listed by `gompi-info --c-api`; the others
# count as "n/a". A test passes as MPICH's runtests says: exit status 0
# and a "No Errors" line, nothing else on standard output (resultTest=
# TestStatus and TestErrFatal: a non-zero status; TestStatusNoErrors: a
# non-zero status and "No Errors").
#
# Prints a line per test (PASS/FAIL/N/A/NOBUILD), pass counts per folder,
# and writes them to OUT/results.txt. With -e FILE every test listed there
# (lines "dir/name nprocs [args]", as results.txt names them) must pass,
# or the script exits 1: CI runs it so with gompi and
# capi/ctest/testdata/mpich-expected-pass.
#
#   bash scripts/mpich-tests.sh [-m openmpi|gompi] [-p PREFIX] [-a] [-t] [-j N] [-e FILE [-x]] [-o OUT] [-d DIRS]
#
#   -m MPI     openmpi (default) or gompi
#   -p PREFIX  gompi's C prefix (default $GOMPI_C_PREFIX, else
#              scripts/build-c.sh into .local/gompi-c)
#   -a         the long run: every test at every rank count it lists, the
#              MPICH variants and datatype-pool runs left out above included
#   -t         try every test on gompi, whatever gompi-info --c-api lists
#              (to find what passes before it lists it)
#   -j N       run N tests at a time (default 1; CI runs 2: most tests
#              wait more than they compute, and one at a time the nine
#              folders take about half an hour)
#   -e FILE    the expected-pass list to enforce
#   -x         with -e: run only the tests FILE lists (CI: what must pass,
#              without the minutes known failures take to time out); the
#              counts then cover those alone
#   -o OUT     where results.txt goes (default a new folder under /tmp)
#   -d DIRS    the folders to run (comma-separated; default the nine above)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
mpi=openmpi prefix=${GOMPI_C_PREFIX:-} all=0 try=0 only=0 jobs=1 expected="" out="" dirs="pt2pt,coll,comm,group,datatype,init,errhan,attr,topo"
while getopts "m:p:atxj:e:o:d:" opt; do
	case $opt in
	m) mpi=$OPTARG ;;
	p) prefix=$OPTARG ;;
	a) all=1 ;;
	t) try=1 ;;
	x) only=1 ;;
	j) jobs=$OPTARG ;;
	e) expected=$(realpath "$OPTARG") ;;
	o) out=$OPTARG ;;
	d) dirs=$OPTARG ;;
	*) exit 2 ;;
	esac
done
if ((only)) && [ -z "$expected" ]; then
	echo "mpich-tests: -x runs only the tests of the -e list: give -e FILE" >&2
	exit 2
fi
say() { echo "mpich-tests: $*" >&2; }
out=${out:-$(mktemp -d /tmp/mpich-tests.XXXXXX)}
mkdir -p "$out"
out=$(realpath "$out")
maxnp=4 pertest=60
((all)) && maxnp=1000

# --- the MPI: compiler, launcher, and (gompi) the functions it provides ---
api=""
case $mpi in
openmpi)
	cc=mpicc
	launch=(mpirun --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none -np)
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	command -v mpicc >/dev/null || { say "Open MPI's mpicc is not on PATH"; exit 1; }
	;;
gompi)
	if [ -z "$prefix" ]; then
		prefix=$root/.local/gompi-c
		bash scripts/build-c.sh "$prefix" >&2
	fi
	prefix=$(realpath "$prefix")
	cc=$prefix/bin/gompicc
	bin=$prefix/bin
	if [ ! -x "$bin/gompirun" ] || [ ! -x "$bin/gompi-info" ]; then
		bin=$out/bin
		go build -o "$bin/" ./cmd/gompirun ./cmd/gompid ./cmd/gompi-info
	fi
	launch=("$bin/gompirun" --oversubscribe -np)
	api=$out/c-api.txt
	{ "$bin/gompi-info" --c-api 2>/dev/null || true; } | { grep -oE '\bP?MPI_[A-Za-z0-9_]+' || true; } | sed 's/^P//' | sort -u >"$api"
	if ((try)); then
		api=""
	elif [ ! -s "$api" ]; then
		# Nothing is known to work: every test is n/a, and building the
		# suite would prove nothing.
		say "gompi-info --c-api lists no C function: every test is n/a"
		if [ -n "$expected" ] && grep -qvE '^\s*(#|$)' "$expected"; then
			say "but $(basename "$expected") lists tests that must pass"
			exit 1
		fi
		exit 0
	fi
	;;
*) say "-m $mpi: openmpi or gompi"; exit 2 ;;
esac

# --- the suite, configured against cc -------------------------------------
src=$(bash scripts/mpich-source.sh mpich | tail -n 1)
build=$root/.local/mpich-tests/$mpi
stamp="$cc $(command -v "$cc" || true)"
if [ ! -f "$build/.configured" ] || [ "$(cat "$build/.configured")" != "$stamp" ]; then
	say "configuring $src/test/mpi against $cc in $build (about 2 minutes)"
	rm -rf "$build"
	mkdir -p "$build"
	cp -a "$src/test/mpi/." "$build/" # -a: timestamps kept, so make does not rerun automake
	# dtpools calls MPI_Type_hvector/hindexed, removed in MPI-3 (Open MPI's
	# header poisons them, gompi's does not declare them).
	cat >"$build/mpi1-shim.h" <<-'SHIM'
		#include <mpi.h>
		#undef MPI_Type_hvector
		#undef MPI_Type_hindexed
		#define MPI_Type_hvector(c, b, s, o, n) MPI_Type_create_hvector(c, b, s, o, n)
		#define MPI_Type_hindexed(c, b, d, o, n) MPI_Type_create_hindexed(c, b, d, o, n)
	SHIM
	(cd "$build" && ./configure MPICC="$cc" CC="$cc" CFLAGS="-O1 -include $build/mpi1-shim.h" \
		--disable-fortran --disable-cxx --disable-romio --disable-spawn --disable-ft-tests \
		--disable-perftest --enable-strictmpi >"$build/configure.log" 2>&1) ||
		{ say "configure failed: $(tail -n 5 "$build/configure.log")"; exit 1; }
	echo "$stamp" >"$build/.configured"
fi
say "building util, dtpools and $dirs"
make -C "$build/util" -j2 all >"$build/make-util.log" 2>&1 || { say "util: $(tail -n 5 "$build/make-util.log")"; exit 1; }
make -C "$build/dtpools" -j2 >"$build/make-dtpools.log" 2>&1 || { say "dtpools: $(tail -n 5 "$build/make-dtpools.log")"; exit 1; }
IFS=, read -r -a dirlist <<<"$dirs"
for d in "${dirlist[@]}"; do
	make -C "$build/$d" -k -j2 >"$build/make-$d.log" 2>&1 || true
done

# --- the runs ------------------------------------------------------------------
# tests DIR: the lines of DIR's test lists to run, "name np opts..."
tests() {
	local d=$1
	local lists=("$build/$d/testlist")
	[ ! -f "$build/$d/testlist.dtp" ] || lists+=("$build/$d/testlist.dtp")
	# the files themselves, not a pipe: the pool runs are told by FILENAME
	awk -v all="$all" -v maxnp="$maxnp" '
		/^[ \t]*#/ || NF < 2 { next }
		$2 !~ /^[0-9]+$/ || $2 > maxnp { next }
		!all && (/env=MPIR_/ || /strict=false/) { next }
		# testlist.dtp repeats a test over datatype pools and counts (24
		# runs of pingping): short of -a, one run per test and element type
		!all && FILENAME ~ /\.dtp$/ {
			type = ""
			for (i = 3; i <= NF; i++) if ($i ~ /^arg=-type=/) type = $i
			if (seen[$1, $2, type]++) next
		}
		{ print }' "${lists[@]}"
}
# missing BINARY: the MPI functions BINARY needs that the MPI lacks.
missing() {
	[ -n "$api" ] || return 0
	nm -u -D "$1" 2>/dev/null | awk '{ print $NF }' | sed 's/@.*//; s/^P//' | { grep -E '^MPI_' || true; } | sort -u | comm -23 - "$api"
}
# run_one LOG DIR NAME NP OPTS...: prints the result word; the job's
# output goes to LOG.out and LOG.err.
run_one() {
	local log=$1 d=$2 name=$3 np=$4 args=() envs=() result="" o rc=0 bound=$pertest
	shift 4
	for o in "$@"; do
		case $o in
		arg=*) args+=("${o#arg=}") ;;
		env=*) envs+=("${o#env=}") ;;
		resultTest=*) result=${o#resultTest=} ;;
		# a test of the launcher's own time limit (init/timeout) waits to be killed
		timeLimit=*) [ "${o#timeLimit=}" -ge "$pertest" ] || bound=${o#timeLimit=} ;;
		esac
	done
	[ -x "$build/$d/$name" ] || { echo NOBUILD; return; }
	if [ -n "$(missing "$build/$d/$name")" ]; then echo N/A; return; fi
	(cd "$build/$d" && env "${envs[@]}" timeout -k 10 "$bound" "${launch[@]}" "$np" "./$name" "${args[@]}" \
		>"$log.out" 2>"$log.err" </dev/null) || rc=$?
	[ $rc -ne 124 ] || echo "(timed out after ${bound}s)" >>"$log.err"
	# As MPICH's runtests: these tests pass when the job's status is not 0
	# (an exit status, a fatal error, a time limit passed on to it).
	case $result in
	TestErrFatal | TestStatus) [ $rc -ne 0 ] && echo PASS || echo FAIL ;;
	TestStatusNoErrors) [ $rc -ne 0 ] && grep -qE '^\s*No [Ee]rrors\s*$' "$log.out" && echo PASS || echo FAIL ;;
	*)
		if [ $rc -eq 0 ] && grep -qE '^\s*No [Ee]rrors\s*$' "$log.out" &&
			! grep -vqE '^\s*(No [Ee]rrors|Test Passed)?\s*$' "$log.out"; then
			echo PASS
		else
			echo FAIL
		fi
		;;
	esac
}

# key DIR NAME NP OPTS...: how results.txt and the expected-pass list
# name a run: "dir/name np arg=...".
key() {
	local d=$1 name=$2 np=$3 k
	shift 3
	k="$d/$name $np $(printf '%s\n' "$@" | { grep '^arg=' || true; } | tr '\n' ' ' | sed 's/ $//')"
	echo "${k% }"
}

# record N DIR NAME NP OPTS...: runs test N of the lists and writes its
# result line ("WORD    dir/name np args") to runs/N.res, and on a
# failure the end of its output to runs/N.fail.
record() {
	local n=$1 d=$2 name=$3 np=$4 res key
	shift 4
	res=$(run_one "$out/runs/$n" "$d" "$name" "$np" "$@")
	key=$(key "$d" "$name" "$np" "$@")
	printf '%-7s %s\n' "$res" "$key" >"$out/runs/$n.res"
	if [ "$res" = FAIL ]; then
		{
			echo "== $key"
			tail -n 5 "$out/runs/$n.out" "$out/runs/$n.err" | sed 's/^/    /'
		} >"$out/runs/$n.fail"
	fi
	cat "$out/runs/$n.res"
}

# Up to $jobs tests at a time; results are gathered in the lists' order.
rm -rf "$out/runs"
mkdir -p "$out/runs"
n=0
for d in "${dirlist[@]}"; do
	while read -r name np opts; do
		# shellcheck disable=SC2086 # opts are the list's words
		if ((only)) && ! grep -qxF "$(key "$d" "$name" "$np" $opts)" "$expected"; then
			continue
		fi
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
		n=$((n + 1))
		# shellcheck disable=SC2086 # opts are the list's words
		record "$n" "$d" "$name" "$np" $opts &
	done < <(tests "$d")
done
wait
: >"$out/results.txt"
: >"$out/failures.txt"
for ((i = 1; i <= n; i++)); do
	cat "$out/runs/$i.res" >>"$out/results.txt"
	[ ! -f "$out/runs/$i.fail" ] || cat "$out/runs/$i.fail" >>"$out/failures.txt"
done

echo
echo "MPICH test suite against $mpi ($( ((all)) && echo "all rank counts" || echo "<= $maxnp ranks")$( ((only)) && echo ", only the runs $(basename "$expected") lists")):"
awk '{ split($2, p, "/"); n[p[1]]++; c[p[1], $1]++; t[$1]++ }
	END {
		printf "  %-9s %5s %5s %5s %5s %7s\n", "folder", "tests", "pass", "fail", "n/a", "nobuild"
		for (d in n) printf "  %-9s %5d %5d %5d %5d %7d\n", d, n[d], c[d, "PASS"], c[d, "FAIL"], c[d, "N/A"], c[d, "NOBUILD"]
		app = t["PASS"] + t["FAIL"]
		printf "  all: %d tests, %d applicable, %d pass (%.1f%% of applicable), %d n/a, %d nobuild\n",
			NR, app, t["PASS"], app ? 100 * t["PASS"] / app : 0, t["N/A"], t["NOBUILD"]
	}' "$out/results.txt"
echo "results in $out/results.txt"

if [ -n "$expected" ]; then
	bad=$(grep -vE '^\s*(#|$)' "$expected" | while IFS= read -r want; do
		grep -qxF "PASS    $want" "$out/results.txt" || echo "  $want: $(grep -F " $want" "$out/results.txt" | awk '{print $1}' | head -n 1)"
	done)
	if [ -n "$bad" ]; then
		say "tests of $(basename "$expected") that did not pass:"
		echo "$bad" >&2
		exit 1
	fi
	say "every test of $(basename "$expected") passed"
fi
