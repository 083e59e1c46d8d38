#!/bin/bash
# The sampler at scale (README "Numbers"), medians of ROUNDS:
#
#   threads  prof on --sampler and prof off on tests/fixtures/
#            jemalloc_target.c with 10, 100 and 1000 idle threads (its
#            jemalloc without profiling): the borrowed thread's stopped
#            time and ptrace stops (--timings) and memsnap's wall time
#   live     dump with 1000, 100 000 and 1 000 000 live samples
#            (bench/live_blocks.c: blocks of 64 bytes, every one sampled
#            with --sample-bytes 1, all from one call site): memsnap's
#            wall time and peak RSS, the profile's size, and the
#            target's RSS beyond its heap (the sampler's table)
#
#   switch   prof on --sampler and prof off on Debian's redis-server
#            (its GOT slots in 13 objects, most of them read-only),
#            against `call getpid` on it, the floor of any call: the
#            stopped time and ptrace stops; with OLD=path/to/memsnap,
#            that binary's on a redis-server of its own, in the same run
#            (two samplers of different versions cannot share one)
#   switch-pg  the same on a PostgreSQL 15 postmaster (124 slots in 35
#            objects; single threaded, and its stack holds a stale
#            return address into malloc, so each check unwinds it);
#            skipped without postgresql-15
#
#   bench/sampler-scale.sh [threads|live|switch|switch-pg|all] [ROUNDS]
#                                                  (root; default 5)
#
# STACK_BYTES (e.g. 4K): the sampler's stack copy for live, when not
# its default.
#
# Say the machine's load with the numbers: the stopped time is the
# borrowed thread's and grows with the host's load.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
. bench/lib.sh
what=${1:-all}
rounds=${2:-5}
for tool in cc /usr/bin/time redis-server redis-cli; do
	command -v "$tool" >/dev/null ||
		{ echo "bench/sampler-scale.sh: needs $tool (scripts/install-deps)" >&2; exit 1; }
