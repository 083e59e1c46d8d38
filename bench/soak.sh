#!/bin/bash
# Soak: thousands of mixed memsnap calls against two busy targets that
# check themselves (tests/fixtures/soak_target.c), one on glibc malloc
# and one on Debian's jemalloc with profiling compiled in but idle
# (MALLOC_CONF=prof:true,prof_active:false).  Each call is one memsnap
# run under a timeout, chosen at random: info, info --no-attach, --json
# info, dump, prof on/off/reset, call soak_probe/getpid, stats, trim; half
# of them borrow a thread named with --thread (a malloc thread, a vector
# thread, one blocked in poll, ...), the others let memsnap choose.
# After every call the target is pinged: it wakes each blocked thread,
# waits for every thread to make progress, and reports any invariant
# that broke.
#
#   bench/soak.sh [--calls N] [--seconds S] [--seed N] [--hammers N]
#                 [--strict] [--harm] [--verbose]
#
#   --calls N     stop after N calls (default 1000)
#   --seconds S   ... or after S seconds, whichever comes first
#   --seed N      the command sequence (default: random, printed)
#   --hammers N   malloc threads per target (default 2)
#   --strict      also borrow the thread in sigwaitinfo(), which fails
#                 with EINTR after any ptrace stop (see the report)
#   --harm        self-test: half-way, stop and continue the glibc target
#                 with SIGSTOP/SIGCONT (its epoll_wait and sigwaitinfo
#                 fail with EINTR); the soak must then report corruptions
#
# MEMSNAP_BIN (default ./memsnap) and MEMSNAP_FIXTURES (default
# build/fixtures, from `make tests`) say what to run.  Root, or the
# right to ptrace the targets.
#
# Reports calls, failures, target crashes, hangs, state corruptions the
# targets detected, calls refused as unsafe (exit 6: allowed, counted),
# and the distribution of how long the borrowed thread was stopped
# (memsnap --timings).  Exits 1 if any of failures, crashes, hangs or
# corruptions is not 0, 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

calls=1000
seconds=0
seed=$((RANDOM * 32768 + RANDOM))
hammers=2
strict=0
harm=0
verbose=0
usage() {
	sed -n '/^#   bench/,/^#   --harm/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--calls) calls=${2:?}; shift ;;
	--seconds) seconds=${2:?}; shift ;;
	--seed) seed=${2:?}; shift ;;
	--hammers) hammers=${2:?}; shift ;;
	--strict) strict=1 ;;
	--harm) harm=1 ;;
	--verbose) verbose=1 ;;
	*) usage ;;
	esac
	shift
done
for n in "$calls" "$seconds" "$seed" "$hammers"; do
	[[ $n =~ ^[0-9]+$ ]] || usage
done

memsnap=${MEMSNAP_BIN:-./memsnap}
fixtures=${MEMSNAP_FIXTURES:-build/fixtures}
for f in "$memsnap" "$fixtures/soak-target" "$fixtures/soak-target-je"; do
	[ -x "$f" ] || { echo "bench/soak.sh: $f: not built (make tests)" >&2; exit 1; }
done
CALL_TIMEOUT=5	# memsnap --timeout: a call still running then is a hang
HARD_TIMEOUT=30	# the whole memsnap run, killed after this
PING_TIMEOUT=90	# the target answers a ping within this (it waits 60 s)

work=$(mktemp -d /tmp/memsnap-soak.XXXXXX)
# A target that died must not kill us with SIGPIPE on the next ping.
trap '' PIPE

# ---- targets ----------------------------------------------------------------
# Target i: T_BIN, T_ENV, T_LABEL; per run: T_PID, T_R/T_W (the ends of
# its fixture protocol pipes), T_TIDS ("name=tid ..."), T_VIOL (the
# violation count it last reported).
T_BIN=("$fixtures/soak-target" "$fixtures/soak-target-je")
T_ENV=("" "MALLOC_CONF=prof:true,prof_active:false")
T_LABEL=("glibc" "jemalloc")
T_PID=(0 0)
T_R=(-1 -1)
T_W=(-1 -1)
T_TIDS=("" "")
T_VIOL=(0 0)
T_GEN=(0 0)
T_LAST=(0 0)		# the pid of the latest instance, for the report
PROF=(off off)		# what prof.active should be (jemalloc), or unknown
PROBE_OK=(0 0)		# soak_probe calls that returned, this instance
PROBE_MAYBE=(0 0)	# ... that may or may not have run

