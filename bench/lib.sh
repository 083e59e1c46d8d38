# Shared helpers for the benchmark scripts (sourced, not run).
# shellcheck shell=sh

# bench_start RUNS [MEMSNAP [N]]: the start of a benchmark run as
# `bench/NAME.sh [MEMSNAP] [RUNS]`: sets $here (bench/), $memsnap (the
# one built beside it by default), $runs (@RUNS by default), $work (a
# fresh directory) and $pids (add what you start): at exit each of them
# is killed and $work removed.
# shellcheck disable=SC2034  # the sourcing script's variables
bench_start() {
	here=$(cd "$(dirname "$0")" && pwd)
	memsnap=${2:-$here/../memsnap}
	runs=${3:-$1}
	work=$(mktemp -d)
	pids=
	trap bench_cleanup EXIT INT TERM
}

bench_cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	rm -rf "$work"
}

# needs TOOL...: one line and exit 1 unless every TOOL is installed.
needs() {
	for tool in "$@"; do
		command -v "$tool" >/dev/null ||
			{ echo "$(basename "$0"): needs $tool" >&2; exit 1; }
	done
}

# A throwaway mariadbd (Debian's 26 MB stripped C++ server) with Debian's
# jemalloc preloaded and profiling on, in bootstrap mode: it reads SQL from
# a FIFO that we keep open, so it stays up with no network and no datadir
# set-up.  Sets MARIADB_PID; stop_mariadbd kills it.
start_mariadbd() {
	MARIADB_DIR=$(mktemp -d /tmp/memsnap-bench-mariadb.XXXXXX)
	mkdir "$MARIADB_DIR/data"
	mkfifo "$MARIADB_DIR/in"
	sleep 100000 > "$MARIADB_DIR/in" &
	MARIADB_HOLD=$!
	LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
	MALLOC_CONF=${MARIADB_MALLOC_CONF:-prof:true} \
		/usr/sbin/mariadbd --no-defaults --user=root \
		--datadir="$MARIADB_DIR/data" --bootstrap --skip-networking \
		--log-error="$MARIADB_DIR/err.log" \
		< "$MARIADB_DIR/in" > "$MARIADB_DIR/out.log" 2>&1 &
	MARIADB_PID=$!
	# Ready when InnoDB has started: its log says so.
	for _ in $(seq 300); do
		grep -q 'log sequence number' "$MARIADB_DIR/err.log" 2>/dev/null && return 0
		kill -0 "$MARIADB_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "mariadbd did not start; see $MARIADB_DIR/err.log" >&2
	return 1
}

stop_mariadbd() {
	kill "$MARIADB_PID" "$MARIADB_HOLD" 2>/dev/null || true
	wait "$MARIADB_PID" 2>/dev/null || true
	rm -rf "$MARIADB_DIR"
}

# peak_rss_kb CMD...: the peak RSS of one run, from GNU time.
peak_rss_kb() {
	[ -x /usr/bin/time ] || { echo "bench: needs GNU time (apt-get install time)" >&2; return 1; }
	/usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -n 1
}
