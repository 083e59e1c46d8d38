# Helpers for the jemalloc benchmarks (sourced, not run): a private
# Debian redis-server on a free loopback port, profiling on, no
# persistence, in a temp dir; the memsnap binary to measure.

# MEMSNAP: the binary (default ./memsnap, built here).
# FIXTURES: where jemalloc-target is (default build/fixtures).
memsnap_bin() {
	MEMSNAP=${MEMSNAP:-./memsnap}
	FIXTURES=${FIXTURES:-build/fixtures}
	if [ "$MEMSNAP" = ./memsnap ]; then
		make -s memsnap "$FIXTURES/jemalloc-target" >/dev/null
	fi
}

# start_redis: sets REDIS_PID, REDIS_PORT, REDIS_DIR.
start_redis() {
	local port
	REDIS_DIR=$(mktemp -d /tmp/memsnap-bench-redis.XXXXXX)
	for port in $(seq 21000 21200); do
		ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && continue
		MALLOC_CONF=${REDIS_MALLOC_CONF:-prof:true} \
			redis-server --port "$port" --bind 127.0.0.1 \
			--dir "$REDIS_DIR" --save '' --appendonly no \
			--daemonize no --loglevel warning \
			> "$REDIS_DIR/log" 2>&1 &
		REDIS_PID=$!
		for _ in $(seq 200); do
			if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
				REDIS_PORT=$port
				return 0
			fi
			kill -0 "$REDIS_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
	done
	echo "redis-server did not start; see $REDIS_DIR/log" >&2
	return 1
}

# fill_redis N: N keys of 100 bytes, so the heap is not trivial.
fill_redis() {
	redis-benchmark -p "$REDIS_PORT" -t set -n "$1" -r "$1" -d 100 -q \
		>/dev/null
}

stop_redis() {
	kill "$REDIS_PID" 2>/dev/null || true
	wait "$REDIS_PID" 2>/dev/null || true
	rm -rf "$REDIS_DIR"
}

# The anchor: what people type today.
gdb_dump_cmd() {
	echo "gdb -nx -p $1 -batch -ex 'call (int)mallctl(\"prof.dump\",0,0,0,0)'"
}

# mean_s FILE: the mean of a hyperfine --export-json file, in seconds.
mean_s() {
	grep -m1 '"mean"' "$1" | sed 's/.*: //; s/,//'
}