cleanup() {
	local i
	for i in 0 1; do
		[ "${T_PID[i]}" -gt 0 ] && kill -KILL "${T_PID[i]}" 2>/dev/null
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_target I: start it and wait for its ready line.
start_target() {
	local i=$1 g line fd rfd wfd
	g=$((T_GEN[i] + 1))
	T_GEN[i]=$g
	mkfifo "$work/rdy$i.$g" "$work/ctl$i.$g"
	(
		# The other target's pipe ends are not for this one.
		for fd in "${T_R[@]}" "${T_W[@]}"; do
			[ "$fd" -ge 0 ] && eval "exec $fd>&-"
		done
		# shellcheck disable=SC2086 # T_ENV is "" or one word
		exec env ${T_ENV[i]} MEMSNAP_READY_FD=3 MEMSNAP_CONTROL_FD=4 \
			"${T_BIN[i]}" --hammers "$hammers" \
			3>"$work/rdy$i.$g" 4<"$work/ctl$i.$g" 2>>"$work/target$i.err"
	) &
	T_PID[i]=$!
	exec {rfd}<"$work/rdy$i.$g" {wfd}>"$work/ctl$i.$g"
	rm -f "$work/rdy$i.$g" "$work/ctl$i.$g"
	T_R[i]=$rfd
	T_W[i]=$wfd
	if ! read -r -t 30 line <&"$rfd" || [[ $line != "R main="* ]]; then
		echo "bench/soak.sh: ${T_BIN[i]} did not start" >&2
		cat "$work/target$i.err" >&2
		exit 1
	fi
	T_TIDS[i]=${line#R }
	T_LAST[i]=${T_PID[i]}
	T_VIOL[i]=0
	PROF[i]=off
	PROBE_OK[i]=0
	PROBE_MAYBE[i]=0
}

# close_target I: EOF on its control pipe makes it exit; 0 if it did,
# with status 0, within 10 s.
close_target() {
	local i=$1 st=0 n r=${T_R[$1]} w=${T_W[$1]}
	exec {w}>&- {r}<&-
	T_R[i]=-1
	T_W[i]=-1
	for n in $(seq 100); do
		kill -0 "${T_PID[i]}" 2>/dev/null || break
		[ "$(state "${T_PID[i]}")" = Z ] && break
		sleep 0.1
	done
	kill -KILL "${T_PID[i]}" 2>/dev/null && [ "$n" = 100 ] && st=1
	wait "${T_PID[i]}" 2>/dev/null || st=$?
	T_PID[i]=0
	return "$st"
}

# state PID: its state letter, "" if gone.
state() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	echo "${s%% *}"
}

# ask I CMD: one protocol command; the reply in $reply.  1: no reply.
ask() {
	reply=
	local fd=${T_W[$1]}
	{ printf '%s' "$2" >&"$fd"; } 2>/dev/null || return 1
	read -r -t "$PING_TIMEOUT" reply <&"${T_R[$1]}" || return 1
}

# ---- figures ----------------------------------------------------------------
n_calls=0 n_fail=0 n_crash=0 n_hang=0 n_corrupt=0 n_refused=0 n_thread=0
declare -A by_ok=() by_refused=() by_other=()
problems=()
notes=()
unknown=()
restarts=0
: > "$work/stops"
: > "$work/stops.chosen"
: > "$work/stops.thread"

# errtext FILE: its first 300 bytes on one line.
errtext() {
	head -c 300 "$1" | tr '\n' ' '
}

problem() {
	problems+=("$*")
	[ "$verbose" = 1 ] && echo "soak: $*" >&2
	return 0
}

# ---- the commands -----------------------------------------------------------
# Per target, a pool to draw from (repeats weigh).  stats and trim join
# once probe_optional finds this memsnap knows them.
# shellcheck disable=SC2034 # used through namerefs
CMDS0=("info" "info" "info --no-attach" "--json info"
	"call soak_probe" "call soak_probe" "call soak_probe" "call getpid")
# shellcheck disable=SC2034
CMDS1=("info" "info" "info --no-attach" "--json info" "dump" "dump" "dump"
	"prof on" "prof off" "prof reset" "call soak_probe" "call soak_probe"
	"call getpid")

# probe_optional I CMD: add CMD to target I's pool unless this memsnap
# does not know it (exit 2) or cannot do it for that allocator (exit 5).
probe_optional() {
	local i=$1 cmd=$2 rc=0
	[[ " ${unknown[*]} " == *" $cmd "* ]] && return
	timeout -k 5 "$HARD_TIMEOUT" "$memsnap" --timeout "$CALL_TIMEOUT" \
		--pid "${T_PID[i]}" "$cmd" >"$work/out" 2>"$work/err" || rc=$?
	case $rc in
	2) notes+=("$cmd: not known to this memsnap ($(errtext "$work/err")), skipped")
		unknown+=("$cmd")
		return ;;
	5) notes+=("$cmd: not supported on ${T_LABEL[i]} ($(errtext "$work/err")), skipped")
		return ;;
	esac
	local -n cmds=CMDS$i
	cmds+=("$cmd" "$cmd")
}

