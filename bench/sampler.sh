#!/bin/bash
# memsnap's heap sampler (prof on --sampler) against the same workload in
# one run:
#
#   overhead   bench/malloc_bench.c (threads doing nothing but malloc and
#              free: the worst case; sizes 16..512 B, then 16 B..4 KiB,
#              some 80 GB allocated a second, which decides how often a
#              sampler samples) and redis-benchmark against Debian's
#              redis-server (jemalloc, no prof:true), each with sampling
#              off and on at the default rate, in alternating rounds;
#              beside them the floor of any hook (bench/jump_shim.c,
#              preloaded: malloc and free that only jump on); also with
#              a bpftrace uprobe on malloc and with heaptrack
#              -p, where they run here; then the allocators' own
#              profilers at the same mean on the same loop (jemalloc
#              prof:true, lg_prof_sample:19; full tcmalloc's
#              TCMALLOC_SAMPLE_PARAMETER=524288) against the sampler on
#              that allocator, where Debian's libraries are installed
#   soak       prof on/off ROUNDS times on a redis-server under load
#              (redis-benchmark, and bench/redis_verify.c checking every
#              value it reads back), memsnap killed with SIGKILL at a
#              random moment in every KILL_EVERY-th round; then counts
#              target crashes, lost connections, wrong values
#
#   memory     the memory each adds to its target: malloc_bench for
#              MEM_SECS (default 10) seconds and a redis-server under 7 M
#              redis-benchmark requests, their RSS with memsnap's sampler
#              on and after prof off, with heaptrack -p, and with
#              jemalloc's own profiler at the same mean, against an
#              untraced twin of each in the same run
#
#   bench/sampler.sh [overhead|anchors|memory|accuracy|soak|soak-linked|all] [ROUNDS]
#
# (anchors: only the allocators' own samplers against memsnap's)
#
# Environment: MEMSNAP (default ./memsnap), OLD (another memsnap: its
# sampler in the same overhead rounds, for a before and after), SECS per
# overhead window
# (default 3), THREADS for malloc_bench (default 2), KILL_EVERY (default
# 4).  Root; needs cc, redis-server, redis-benchmark; bpftrace and
# heaptrack are used when installed.  Exits 1 when the soak saw a crash,
# a lost connection or a wrong value.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
what=${1:-all}
rounds=${2:-1000}
secs=${SECS:-3}
threads=${THREADS:-2}
kill_every=${KILL_EVERY:-4}
MEMSNAP=${MEMSNAP:-./memsnap}
[ "$MEMSNAP" != ./memsnap ] || make -s memsnap >/dev/null
for tool in cc redis-server redis-benchmark redis-cli; do
	command -v "$tool" >/dev/null || { echo "bench/sampler.sh: needs $tool" >&2; exit 1; }
done
work=$(mktemp -d /tmp/memsnap-bench-sampler.XXXXXX)
cleanup() {
	[ -z "${REDIS_PID:-}" ] || stop_redis
	rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -pthread -o "$work/malloc_bench" bench/malloc_bench.c
cc -O2 -o "$work/redis_verify" bench/redis_verify.c
cc -O2 -shared -fPIC -o "$work/jump_shim.so" bench/jump_shim.c -ldl

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# mb_round MODE [MAXSIZE [ENV...]]: one malloc_bench window, with ENV
# (LD_PRELOAD=..., MALLOC_CONF=...) in its environment; prints its
# malloc/free pairs per CPU second.
# MODE: off, sampler, old ($OLD's sampler), fast (a mean of 1 GiB),
# uprobe, heaptrack.
mb_round() {
	local mode=$1 max=${2:-4096} pid line res tracer=
	shift 2 || shift $#
	coproc MB { env "$@" "${MB_BIN:-$work/malloc_bench}" "$threads" "$secs" "$max"; }
	read -r line <&"${MB[0]}"
	pid=${line#ready }
	case $mode in
	sampler)
		"$MEMSNAP" --pid "$pid" prof on --sampler >/dev/null ;;
	old)
		"$OLD" --pid "$pid" prof on --sampler >/dev/null ;;
	fast)	# the hooks' fast path alone: nothing is sampled
		"$MEMSNAP" --pid "$pid" prof on --sampler --sample-bytes 1G >/dev/null ;;
	uprobe)
		bpftrace -e "uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc /pid == $pid/ { @n = count(); }" \
			> "$work/bpftrace.out" 2>&1 &
		tracer=$!
		# attached when it says so
		for _ in $(seq 100); do
			grep -q Attaching "$work/bpftrace.out" && break
			sleep 0.1
		done ;;
	heaptrack)
		# its file goes to the working directory, whatever -o says
		(cd "$work" && exec timeout 60 heaptrack -p "$pid" -o "$work/ht") \
			> "$work/ht.out" 2>&1 &
		tracer=$!
		for _ in $(seq 300); do
			grep -q 'heaptrack output will be written' "$work/ht.out" && break
			sleep 0.1
		done ;;
	esac
	echo go >&"${MB[1]}"
	read -r res <&"${MB[0]}"
	wait "$MB_PID" 2>/dev/null || true
	if [ -n "$tracer" ]; then
		kill -INT "$tracer" 2>/dev/null || true
		wait "$tracer" 2>/dev/null || true
	fi
	# "ops N cpu_ns C bad B": pairs per second of the threads' CPU
	# time, which the machine's other load does not change as it does
	# the pairs of a wall-clock window
	set -- $res
	[ "$6" = 0 ] || echo "malloc_bench: $6 blocks changed under $mode" >&2
	awk -v n="$2" -v c="$4" 'BEGIN { printf "%.0f\n", n * 1e9 / c }'
}

