#!/bin/bash
# The commands that call into the allocator, end to end, against the
# floor of any command: `info --no-attach` (memsnap starting, pinning
# the process and reading its maps and objects; no thread stopped) on
# the same target in the same run.  Medians of ROUNDS, each command's
# runs interleaved with the others', on Debian's redis-server
# (jemalloc, prof:true, 100k keys):
#
#   info --no-attach   the anchor
#   stats --raw        a thread borrowed, jemalloc's report read from
#                      the target's memfd
#   dump -o FILE       the same for its profile, written where asked
#   info               a thread borrowed, no file
#
#   bench/e2e.sh [ROUNDS]                      (root; default 21)
#
# MEMSNAP: the binary (default ./memsnap); OLD=path/to/memsnap: that
# binary too, on the same server, its runs interleaved with these.
# Say the machine's load with the numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib-redis.sh
rounds=${1:-21}
for tool in redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null ||
		{ echo "bench/e2e.sh: needs $tool (scripts/install-deps)" >&2; exit 1; }
done
memsnap_bin
dir=$(mktemp -d /tmp/memsnap-bench-e2e.XXXXXX)
trap 'stop_redis; rm -rf "$dir"' EXIT
start_redis
fill_redis 100000

bins=("$MEMSNAP")
[ -z "${OLD:-}" ] || bins+=("$OLD")
cmds=("info --no-attach" "stats --raw" "dump -o $dir/d.heap" "info")

# one run of binary $1, command $2: wall time in microseconds
one() {
	local t0 t1
	t0=$(date +%s%N)
	# shellcheck disable=SC2086
	"$1" --pid "$REDIS_PID" $2 >/dev/null 2>&1 ||
		{ echo "bench/e2e.sh: $1 $2 failed" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000))
}

for ((r = 0; r < rounds; r++)); do
	for b in "${!bins[@]}"; do
		for c in "${!cmds[@]}"; do
			one "${bins[b]}" "${cmds[c]}" >> "$dir/t.$b.$c"
		done
	done
done

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "redis-server pid $REDIS_PID, $rounds rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${!bins[@]}"; do
	echo "${bins[b]}:"
	base=$(median "$dir/t.$b.0")
	for c in "${!cmds[@]}"; do
		m=$(median "$dir/t.$b.$c")
		awk -v c="${cmds[c]%% -o*}" -v m="$m" -v b="$base" \
			'BEGIN { printf "  %-18s %8.1f ms  %5.2fx info --no-attach\n", c, m / 1000, m / b }'
	done
done