# pick_thread I: a thread of target I to name with --thread, or "".
pick_thread() {
	local i=$1 kv cands=()
	for kv in ${T_TIDS[i]}; do
		[ "${kv#*=}" = 0 ] && continue
		[ "$strict" = 0 ] && [ "${kv%%=*}" = sigwait ] && continue
		cands+=("${kv#*=}")
	done
	echo "${cands[RANDOM % ${#cands[@]}]}"
}

# thread_name I TID: what TID does in target I (its name in the ready line).
thread_name() {
	local kv
	for kv in ${T_TIDS[$1]}; do
		[ "${kv#*=}" = "$2" ] && { echo "${kv%%=*}"; return; }
	done
}

# check_output I CMD ARGS...: 0 if a successful run printed what it must.
check_output() {
	local i=$1 cmd=$2 out want was
	out=$(<"$work/out")
	case $cmd in
	"call soak_probe")
		want=$(($3 * 1000003 + $4))
		[[ $out == "$want "* ]] || { why="call soak_probe $3 $4 printed '$out', not $want"; return 1; } ;;
	"call getpid")
		[[ $out == "${T_PID[i]} "* ]] || { why="call getpid printed '$out'"; return 1; } ;;
	dump)
		[ "$out" = "$work/d.heap" ] || { why="dump printed '$out'"; return 1; }
		{ read -r was < "$work/d.heap"; } 2>/dev/null || was=
		rm -f "$work/d.heap"
		[[ $was == heap_v2/* ]] || { why="the dump starts with '$was'"; return 1; } ;;
	"prof on" | "prof off")
		# "pid N: heap profiling on (was off)": the state we left it in
		[[ $out =~ \(was\ (on|off)\) ]] || { why="prof printed '$out'"; return 1; }
		was=${BASH_REMATCH[1]}
		if [ "${PROF[i]}" != unknown ] && [ "$was" != "${PROF[i]}" ]; then
			why="prof.active was $was, but the last prof command left it ${PROF[i]}"
			PROF[i]=${cmd#prof }
			return 1
		fi
		PROF[i]=${cmd#prof } ;;
	info)
		[[ $out =~ ^pid\ +([0-9]+) && ${BASH_REMATCH[1]} = "${T_PID[i]}" ]] || { why="info does not name pid ${T_PID[i]}"; return 1; }
		if [ "$i" = 1 ] && [ "${PROF[i]}" != unknown ] &&
		   [[ $out =~ prof\.active\ +(true|false) ]]; then
			want=$([ "${PROF[i]}" = on ] && echo true || echo false)
			[ "${BASH_REMATCH[1]}" = "$want" ] ||
				{ why="info shows prof.active ${BASH_REMATCH[1]}, expected $want"; return 1; }
		fi ;;
	"info --no-attach")
		[[ $out =~ ^pid\ +([0-9]+) && ${BASH_REMATCH[1]} = "${T_PID[i]}" ]] || { why="info --no-attach does not name pid ${T_PID[i]}"; return 1; } ;;
	"--json info")
		[[ $out == "{"* && $out =~ \"pid\":\ ${T_PID[i]}, ]] || { why="--json info is not the document for pid ${T_PID[i]}"; return 1; } ;;
	*)
		[ -n "$out" ] || { why="$cmd printed nothing"; return 1; } ;;
	esac
	return 0
}

# one_call I: draw a command for target I, run it, classify the result,
# then ping the target.
one_call() {
	local i=$1 cmd tid="" tname="" rc=0 args=() label hung=0 which=chosen
	local how
	local -n pool=CMDS$i
	cmd=${pool[RANDOM % ${#pool[@]}]}
	label=$cmd
	# shellcheck disable=SC2206 # the command is words by design
	args=($cmd)
	case $cmd in
	"call soak_probe") args+=($((RANDOM % 1000)) $((RANDOM % 1000))) ;;
	dump) args+=(-o "$work/d.heap") ;;
	"prof reset") args+=(--lg-sample $((16 + RANDOM % 4))) ;;
	esac
	if [ "$cmd" != "info --no-attach" ] && [ $((RANDOM % 2)) = 0 ]; then
		tid=$(pick_thread "$i")
		tname=$(thread_name "$i" "$tid")
		which=thread
		n_thread=$((n_thread + 1))
	fi
	how="memsnap ${tid:+--thread $tid [$tname] }${args[*]}"
	n_calls=$((n_calls + 1))
	timeout -k 5 "$HARD_TIMEOUT" "$memsnap" --timings \
		--timeout "$CALL_TIMEOUT" --pid "${T_PID[i]}" \
		${tid:+--thread "$tid"} "${args[@]}" \
		>"$work/out" 2>"$work/err" || rc=$?
	[ "$verbose" = 1 ] && echo "soak: #$n_calls ${T_LABEL[i]} ${tid:+--thread $tid }${args[*]}: exit $rc" >&2
	# info only warns when its runtime call times out: a hang all the same
	if [ "$rc" = 0 ] && [[ $(<"$work/err") == *"did not finish in time"* ]]; then
		rc=7
	fi
	if [[ $(<"$work/err") =~ stopped\ ([0-9]+)\ us ]]; then
		echo "${BASH_REMATCH[1]}" >> "$work/stops"
		echo "${BASH_REMATCH[1]}" >> "$work/stops.$which"
	fi
	if [ "$label" = "call soak_probe" ]; then
		case $rc in
		0) PROBE_OK[i]=$((PROBE_OK[i] + 1)) ;;
		6) ;;
		*) PROBE_MAYBE[i]=$((PROBE_MAYBE[i] + 1)) ;;
		esac
	fi
	case $rc in
	0)
		if check_output "$i" "$label" "${args[@]:2}"; then
			by_ok[$label]=$((${by_ok[$label]:-0} + 1))
		else
			n_fail=$((n_fail + 1))
			by_other[$label]=$((${by_other[$label]:-0} + 1))
			problem "failure: ${T_LABEL[i]}: $how: $why"
		fi ;;
	6)
		n_refused=$((n_refused + 1))
		by_refused[$label]=$((${by_refused[$label]:-0} + 1)) ;;
	7 | 124 | 137)
		n_hang=$((n_hang + 1))
		hung=1
		by_other[$label]=$((${by_other[$label]:-0} + 1))
		[[ $label == prof* ]] && PROF[i]=unknown
		problem "hang: ${T_LABEL[i]}: $how: exit $rc: $(errtext "$work/err")" ;;
	*)
		n_fail=$((n_fail + 1))
		by_other[$label]=$((${by_other[$label]:-0} + 1))
		[[ $label == prof* ]] && PROF[i]=unknown
		problem "failure: ${T_LABEL[i]}: $how: exit $rc: $(errtext "$work/err")" ;;
	esac
	check_target "$i" "$how" "$hung"
}

# check_target I WHAT [BROKEN]: ping target I after WHAT and count what
# it reports.  A target that died, stopped answering, reported a new
# violation or was left inside a hung call (BROKEN=1) is replaced by a
# fresh one, so that one problem is counted once, not again on every
# later call.  1: too many problems, give up.
check_target() {
	local i=$1 what=$2 broken=${3:-0} st n
	st=$(state "${T_PID[i]}")
	if [ -n "$st" ] && [ "$st" != Z ] && ask "$i" p; then
		if [[ $reply =~ ^bad\ ([0-9]+)\ violations ]]; then
			n=${BASH_REMATCH[1]}
			n_corrupt=$((n_corrupt + n - T_VIOL[i]))
			T_VIOL[i]=$n
			problem "corruption: ${T_LABEL[i]} after $what: $reply"
			broken=1
		elif [ "$reply" != ok ]; then
			n_fail=$((n_fail + 1))
			problem "failure: ${T_LABEL[i]} answered '$reply' after $what"
			broken=1
		fi
	elif [ -n "$st" ] && [ "$st" != Z ]; then
		n_hang=$((n_hang + 1))
		problem "hang: ${T_LABEL[i]} (pid ${T_PID[i]}, state $st) did not answer a ping after $what"
		broken=1
	else
		wait "${T_PID[i]}" 2>/dev/null && st=0 || st=$?
		T_PID[i]=0
		n_crash=$((n_crash + 1))
		problem "crash: ${T_LABEL[i]} exited with status $st after $what; its stderr: $(tail -c 300 "$work/target$i.err" | tr '\n' ' ')"
		broken=1
	fi
	[ "$broken" = 1 ] || return 0
	restarts=$((restarts + 1))
	if [ "$restarts" -gt 100 ]; then
		problem "giving up after 100 restarts of the targets"
		return 1
	fi
	stop_target "$i"
	start_target "$i"
}

# stop_target I: kill it (it may be beyond asking) and close its pipes.
stop_target() {
	local i=$1 r=${T_R[$1]} w=${T_W[$1]}
	if [ "${T_PID[i]}" -gt 0 ]; then
		kill -KILL "${T_PID[i]}" 2>/dev/null || true
		wait "${T_PID[i]}" 2>/dev/null || true
	fi
	exec {w}>&- {r}<&-
	T_R[i]=-1
	T_W[i]=-1
	T_PID[i]=0
}

# probe_count I: soak_probe must have run once per call that returned,
# plus at most once per call that ended otherwise.
probe_count() {
	local i=$1 n
	ask "$i" s || return 0
	[[ $reply =~ probe=([0-9]+) ]] || return 0
	n=${BASH_REMATCH[1]}
	if [ "$n" -lt "${PROBE_OK[i]}" ] ||
	   [ "$n" -gt $((PROBE_OK[i] + PROBE_MAYBE[i])) ]; then
		n_corrupt=$((n_corrupt + 1))
		problem "corruption: ${T_LABEL[i]}: soak_probe ran $n times for ${PROBE_OK[i]} calls that returned (+${PROBE_MAYBE[i]} uncertain)"
	fi
	T_STATS[i]=${reply#stats }
}

# harm I: stop every thread of target I, then continue it.
harm() {
	local i=$1 pid=${T_PID[$1]} t all n
	kill -STOP "$pid"
	for n in $(seq 500); do
		all=1
		for t in /proc/"$pid"/task/*; do
			[ "$(state "$pid/task/${t##*/}")" = T ] || all=0
		done
		[ "$all" = 1 ] && break
		sleep 0.01
	done
	kill -CONT "$pid"
	notes+=("--harm: stopped and continued ${T_LABEL[i]} after call $n_calls")
}