# ratio A B: "B/A" to three places.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b / a }'; }

# The allocators' own samplers at memsnap's default mean, on the same
# loop (16..512 B), against the sampler on the same allocator: what
# sampling by bytes costs where the allocator does it itself.
builtin_anchors() {
	local lib=/usr/lib/x86_64-linux-gnu i name pre plain builtin bin
	local off on own floor moff
	for name in jemalloc tcmalloc jemalloc-linked-in; do
		bin=$work/malloc_bench
		case $name in
		jemalloc)
			pre=$lib/libjemalloc.so.2
			plain=MALLOC_CONF=prof:false
			builtin=MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:19 ;;
		tcmalloc)
			pre=$lib/libtcmalloc.so.4
			plain=TCMALLOC_SAMPLE_PARAMETER=0
			builtin=TCMALLOC_SAMPLE_PARAMETER=524288 ;;
		jemalloc-linked-in)
			# libjemalloc.a in the program: entry points patched
			pre=$lib/libjemalloc.a
			plain=MALLOC_CONF=prof:false
			builtin=MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:19
			bin=$work/malloc_bench_je
			[ -e "$pre" ] && [ ! -e "$bin" ] &&
				cc -O2 -pthread -o "$bin" bench/malloc_bench.c \
					-Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lm -lstdc++ ;;
		esac
		if [ ! -e "$pre" ]; then
			echo "$name: not run ($pre is not installed)"
			continue
		fi
		off=() on=() own=() floor=()
		echo "== overhead: malloc_bench on $name, sizes 16..512 B, 3 rounds: its own sampler at 512 KiB against memsnap's"
		[ "$bin" = "$work/malloc_bench" ] || pre=
		for i in 1 2 3; do
			off+=("$(MB_BIN=$bin mb_round off 512 ${pre:+LD_PRELOAD="$pre"} "$plain")")
			own+=("$(MB_BIN=$bin mb_round off 512 ${pre:+LD_PRELOAD="$pre"} "$builtin")")
			on+=("$(MB_BIN=$bin mb_round sampler 512 ${pre:+LD_PRELOAD="$pre"} "$plain")")
			# through the GOT only: a linked-in allocator's calls
			# never reach a preloaded library
			[ -z "$pre" ] ||
				floor+=("$(mb_round off 512 LD_PRELOAD="$work/jump_shim.so:$pre" "$plain")")
		done
		moff=$(printf '%s\n' "${off[@]}" | median)
		echo "$name: off $moff pairs per CPU second, its own sampler $(ratio "$moff" "$(printf '%s\n' "${own[@]}" | median)") of off, memsnap's sampler $(ratio "$moff" "$(printf '%s\n' "${on[@]}" | median)") of off${pre:+, a hook that only jumps on $(ratio "$moff" "$(printf '%s\n' "${floor[@]}" | median)") of off}"
	done
}

