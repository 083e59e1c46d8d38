#!/bin/bash
# What a sampler table the target forged costs `memsnap dump` (issue:
# hostile bytes; docs/SECURITY.md, promise 6a).  The hostile fixture
# (tests/fixtures/hostile.c, as nobody) rewrites the control block after
# `prof on --sampler`:
#
#   distinct   RECORDS live records (default 2^18), 128 frames each,
#              every stack different (the budget of distinct frames)
#   one-stack  2^16 records of one 128-frame stack (the budget of
#              frames unwound)
#
# and each dump's wall time, peak resident size and profile size are
# printed, beside the honest dump of the same process before the forgery
# (the anchor) and, with OLD=/path/to/an/older/memsnap, that binary on the
# same table (at most LIMIT seconds, default 600).
#
#   bench/forged.sh [RECORDS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "bench/forged.sh: needs GNU time (apt-get install time)" >&2; exit 1; }
records=${1:-262144}
limit=${LIMIT:-600}
MEMSNAP=${MEMSNAP:-./memsnap}
[ "$(id -u)" = 0 ] || { echo "bench/forged.sh: run as root" >&2; exit 1; }
make -s "$MEMSNAP" build/fixtures/hostile >/dev/null 2>&1 ||
	make -s memsnap build/fixtures/hostile >/dev/null
work=$(mktemp -d /tmp/memsnap-bench-forged.XXXXXX)
pid=
cleanup() {
	exec 7>&- 2>/dev/null || true
	[ -z "$pid" ] || kill "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# start RECORDS PCS: the fixture, fd 7 its commands, $pid
start() {
	exec 7>&- 2>/dev/null || true
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
	rm -f "$work/ctl" "$work/ready"
	mkfifo "$work/ctl"
	HOSTILE_RECORDS=$1 HOSTILE_PCS=$2 HOSTILE_FRAME=0 MEMSNAP_CONTROL_FD=4 \
		build/fixtures/hostile 4<"$work/ctl" >"$work/ready" &
	pid=$!
	exec 7>"$work/ctl"
	for _ in $(seq 100); do
		grep -q hostile "$work/ready" 2>/dev/null && break
		sleep 0.05
	done
	"$MEMSNAP" --pid "$pid" prof on --sampler --sample-bytes 64 >/dev/null
}

# forge CMD: send it, wait for the reply line
forge() {
	local n
	n=$(wc -l <"$work/ready")
	printf %s "$1" >&7
	for _ in $(seq 600); do
		[ "$(wc -l <"$work/ready")" -gt "$n" ] && return 0
		sleep 0.1
	done
	echo "bench/forged.sh: the fixture did not answer $1" >&2
	exit 1
}

# dump LABEL BIN: one dump, its figures
dump() {
	local label=$1 bin=$2 st
	rm -f "$work/out.heap"
	st=0
	/usr/bin/time -f "%e %M" -o "$work/time" \
		timeout "$limit" "$bin" --pid "$pid" dump -o "$work/out.heap" \
		>/dev/null 2>"$work/err" || st=$?
	read -r secs kib <"$work/time" || true
	[ "$st" = 124 ] && secs=">$limit"
	printf '%-28s %10s %10s %12s  %s\n' "$label" "$secs" \
		"$((kib / 1024))" "$(stat -c %s "$work/out.heap" 2>/dev/null || echo -)" \
		"$(head -c 90 "$work/err" | tr '\n' ' ')"
}

printf '%-28s %10s %10s %12s  %s\n' dump seconds "peak MiB" "profile B" "stderr"
start "$records" 0
forge a		# an honest table: 256 blocks sampled
dump "honest, before the forgery" "$MEMSNAP"
forge F
dump "distinct, $records records" "$MEMSNAP"
[ -z "${OLD:-}" ] || dump "  the same, $OLD" "$OLD"
start 65536 1
forge F
dump "one stack, 65536 records" "$MEMSNAP"
[ -z "${OLD:-}" ] || dump "  the same, $OLD" "$OLD"