# ---- the run ----------------------------------------------------------------
RANDOM=$seed
declare -a T_STATS=("" "")
start_target 0
start_target 1
for i in 0 1; do
	probe_optional "$i" stats
	probe_optional "$i" trim
done

start=$SECONDS
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
while [ "$n_calls" -lt "$calls" ]; do
	[ "$seconds" -gt 0 ] && [ $((SECONDS - start)) -ge "$seconds" ] && break
	one_call $((n_calls % 2)) || break
	if [ "$harm" = 1 ] && [ "$n_calls" = $((calls / 2)) ]; then
		harm 0
	fi
	if [ $((n_calls % 500)) = 0 ]; then
		echo "soak: $n_calls calls, $((SECONDS - start)) s: failures $n_fail, crashes $n_crash, hangs $n_hang, corruptions $n_corrupt, refused $n_refused" >&2
	fi
done
elapsed=$((SECONDS - start))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
for i in 0 1; do
	if [ "${T_PID[i]}" -gt 0 ]; then
		check_target "$i" "the last call" || true
		probe_count "$i"
		close_target "$i" || {
			n_crash=$((n_crash + 1))
			problem "crash: ${T_LABEL[i]} did not exit cleanly at the end"
		}
	fi
done

# ---- the report ---------------------------------------------------------------
pct() {	# sorted file, percent: the value at that rank
	awk -v p="$2" '{ v[NR] = $1 } END {
		if (!NR) { print "-"; exit }
		r = int(NR * p / 100 + 0.999); if (r < 1) r = 1; if (r > NR) r = NR
		print v[r] }' "$1"
}
# stops LABEL FILE: one line of the distribution.
stops() {
	sort -n "$2" > "$work/sorted"
	printf '%-22s p50 %s  p99 %s  max %s  (%d calls)\n' "$1" \
		"$(pct "$work/sorted" 50)" "$(pct "$work/sorted" 99)" \
		"$(pct "$work/sorted" 100)" "$(wc -l < "$work/sorted")"
}

