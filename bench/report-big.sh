#!/bin/sh
# memsnap report on big hostile dumps (bench/report-big-gen.c): every
# stack distinct, one in 64 of them 1024 frames deep, the largest counts,
# a third of the addresses seen once, and a tenth of the bytes in
# MAPPED_LIBRARIES lines, one object each.  Time and peak RSS of each
# report, from /usr/bin/time -v.
#
#   bench/report-big.sh [MEMSNAP] [SIZE...]
#
# Defaults: ./memsnap, 100M and 1G.  FORMATS="text folded ..." to time
# other formats (default text); KEEP=1 keeps the dumps.  A SIZE of 1G
# needs about 1 GB in /tmp (TMPDIR) and about 7 GB of memory.
set -eu
cd "$(dirname "$0")/.."
memsnap=$(realpath "${1:-./memsnap}")
[ $# -gt 0 ] && shift
sizes=${*:-100M 1G}
for t in cc /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "bench: $t is missing" >&2; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/memsnap-big-XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cc -O2 -o "$work/gen" bench/report-big-gen.c
# the bench is about time and memory, not the size cap (which a memsnap
# from before --max-size does not have)
max=
"$memsnap" report --help | grep -q -- --max-size && max="--max-size 64G"

for size in $sizes; do
	dump=$work/big-$size.heap
	"$work/gen" "$size" >"$dump"
	echo "dump $size: $(wc -c <"$dump") bytes, $(grep -c '^@' "$dump")" \
		"stacks, $(grep -c 'r-xp' "$dump") objects"
	for fmt in ${FORMATS:-text}; do
		# shellcheck disable=SC2086  # two words or none
		/usr/bin/time -v "$memsnap" report "$dump" -q $max \
			--format "$fmt" -o /dev/null 2>"$work/time.err" ||
			{ tail -n 30 "$work/time.err" >&2; exit 1; }
		printf '  %-7s wall %9s  peak RSS %9s KiB\n' "$fmt" \
			"$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.err")" \
			"$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time.err")"
	done
	[ -n "${KEEP:-}" ] || rm -f "$dump"
done
