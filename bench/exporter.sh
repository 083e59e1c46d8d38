#!/bin/bash
# What memsnap exporter costs.
#
# 1. A redis-server (Debian's, jemalloc, 200000 keys) under
#    redis-benchmark (GET, 50 clients, 16 pipelined), without and with
#    the exporter reading redis and scraped every 5 s, the allocator
#    read (one thread borrowed) at every scrape (--attach-every 5s) and
#    at the default (60s).  Each round runs none, exporter, exporter,
#    none (so that a drift of the machine falls on both alike); its
#    ratio is the exporter's requests a second over none's; the median
#    of the rounds is shown.
# 2. The exporter's own CPU and RSS with 1, 10 and 100 targets
#    (exporter-target, 8 MiB each), scraped every 5 s for SECONDS, the
#    allocators read every 60 s (the default) and every 5 s.
#
#   bench/exporter.sh [ROUNDS] [SECONDS]    (root; redis-server,
#                                            redis-benchmark, curl, bc)
# (0 ROUNDS: part 2 only; 0 SECONDS: part 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib-redis.sh
. bench/lib-redis.sh
rounds=${1:-5}
secs=${2:-60}
for tool in redis-server redis-cli redis-benchmark curl bc; do
	command -v "$tool" >/dev/null || { echo "bench/exporter.sh: needs $tool" >&2; exit 1; }
done
MEMSNAP=${MEMSNAP:-./memsnap}
FIXTURES=${FIXTURES:-build/fixtures}
for f in "$MEMSNAP" "$FIXTURES/exporter-target"; do
	[ -x "$f" ] || { echo "bench/exporter.sh: no $f (make tests first)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/memsnap-bench-exporter.XXXXXX)
xpid='' scraper='' fx=()
cleanup() {
	[ -n "$scraper" ] && kill "$scraper" 2>/dev/null
	[ -n "$xpid" ] && kill "$xpid" 2>/dev/null
	for p in "${fx[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	stop_redis 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# exporter_up ARGS...: the exporter on a free loopback port, $xport.
exporter_up() {
	"$MEMSNAP" exporter --listen 127.0.0.1:0 "$@" 2>"$work/x.log" &
	xpid=$!
	for _ in $(seq 600); do
		xport=$(sed -n 's/.*serving http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/x.log")
		[ -n "$xport" ] && return 0
		sleep 0.05
	done
	echo "the exporter did not start: $(cat "$work/x.log")" >&2
	exit 1
}

exporter_down() {
	kill "$scraper" 2>/dev/null || true
	wait "$scraper" 2>/dev/null || true
	kill "$xpid"
	wait "$xpid" || { echo "the exporter failed: $(cat "$work/x.log")" >&2; exit 1; }
	scraper='' xpid=
}

# A scraper as Prometheus is one: GET /metrics every 5 s.
scrape_every_5s() {
	while :; do
		curl -sf "http://127.0.0.1:$xport/metrics" >"$work/scrape.prom" &&
			mv "$work/scrape.prom" "$work/last.prom"
		sleep 5
	done &
	scraper=$!
}

# One redis-benchmark run: its GET requests a second.
bench_rps() {
	redis-benchmark -p "$REDIS_PORT" -t get -n 2000000 -c 50 -P 16 \
		-r 200000 -d 100 -q --csv | awk -F'"' '/GET/ { printf "%.0f\n", $4 }'
}

# with_exporter EVERY: bench_rps with the exporter up, scraped; how long
# it held redis's thread, and for how long it ran, to $work/held.
with_exporter() {
	local t0 t1

	exporter_up --pid "$REDIS_PID" --attach-every "$1"
	scrape_every_5s
	t0=$(date +%s.%N)
	bench_rps
	t1=$(date +%s.%N)
	curl -sf "http://127.0.0.1:$xport/metrics" |
		awk -v t="$(echo "$t1 - $t0" | bc -l)" \
			'/^memsnap_exporter_thread_stopped_seconds_total\{/ { print $2, t }' \
			>>"$work/held"
	exporter_down
}

if [ "$rounds" -gt 0 ]; then
	echo "== 1. redis-benchmark beside the exporter ($rounds rounds of none, exporter, exporter, none)"
	REDIS_MALLOC_CONF='' start_redis
	fill_redis 200000
	median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	for every in 5s 60s; do
		: >"$work/ratio" ; : >"$work/held"
		for r in $(seq "$rounds"); do
			a1=$(bench_rps)
			b1=$(with_exporter "$every")
			b2=$(with_exporter "$every")
			a2=$(bench_rps)
			echo "attach every $every, round $r: none $a1 $a2, exporter $b1 $b2 req/s"
			awk -v a="$((a1 + a2))" -v b="$((b1 + b2))" 'BEGIN { printf "%.4f\n", b / a }' >>"$work/ratio"
		done
		echo "attach every $every: throughput with the exporter / without, median of $rounds rounds: $(median "$work/ratio")"
		awk -v e="$every" '{ held += $1; secs += $2 } END {
			printf "attach every %s: redis'"'"'s thread held %.2f ms in %.0f s beside the benchmark (%.4f%% of one thread)\n",
				e, held * 1000, secs, 100 * held / secs }' "$work/held"
	done
	redis-cli -p "$REDIS_PORT" ping | grep -q PONG || { echo "redis died" >&2; exit 1; }
	stop_redis
fi

[ "$secs" -gt 0 ] || exit 0
echo "== 2. the exporter's own CPU and RSS, scraped every 5 s for $secs s"
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
printf '%-8s %-13s %9s %9s %10s %12s\n' targets attach-every "CPU %" "RSS MiB" "peak MiB" "scrape ms"
for n in 1 10 100; do
	while [ "${#fx[@]}" -lt "$n" ]; do
		"$FIXTURES/exporter-target" --hold 8388608 >/dev/null &
		fx+=("$!")
	done
	for every in 60 5; do
		exporter_up --match '^exporter-target$' --attach-every "${every}s" \
			--max-targets "$n"
		# the first readings of every target, then the window
		for _ in $(seq 600); do
			curl -sf "http://127.0.0.1:$xport/metrics" >"$work/last.prom" || true
			grep -q "^memsnap_exporter_targets $n\$" "$work/last.prom" &&
				[ "$(grep -c '^memsnap_process_rss_bytes{' "$work/last.prom")" = "$n" ] && break
			sleep 0.1
		done
		t0=$(cpu_ticks "$xpid")
		scrape_every_5s
		sleep "$secs"
		t1=$(cpu_ticks "$xpid")
		rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$xpid/status")
		hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$xpid/status")
		ms=$(awk '/^memsnap_exporter_scrape_duration_seconds / { printf "%.1f", $2 * 1000 }' "$work/last.prom")
		printf '%-8s %-13s %9.2f %9.1f %10.1f %12s\n' "$n" "${every}s" \
			"$(echo "($t1 - $t0) * 100 / $hz / $secs" | bc -l)" \
			"$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$ms"
		exporter_down
	done
done