done
memsnap_bin
dir=$(mktemp -d /tmp/memsnap-bench-scale.XXXXXX)
pid=
PG_BIN=/usr/lib/postgresql/15/bin
PG_PID=
cleanup() {
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	[ -z "$PG_PID" ] || stop_pg || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now_us() { echo $(($(date +%s%N) / 1000)); }

# timed ARGS...: memsnap --timings ARGS; "WALL_US STOPPED_US STOPS"
timed() {
	local t0 t1 err
	t0=$(now_us)
	err=$("$MEMSNAP" --timings "$@" 2>&1 >/dev/null)
	t1=$(now_us)
	echo "$((t1 - t0)) $(sed -n 's/.* stopped \([0-9]*\) us.*(\([0-9]*\) ptrace stops).*/\1 \2/p' <<<"$err")"
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

if [ "$what" = threads ] || [ "$what" = all ]; then
	echo "threads  command             wall ms  stopped ms  ptrace stops"
	for n in 10 100 1000; do
		mkfifo "$dir/ready"
		(cd "$dir" && exec "$OLDPWD/$FIXTURES/jemalloc-target" \
			--threads "$n" > "$dir/ready") &
		pid=$!
		read -r _ < "$dir/ready"
		rm "$dir/ready"
		"$MEMSNAP" --pid "$pid" prof on --sampler >/dev/null
		"$MEMSNAP" --pid "$pid" prof off >/dev/null
		: > "$dir/on"; : > "$dir/off"
		for _ in $(seq "$rounds"); do
			timed --pid "$pid" prof on --sampler >> "$dir/on"
			timed --pid "$pid" prof off >> "$dir/off"
		done
		kill -0 "$pid" || { echo "the target died" >&2; exit 1; }
		nt=$(awk '/^Threads/ { print $2 }' "/proc/$pid/status")
		for c in on off; do
			printf '%7d  prof %-14s %8.2f %11.2f %13d\n' "$nt" "$c" \
				"$(cut -d' ' -f1 "$dir/$c" | median | awk '{ print $1 / 1000 }')" \
				"$(cut -d' ' -f2 "$dir/$c" | median | awk '{ print $1 / 1000 }')" \
				"$(cut -d' ' -f3 "$dir/$c" | median)"
		done
		kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
	done
fi

if [ "$what" = live ] || [ "$what" = all ]; then
	cc -O2 -o "$dir/live_blocks" bench/live_blocks.c
	echo "live samples  dump wall s  memsnap peak MiB  profile KiB  target table MiB"
	for n in 1000 100000 1000000; do
		mkfifo "$dir/in" "$dir/out"
		"$dir/live_blocks" < "$dir/in" > "$dir/out" &
		pid=$!
		exec 3> "$dir/in" 4< "$dir/out"
		read -r _ <&4
		"$MEMSNAP" --pid "$pid" prof on --sampler --sample-bytes 1 \
			${STACK_BYTES:+--stack-bytes "$STACK_BYTES"} \
			>/dev/null 2>&1
		before=$(rss_kb "$pid")
		echo "$n" >&3
		read -r _ <&4
		after=$(rss_kb "$pid")
		: > "$dir/wall"; : > "$dir/peak"
		for _ in $(seq "$rounds"); do
			t0=$(now_us)
			peak=$(peak_rss_kb "$MEMSNAP" -q --max-size 4G --pid "$pid" dump \
				-o "$dir/d.heap")
			t1=$(now_us)
			echo "$((t1 - t0))" >> "$dir/wall"
			echo "$peak" >> "$dir/peak"
		done
		size=$(stat -c %s "$dir/d.heap")
		live=$("$MEMSNAP" --json --max-size 4G --pid "$pid" dump \
			-o "$dir/d.heap" | sed -n 's/.*"samples": \([0-9]*\).*/\1/p')
		# the heap: N blocks of 64 bytes in 80-byte chunks, and the
		# pointer array
		heap_kb=$((n * 88 / 1024))
		printf '%12d  %11.2f  %16.1f  %11.1f  %16.1f   (%s live read)\n' "$n" \
			"$(median < "$dir/wall" | awk '{ print $1 / 1e6 }')" \
			"$(median < "$dir/peak" | awk '{ print $1 / 1024 }')" \
			"$(awk -v s="$size" 'BEGIN { print s / 1024 }')" \
			"$(awk -v a="$after" -v b="$before" -v h="$heap_kb" \
				'BEGIN { print (a - b - h) / 1024 }')" "$live"
		"$MEMSNAP" --pid "$pid" prof off >/dev/null
		exec 3>&- 4<&-
		wait "$pid" 2>/dev/null || true; pid=
		rm "$dir/in" "$dir/out"
	done
fi

# A postmaster of its own in $dir/pg (Unix socket there, no TCP).
start_pg() {
	rm -rf "$dir/pg"
	mkdir "$dir/pg"
	chmod 755 "$dir"
	chown postgres "$dir/pg"
	su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$dir/pg/data' >/dev/null 2>&1 &&
		'$PG_BIN/pg_ctl' -D '$dir/pg/data' -l '$dir/pg/log' -w \
		-o \"-k '$dir/pg' -c listen_addresses=''\" start >/dev/null"
	PG_PID=$(head -1 "$dir/pg/data/postmaster.pid")
}
stop_pg() {
	su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$dir/pg/data' -m fast -w stop >/dev/null"
	PG_PID=
}

# switch_rounds BIN [pg]: ROUNDS of call getpid, prof on, prof off on a
# redis-server (or postmaster) of its own (the first on/off, which loads
# the image, not counted); one line per command, medians.
switch_rounds() {
	local bin=$1 server=${2:-redis} cmd c s w p
	if [ "$server" = pg ]; then start_pg; p=$PG_PID
	else start_redis; p=$REDIS_PID; fi
	MEMSNAP=$bin timed --pid "$p" prof on --sampler >/dev/null
	MEMSNAP=$bin timed --pid "$p" prof off >/dev/null
	: >"$dir/call" ; : >"$dir/on" ; : >"$dir/off"
	for _ in $(seq "$rounds"); do
		MEMSNAP=$bin timed --pid "$p" call getpid >>"$dir/call"
		MEMSNAP=$bin timed --pid "$p" prof on --sampler >>"$dir/on"
		MEMSNAP=$bin timed --pid "$p" prof off >>"$dir/off"
	done
	for cmd in call on off; do
		s=$(cut -d' ' -f2 "$dir/$cmd" | median)
		c=$(cut -d' ' -f3 "$dir/$cmd" | median)
		w=$(cut -d' ' -f1 "$dir/$cmd" | median)
		awk -v b="$bin" -v m="$cmd" -v w="$w" -v s="$s" -v c="$c" \
			'BEGIN { printf "%-24s %-10s %7.2f ms %10.2f ms %8s\n", b, m, w / 1000, s / 1000, c }'
	done
	if [ "$server" = pg ]; then stop_pg; else stop_redis; fi
}

if [ "$what" = switch ] || [ "$what" = all ]; then
	echo "binary                   command       wall    stopped   ptrace stops (medians of $rounds, redis-server)"
	switch_rounds "$MEMSNAP"
	[ -z "${OLD:-}" ] || switch_rounds "$OLD"
fi

if [ "$what" = switch-pg ] || [ "$what" = all ]; then
	if [ -x "$PG_BIN/postgres" ] && id postgres >/dev/null 2>&1; then
		echo "binary                   command       wall    stopped   ptrace stops (medians of $rounds, postmaster)"
		switch_rounds "$MEMSNAP" pg
		[ -z "${OLD:-}" ] || switch_rounds "$OLD" pg
	else
		echo "bench/sampler-scale.sh: switch-pg skipped: no $PG_BIN/postgres (postgresql-15)"
	fi
fi