echo "soak: $memsnap ($("$memsnap" --version 2>/dev/null | head -n 1)), seed $seed"
echo "command: bench/soak.sh --calls $calls --seconds $seconds --seed $seed --hammers $hammers$([ "$strict" = 1 ] && echo " --strict")$([ "$harm" = 1 ] && echo " --harm")"
echo "targets: soak-target (glibc malloc) and soak-target-je (jemalloc, ${T_ENV[1]}), $hammers malloc threads each"
for i in 0 1; do
	[ -n "${T_STATS[i]}" ] && echo "  ${T_LABEL[i]} target ($([ "${T_GEN[i]}" -gt 1 ] && echo "its last instance, ")pid ${T_LAST[i]}) did: ${T_STATS[i]}"
done
echo "$n_calls calls in $elapsed s, $n_thread of them with --thread; $(nproc) CPUs, load average $load_start at the start, $load_end at the end"
printf '  %-18s %6s %9s %7s\n' command ok refused other
printf '%s\n' "${!by_ok[@]}" "${!by_refused[@]}" "${!by_other[@]}" | sort -u |
while read -r label; do
	printf '  %-18s %6d %9d %7d\n' "$label" "${by_ok[$label]:-0}" \
		"${by_refused[$label]:-0}" "${by_other[$label]:-0}"
done
printf '%-22s %s\n' calls "$n_calls" failures "$n_fail" \
	"target crashes" "$n_crash" hangs "$n_hang" \
	"state corruptions" "$n_corrupt" \
	"target restarts" "$restarts (a fresh target after each problem)" \
	"refused as unsafe" "$n_refused (exit 6, allowed)"
stops "stop time (us)" "$work/stops"
stops "  memsnap's choice" "$work/stops.chosen"
stops "  with --thread" "$work/stops.thread"
[ "$strict" = 1 ] || notes+=("the thread in sigwaitinfo() was never named with --thread (--strict does)")
for n in "${notes[@]}"; do
	echo "note: $n"
done
for p in "${problems[@]:0:20}"; do
	echo "$p"
done
[ "${#problems[@]}" -gt 20 ] && echo "... and $((${#problems[@]} - 20)) more"
if [ $((n_fail + n_crash + n_hang + n_corrupt)) -ne 0 ]; then
	echo "soak: FAILED"
	exit 1
fi
echo "soak: passed"
