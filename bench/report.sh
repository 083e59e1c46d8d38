#!/bin/sh
# memsnap report vs jeprof --text on a dump of Debian's mariadbd (26 MB,
# stripped C++) running on Debian's jemalloc (LD_PRELOAD, prof:true).
#
# The server runs in bootstrap mode on a throwaway datadir (no network,
# no socket, no client package needed), loads 100k rows into an InnoDB
# and a MEMORY table, and jemalloc writes its own interval dumps into the
# datadir (mariadbd's cwd); the largest is the heap at its fullest.
#
# Prints: hyperfine (one run each) for memsnap text, memsnap pprof and
# jeprof --text, the ratio, peak RSS (/usr/bin/time -v), and both top-10
# lists for comparison.
#
#   bench/report.sh [MEMSNAP] [LG_SAMPLE]   (defaults: ./memsnap, 12)
set -eu
memsnap=$(realpath "${1:-./memsnap}")
lg=${2:-12}
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
for t in /usr/sbin/mariadbd jeprof hyperfine /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "bench: $t is missing" >&2; exit 1; }
done
[ -e "$jemalloc" ] || { echo "bench: $jemalloc is missing" >&2; exit 1; }
work=$(mktemp -d /tmp/memsnap-bench-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cd "$work"
mkdir data
cat >load.sql <<'EOF'
create database b;
use b;
create table t (a int primary key, s varchar(200)) engine=innodb;
insert into t select seq, repeat('x', 150) from seq_1_to_100000;
create table m (a int primary key, s varchar(200)) engine=memory;
insert into m select seq, repeat('y', 100) from seq_1_to_100000;
select count(*) from t where s like '%z%';
EOF
env LD_PRELOAD=$jemalloc \
	MALLOC_CONF=prof:true,lg_prof_sample:$lg,lg_prof_interval:25,prof_prefix:jeprof \
	/usr/sbin/mariadbd --no-defaults --bootstrap --datadir="$work/data" \
	--user="$(id -un)" --skip-grant-tables --skip-networking \
	--innodb-buffer-pool-size=64M --max-heap-table-size=256M \
	<load.sql >server.log 2>&1 || { tail server.log; exit 1; }
dump=$(ls -S data/jeprof.*.heap 2>/dev/null | head -1)
[ -n "$dump" ] || { echo "bench: jemalloc wrote no dump" >&2; exit 1; }
cp "$dump" mariadbd.heap
dump=$work/mariadbd.heap
echo "dump: $(wc -c <"$dump") bytes, $(grep -c '^@' "$dump") stacks," \
	"lg_prof_sample $lg"

text="$memsnap report $dump -q --top 10"
pprof="$memsnap report $dump -q --format pprof -o $work/out.pb.gz"
jep="jeprof --text /usr/sbin/mariadbd $dump"
hyperfine -N --runs 1 -n memsnap-text "$text" -n memsnap-pprof "$pprof" \
	-n jeprof-text "$jep" --export-json hf.json >hf.out 2>&1 ||
	{ cat hf.out; exit 1; }
grep -E 'Time|±|faster|Benchmark' hf.out || cat hf.out
for c in "$text" "$pprof" "$jep"; do
	/usr/bin/time -v $c >/dev/null 2>time.err || true
	printf 'peak RSS %8s KiB  %s\n' \
		"$(sed -n 's/.*Maximum resident set size (kbytes): //p' time.err)" \
		"$c"
done
echo "--- memsnap report (top 10)"
$text
echo "--- jeprof --text (top 10)"
$jep 2>/dev/null | head -12