overhead() {
	local i max off on up ht moff mon fast old floor
	for max in 512 4096; do
		off=() on=() up=() ht=() fast=() old=() floor=()
		echo "== overhead: malloc_bench, $threads threads, sizes 16..$max B, ${secs}s windows, 5 rounds"
		for i in 1 2 3 4 5; do
			off+=("$(mb_round off "$max")")
			on+=("$(mb_round sampler "$max")")
			fast+=("$(mb_round fast "$max")")
			floor+=("$(mb_round off "$max" LD_PRELOAD="$work/jump_shim.so")")
			[ -z "${OLD:-}" ] || old+=("$(mb_round old "$max")")
		done
		moff=$(printf '%s\n' "${off[@]}" | median)
		mon=$(printf '%s\n' "${on[@]}" | median)
		echo "malloc/free pairs per CPU second (median): off $moff, sampler $mon"
		awk -v a="$moff" -v b="$mon" 'BEGIN { printf "sampler throughput: %.3f of off (%.1f%% loss)\n", b / a, 100 * (1 - b / a) }'
		awk -v a="$moff" -v b="$(printf '%s\n' "${fast[@]}" | median)" \
			'BEGIN { printf "the hooks alone (a mean of 1 GiB: nothing sampled): %.3f of off\n", b / a }'
		awk -v a="$moff" -v b="$(printf '%s\n' "${floor[@]}" | median)" \
			'BEGIN { printf "a hook that only jumps on (bench/jump_shim.c, preloaded): %.3f of off\n", b / a }'
		[ -z "${OLD:-}" ] ||
			awk -v a="$moff" -v b="$(printf '%s\n' "${old[@]}" | median)" -v o="$OLD" \
				'BEGIN { printf "%s sampler: %.3f of off\n", o, b / a }'
		if command -v bpftrace >/dev/null &&
			timeout 20 bpftrace -e 'BEGIN { exit(); }' >/dev/null 2>&1; then
			for i in 1 2 3; do up+=("$(mb_round uprobe "$max")"); done
			awk -v a="$moff" -v b="$(printf '%s\n' "${up[@]}" | median)" \
				'BEGIN { printf "bpftrace uprobe on malloc (a count only): %.3f of off\n", b / a }'
		else
			echo "bpftrace: not run (not installed or no BPF here)"
		fi
		if command -v heaptrack >/dev/null && command -v gdb >/dev/null; then
			ht+=("$(mb_round heaptrack "$max")")
			awk -v a="$moff" -v b="${ht[0]}" 'BEGIN { printf "heaptrack -p: %.3f of off (one round; its threads also wait for the pipe to its interpreter, which CPU time leaves out)\n", b / a }'
		else
			echo "heaptrack: not run (not installed)"
		fi
	done

	builtin_anchors

	echo "== overhead: redis-benchmark on Debian's redis-server (jemalloc, no prof:true)"
	REDIS_MALLOC_CONF=prof:false start_redis
	fill_redis 100000
	local rb_off=() rb_on=()
	# requests per second of redis-server's CPU time (utime + stime):
	# its wall-clock rate here moved by 10% from one run to the next with
	# the machine's other load, either way
	rb() {
		local c0 c1
		c0=$(awk '{ print $14 + $15 }' "/proc/$REDIS_PID/stat")
		redis-benchmark -p "$REDIS_PORT" -t set,get,lpush,lpop,incr \
			-n 200000 -r 100000 -d 64 -P 8 -q >/dev/null 2>&1
		c1=$(awk '{ print $14 + $15 }' "/proc/$REDIS_PID/stat")
		awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" \
			'BEGIN { printf "%.0f\n", 1000000 / (c / hz) }'
	}
	for i in 1 2 3 4 5; do
		rb_off+=("$(rb)")
		"$MEMSNAP" --pid "$REDIS_PID" prof on --sampler >/dev/null
		rb_on+=("$(rb)")
		"$MEMSNAP" --pid "$REDIS_PID" prof off >/dev/null
	done
	local roff ron
	roff=$(printf '%s\n' "${rb_off[@]}" | median)
	ron=$(printf '%s\n' "${rb_on[@]}" | median)
	echo "requests per CPU second of redis-server, set,get,lpush,lpop,incr (median of 5): off $roff, sampler $ron"
	awk -v a="$roff" -v b="$ron" 'BEGIN { printf "sampler throughput: %.3f of off (%.1f%% loss)\n", b / a, 100 * (1 - b / a) }'
	redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { echo "redis died" >&2; exit 1; }
	stop_redis
	REDIS_PID=
}

# rss_kb PID: its VmRSS, KiB.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# Let heaptrack -p attach to PID (its output in $work/ht.out), the
# tracer's pid in $tracer.
heaptrack_on() {
	(cd "$work" && exec timeout 300 heaptrack -p "$1" -o "$work/ht") \
		> "$work/ht.out" 2>&1 &
	tracer=$!
	for _ in $(seq 300); do
		grep -q 'heaptrack output will be written' "$work/ht.out" && break
		sleep 0.1
	done
}

