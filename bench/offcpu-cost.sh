#!/bin/bash
# offcputime's cost on a context-switch heavy program: `perf bench sched pipe` (two processes
# passing a token through two pipes: every round trip is two sleeps and two wakeups) alone, then
# under each tracer, system-wide as libbpf-tools offcputime traces by default:
#   upstream      /usr/sbin/offcputime (libbpf-tools, frame-pointer user stacks)
#   dwunw-fp      build/bpf/offcputime --unwind=fp
#   dwunw-dwarf   build/bpf/offcputime --unwind=dwarf (a stack window copied per switch-out)
#   dwunw-kernel  build/bpf/offcputime --unwind=kernel --no-aggregate (a record per span)
#   dwunw-kernel-agg  build/bpf/offcputime --unwind=kernel (--aggregate: spans summed in BPF maps)
#   dwunw-wall    build/bpf/offcputime --wall (dwarf, plus 99 Hz on-CPU samples)
#   dwunw-waker-fp / dwunw-waker  --waker (each wakeup's stacks too), fp / dwarf
# Each run: the tracer starts, the bench runs (-l LOOPS), the tracer is stopped with SIGINT.
# Printed per tracer: the bench's CPU us per round trip (median of REPS runs), its overhead against no tracer,
# and from dwunw's own summary (last run): the spans it received per second of the bench, the
# spans it lost (counted: the ring buffer was full) and its own CPU time. libbpf-tools offcputime
# sums in the kernel and loses nothing but stacks. Usage: bench/offcpu-cost.sh [LOOPS [REPS]];
# TRACERS="none dwunw-kernel ..." runs only those rows.
set -u
cd "$(dirname "$0")/.."
LOOPS=${1:-100000}
REPS=${2:-3}
OC=build/bpf/offcputime
TMP=$(mktemp -d /tmp/dwunw-offcpu-cost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# one run: the CPU time (user + sys, both processes) per round trip in us: on a loaded machine the
# wall time per round trip is mostly waiting for a CPU; the tracer's programs run on the bench's
# own CPU time (sched_switch, sched_waking of its processes)
bench() {
	local TIMEFORMAT='%U %S'
	{ time perf bench sched pipe -l "$LOOPS" >/dev/null 2>&1; } 2>"$TMP/cpu"
	awk -v n="$LOOPS" '{ printf "%.3f\n", ($1 + $2) * 1e6 / n }' "$TMP/cpu"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# run_under NAME CMD...: the tracer in the background, the bench REPS times, one row
run_under() {
	local name=$1; shift
	case " ${TRACERS:-$name} " in *" $name "*) ;; *) return ;; esac
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
		# the last run's own summary: spans received per second of the bench, and what was lost
		local tt=$(awk '{ print $2 - $1 }' "$TMP/times.$((REPS - 1))")
		extra=$(awk -v t="$tt" '/switch-outs,/ {
			sw = $2; sl = 0; so = 0
			if (match($0, /spans lost: [0-9]+/)) sl = substr($0, RSTART + 12, RLENGTH - 12)
			if (match($0, /lost at the switch-out \(buffer full\): [0-9]+/)) so = substr($0, RSTART + 38, RLENGTH - 38)
			printf "%d/s | %.0f%% (%d spans; %d stacks at the switch-out)", sw / t, 100 * sl / (sw + sl), sl, so }' "$TMP/err.$((REPS - 1))")
		local self=$(grep -o 'self: CPU [0-9.]* s' "$TMP/err.$((REPS - 1))" | awk '{ print $3 }')
		extra="$extra | $self s"
	fi
	printf '%s\t%s\t%s\n' "$name" "$med" "$extra"
}

{
	run_under none
	[ -x /usr/sbin/offcputime ] && run_under upstream /usr/sbin/offcputime
	run_under dwunw-fp "$OC" --unwind=fp
	run_under dwunw-dwarf "$OC" --unwind=dwarf
	run_under dwunw-kernel "$OC" --unwind=kernel --no-aggregate
	run_under dwunw-kernel-agg "$OC" --unwind=kernel
	run_under dwunw-wall "$OC" --wall
	run_under dwunw-waker-fp "$OC" --waker --unwind=fp
	run_under dwunw-waker "$OC" --waker --unwind=dwarf
} >"$TMP/rows"
base=$(awk -F'\t' '$1 == "none" { print $2 }' "$TMP/rows")
echo "perf bench sched pipe -l $LOOPS, median of $REPS; $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| tracer | bench CPU us/round trip | overhead | spans received (per s of the bench) | spans lost | tracer's own CPU |"
echo "|---|---|---|---|---|---|"
awk -F'\t' -v b="$base" '{
	split($3, x, " \\| ")
	printf "| %s | %.2f | %s | %s | %s | %s |\n", $1, $2, ($1 == "none" ? "-" : sprintf("%+.0f%%", 100 * ($2 - b) / b)),
		(x[1] == "" ? "-" : x[1]), (x[2] == "" ? "-" : x[2]), (x[3] == "" ? "-" : x[3])
}' "$TMP/rows"
