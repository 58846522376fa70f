#!/bin/bash
# offcputime's cost on a context-switch heavy program: `perf bench sched pipe` (two processes
# passing a token through two pipes: every round trip is two sleeps and two wakeups) alone, then
# under each tracer, system-wide as libbpf-tools offcputime traces by default:
#   upstream      /usr/sbin/offcputime (libbpf-tools, frame-pointer user stacks)
#   dwunw-fp      build/bpf/offcputime --unwind=fp
#   dwunw-dwarf   build/bpf/offcputime --unwind=dwarf (a stack window copied per switch-out)
#   dwunw-kernel  build/bpf/offcputime --unwind=kernel
#   dwunw-wall    build/bpf/offcputime --wall (dwarf, plus 99 Hz on-CPU samples)
# Each run: the tracer starts, the bench runs (-l LOOPS), the tracer is stopped with SIGINT.
# Printed per tracer: the bench's usecs/op (median of REPS runs), its overhead against no tracer,
# and from dwunw's own summary the switch-outs it counted per second and what it lost (counted:
# spans lost, switch-out records lost, unmatched). Usage: bench/offcpu-cost.sh [LOOPS [REPS]]
set -u
cd "$(dirname "$0")/.."
LOOPS=${1:-100000}
REPS=${2:-3}
OC=build/bpf/offcputime
TMP=$(mktemp -d /tmp/dwunw-offcpu-cost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

bench() { perf bench sched pipe -l "$LOOPS" 2>/dev/null | awk '/usecs\/op/ { print $1 }'; }

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# run_under NAME CMD...: the tracer in the background, the bench REPS times, one row
run_under() {
	local name=$1; shift
	local i us=() pid
	for ((i = 0; i < REPS; i++)); do
		if [ "$name" = none ]; then
			us+=("$(bench)")
			continue
		fi
		"$@" >"$TMP/out" 2>"$TMP/err" &
		pid=$!
		# ready when it prints its header ("Tracing ...") on stdout or stderr
		for _ in $(seq 200); do grep -qs Tracing "$TMP/out" "$TMP/err" && break; sleep 0.05; done
		local t0=$(date +%s.%N)
		us+=("$(bench)")
		local t1=$(date +%s.%N)
		kill -INT "$pid"; wait "$pid"
		echo "$t0 $t1" >"$TMP/times.$i"
		cp "$TMP/err" "$TMP/err.$i"
	done
	local med=$(printf '%s\n' "${us[@]}" | median)
	local extra=""
	if [ "$name" != none ] && [ "$name" != upstream ]; then
		# the last run's own summary: switch-outs in its duration, and its losses
		extra=$(awk '/switch-outs,/ {
			sw = $2; for (i = 1; i <= NF; i++) if ($i == "in") { d = $(i + 1) + 0 }
			lost = "none"; if (match($0, /spans lost: [0-9]+/)) lost = substr($0, RSTART, RLENGTH)
			if (match($0, /lost at the switch-out \(buffer full\): [0-9]+/)) lost = lost ", " substr($0, RSTART, RLENGTH)
			if (match($0, /not matched: [0-9]+/)) lost = lost ", unmatched " substr($0, RSTART + 13, RLENGTH - 13)
			printf "%d switch-outs/s | %s", (d > 0 ? sw / d : 0), lost }' "$TMP/err.$((REPS - 1))")
		local self=$(grep -o 'self: CPU [0-9.]* s' "$TMP/err.$((REPS - 1))")
		extra="$extra | $self"
	fi
	printf '%s\t%s\t%s\n' "$name" "$med" "$extra"
}

{
	run_under none
	[ -x /usr/sbin/offcputime ] && run_under upstream /usr/sbin/offcputime
	run_under dwunw-fp "$OC" --unwind=fp
	run_under dwunw-dwarf "$OC" --unwind=dwarf
	run_under dwunw-kernel "$OC" --unwind=kernel
	run_under dwunw-wall "$OC" --wall
} >"$TMP/rows"
base=$(awk -F'\t' '$1 == "none" { print $2 }' "$TMP/rows")
echo "perf bench sched pipe -l $LOOPS, median of $REPS; $(nproc) CPUs, $(uname -r)"
echo "| tracer | usecs/op | overhead | tracer's count | self |"
echo "|---|---|---|---|---|"
awk -F'\t' -v b="$base" '{
	split($3, x, " \\| ")
	printf "| %s | %.2f | %s | %s | %s |\n", $1, $2, ($1 == "none" ? "-" : sprintf("%+.0f%%", 100 * ($2 - b) / b)),
		(x[1] == "" ? "-" : x[1] " (lost: " x[2] ")"), (x[3] == "" ? "-" : x[3])
}' "$TMP/rows"