heaptrack_off() {
	kill -INT "$tracer" 2>/dev/null || true
	wait "$tracer" 2>/dev/null || true
	tracer=
}

# mb_mem MODE: malloc_bench (2 threads, 16..512 B) for MEM_SECS seconds
# under MODE; prints its RSS at the end of that (KiB) and, for memsnap's
# sampler, its RSS once prof off has returned.  MODE: off, sampler,
# heaptrack; je-off, je-own (jemalloc's own profiler at the same mean),
# je-sampler (memsnap's on jemalloc).
mb_mem() {
	local mode=$1 line pid on after=- res je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
	local env=MALLOC_CONF=prof:false pre= tracer=
	case $mode in
	je-own) pre=$je env=MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:19 ;;
	je-*) pre=$je ;;
	esac
	coproc MB { env "$env" ${pre:+LD_PRELOAD="$pre"} "$work/malloc_bench" 2 "$((MEM_SECS + 4))" 512; }
	read -r line <&"${MB[0]}"
	pid=${line#ready }
	case $mode in
	sampler|je-sampler) "$MEMSNAP" --pid "$pid" prof on --sampler >/dev/null ;;
	heaptrack) heaptrack_on "$pid" ;;
	esac
	echo go >&"${MB[1]}"
	sleep "$MEM_SECS"
	on=$(rss_kb "$pid")
	case $mode in
	sampler|je-sampler)
		"$MEMSNAP" --pid "$pid" prof off >/dev/null
		after=$(rss_kb "$pid") ;;
	heaptrack) heaptrack_off ;;
	esac
	read -r res <&"${MB[0]}"
	wait "$MB_PID" 2>/dev/null || true
	echo "$on $after"
}

# redis_mem MODE: a redis-server (Debian's, jemalloc) filled with 100 000
# keys, then 7 M requests of redis-benchmark under MODE (off, sampler,
# heaptrack, own: jemalloc's profiler at the same mean); prints its RSS
# then (KiB) and, for the sampler, once prof off has returned.  The
# lists are pushed and popped back: what the run leaves is the same in
# every mode, and jemalloc's dirty pages are purged before each RSS
# (`memory purge`), or they would stand for the timing of the run.
redis_mem() {
	local mode=$1 on after=- tracer=
	REDIS_MALLOC_CONF=prof:false
	[ "$mode" = own ] &&
		REDIS_MALLOC_CONF=prof:true,prof_active:true,lg_prof_sample:19
	start_redis
	fill_redis 100000
	case $mode in
	sampler) "$MEMSNAP" --pid "$REDIS_PID" prof on --sampler >/dev/null ;;
	heaptrack) heaptrack_on "$REDIS_PID" ;;
	esac
	redis-benchmark -p "$REDIS_PORT" -t set,get,incr,lpush,lpop,rpush \
		-n 1000000 -r 100000 -d 64 -P 8 -q >/dev/null 2>&1
	redis-benchmark -p "$REDIS_PORT" -t rpop -n 1000000 -P 8 -q \
		>/dev/null 2>&1
	redis-cli -p "$REDIS_PORT" memory purge >/dev/null
	on=$(rss_kb "$REDIS_PID")
	case $mode in
	sampler)
		echo "redis: the sampler's own count: $("$MEMSNAP" --pid "$REDIS_PID" info --no-attach | sed -n 's/.*; \([0-9]* KiB\) resident.*/\1/p')" >&2
		"$MEMSNAP" --pid "$REDIS_PID" prof off >/dev/null
		redis-cli -p "$REDIS_PORT" memory purge >/dev/null
		after=$(rss_kb "$REDIS_PID") ;;
	heaptrack) heaptrack_off ;;
	esac
	redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { echo "redis died under $mode" >&2; exit 1; }
	stop_redis
	REDIS_PID=
	echo "$on $after"
}

# mib A B: "+(B-A)/1024" MiB, one decimal.
mib() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", (b - a) / 1024 }'; }

memory() {
	local i m r
	local -A on after
	MEM_SECS=${MEM_SECS:-10}
	echo "== memory: malloc_bench (2 threads, 16..512 B) for ${MEM_SECS}s, RSS against its untraced twin, 3 interleaved rounds (medians)"
	for i in 1 2 3; do
		for m in off sampler heaptrack je-off je-own je-sampler; do
			[ "$m" != heaptrack ] || command -v heaptrack >/dev/null || continue
			r=$(mb_mem "$m")
			on[$m]+="${r% *} "
			after[$m]+="${r#* } "
		done
	done
	for m in "${!on[@]}"; do
		on[$m]=$(printf '%s\n' ${on[$m]} | median)
		after[$m]=$(printf '%s\n' ${after[$m]} | median)
	done
	echo "glibc: off ${on[off]} KiB; memsnap's sampler $(mib "${on[off]}" "${on[sampler]}") MiB, after prof off $(mib "${on[off]}" "${after[sampler]}") MiB${on[heaptrack]:+; heaptrack -p $(mib "${on[off]}" "${on[heaptrack]}") MiB}"
	echo "jemalloc: off ${on[je-off]} KiB; its own profiler (lg_prof_sample:19) $(mib "${on[je-off]}" "${on[je-own]}") MiB; memsnap's sampler $(mib "${on[je-off]}" "${on[je-sampler]}") MiB, after prof off $(mib "${on[je-off]}" "${after[je-sampler]}") MiB"
	echo "== memory: redis-server (Debian's, jemalloc, 100 000 keys) under 7 M requests of redis-benchmark, RSS against an untraced twin"
	on=() after=()
	for m in off sampler heaptrack own; do
		[ "$m" != heaptrack ] || command -v heaptrack >/dev/null || continue
		r=$(redis_mem "$m")
		on[$m]=${r% *}
		after[$m]=${r#* }
	done
	echo "redis: off ${on[off]} KiB; memsnap's sampler $(mib "${on[off]}" "${on[sampler]}") MiB, after prof off $(mib "${on[off]}" "${after[sampler]}") MiB${on[heaptrack]:+; heaptrack -p $(mib "${on[off]}" "${on[heaptrack]}") MiB}; jemalloc's own profiler $(mib "${on[off]}" "${on[own]}") MiB"
}

# soak_round PID I: round I of a soak, prof on (odd) or off (even) on
# PID; every KILL_EVERY-th round memsnap is killed at a random moment.
# Counts into the caller's ok, fail and killed.
soak_round() {
	local pid=$1 i=$2 m
	local args=(-q --pid "$pid" prof on --sampler)
	[ $((i % 2)) = 0 ] && args=(-q --pid "$pid" prof off)
	if [ $((i % kill_every)) = 0 ]; then
		"$MEMSNAP" "${args[@]}" >/dev/null 2>&1 &
		m=$!
		sleep "0.0$((RANDOM % 30))"
		kill -KILL "$m" 2>/dev/null && killed=$((killed + 1))
		wait "$m" 2>/dev/null || true
	elif "$MEMSNAP" "${args[@]}" >/dev/null 2>&1; then
		ok=$((ok + 1))
	else
		fail=$((fail + 1))
	fi
}

soak() {
	local i killed=0 ok=0 fail=0 load verify crashes=0
	echo "== soak: prof on/off $rounds times on redis-server under load, SIGKILL every ${kill_every}th"
	REDIS_MALLOC_CONF=prof:false start_redis
	fill_redis 20000
	redis-benchmark -p "$REDIS_PORT" -t set,get,lpush,lpop -n 100000000 \
		-r 100000 -d 64 -c 8 -q > "$work/load.out" 2>&1 &
	load=$!
	"$work/redis_verify" "$REDIS_PORT" 100000 soak > "$work/verify.out" 2>&1 &
	verify=$!
	for i in $(seq "$rounds"); do
		soak_round "$REDIS_PID" "$i"
		if ! kill -0 "$REDIS_PID" 2>/dev/null; then
			crashes=1
			echo "redis-server died in round $i" >&2
			break
		fi
	done
	"$MEMSNAP" -q --pid "$REDIS_PID" prof off >/dev/null 2>&1 || true
	kill -TERM "$verify" 2>/dev/null || true
	kill -TERM "$load" 2>/dev/null || true
	wait "$load" 2>/dev/null || true
	wait "$verify" 2>/dev/null || true
	local pong=no
	redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && pong=yes
	echo "rounds $rounds: completed $ok, failed $fail (exit != 0: unsafe or timed out), killed $killed"
	echo "target crashes $crashes, redis answers PING after: $pong"
	echo "verifier: $(cat "$work/verify.out" 2>/dev/null)"
	stop_redis
	REDIS_PID=
	[ "$crashes" = 0 ] && [ "$pong" = yes ] || return 1
	grep -q 'errors 0 mismatches 0' "$work/verify.out" || return 1
}

# The same on a program with jemalloc linked in (malloc_bench, two
# threads checking every block they wrote): entry points patched and put
# back every round, with every thread stopped for the write, memsnap
# killed at a random moment in every KILL_EVERY-th round.
soak_linked() {
	local i killed=0 ok=0 fail=0 crashes=0 mb=$work/malloc_bench_je line pid res
	echo "== soak-linked: prof on/off $rounds times on malloc_bench with libjemalloc.a linked in, SIGKILL every ${kill_every}th"
	[ -e "$mb" ] || cc -O2 -pthread -o "$mb" bench/malloc_bench.c \
		-Wl,-Bstatic -ljemalloc -Wl,-Bdynamic -lm -lstdc++
	coproc MB { "$mb" "$threads" 100000 512; }
	read -r line <&"${MB[0]}"
	pid=${line#ready }
	echo go >&"${MB[1]}"
	for i in $(seq "$rounds"); do
		soak_round "$pid" "$i"
		if ! kill -0 "$pid" 2>/dev/null; then
			crashes=1
			echo "malloc_bench died in round $i" >&2
			break
		fi
	done
	"$MEMSNAP" -q --pid "$pid" prof off >/dev/null 2>&1 || true
	# its answer ends the run: ops and the blocks found changed
	kill -USR1 "$pid" 2>/dev/null || true
	read -r res <&"${MB[0]}" || res=
	wait "$MB_PID" 2>/dev/null || true
	echo "rounds $rounds: completed $ok, failed $fail, killed $killed"
	echo "target crashes $crashes; malloc_bench: ${res:-no answer}"
	[ "$crashes" = 0 ] || return 1
	case $res in *" bad 0") ;; *) return 1 ;; esac
}

# fx CMD: one command to the accuracy fixture, its reply.
fx() {
	local reply
	printf '%s' "$1" >&"${FX[1]}"
	read -r reply <&"${FX[0]}"
	echo "$reply"
}

accuracy() {
	local mean pid truth d
	FIXTURES=${FIXTURES:-build/fixtures}
	[ -x "$FIXTURES/sampler-target" ] || make -s "$FIXTURES/sampler-target"
	for mean in 512K 64K; do
		echo "== accuracy: sampler-target, --sample-bytes $mean"
		coproc FX { MEMSNAP_READY_FD=1 MEMSNAP_CONTROL_FD=0 \
			"$FIXTURES/sampler-target"; }
		read -r line <&"${FX[0]}"
		pid=$(echo "$line" | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
		"$MEMSNAP" --pid "$pid" prof on --sampler --sample-bytes "$mean" >/dev/null
		truth=$(fx a)
		d=$work/acc-$mean
		"$MEMSNAP" --pid "$pid" dump -o "$d.0.heap" >/dev/null
		"$MEMSNAP" report "$d.0.heap" --format folded -q > "$d.0.folded"
		echo "$truth" | sed 's/^ok bytes=//' | tr ',' '\n' |
			while IFS=: read -r site bytes; do
				[ "$bytes" = 0 ] && continue
				awk -v s="$site" -v t="$bytes" '
					{ n = split($0, f, ";"); sub(/ [0-9.-]+$/, "", f[n])
					  if (f[n] == s) { b += $NF } }
					END { printf "  %-20s truth %10d  report %10.0f  %+6.1f%%\n",
						s, t, b, 100 * (b - t) / t }' "$d.0.folded"
			done
		fx g >/dev/null; fx g >/dev/null; fx g >/dev/null; fx g >/dev/null
		"$MEMSNAP" --pid "$pid" dump -o "$d.1.heap" >/dev/null
		echo "  top growth after 4 x leak_grow (16.8 MB), report --base:"
		"$MEMSNAP" report "$d.1.heap" --base "$d.0.heap" -q | sed -n '4p' |
			sed 's/^/   /'
		"$MEMSNAP" --pid "$pid" prof off >/dev/null
		{ kill "$pid"; wait "$FX_PID"; } 2>/dev/null || true
	done
}

case $what in
overhead) overhead ;;
memory) memory ;;
anchors) builtin_anchors ;;
soak-linked) soak_linked ;;
accuracy) accuracy ;;
soak) soak ;;
all) overhead; accuracy; soak ;;
*) echo "bench/sampler.sh: say overhead, anchors, memory, accuracy, soak, soak-linked or all" >&2; exit 2 ;;
esac
