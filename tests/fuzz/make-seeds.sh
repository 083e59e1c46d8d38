#!/bin/sh
# Rebuild the generated seeds of tests/fuzz/corpus: tiny ELF files of
# every shape symbols/elf.c reads, and heap profiles written by the real
# allocators.  The hand-written seeds (maps lines, odd profiles) are
# committed as they are.  Review the diff before committing: each file
# should stay under ~20 KB.
#
#   tests/fuzz/make-seeds.sh        (from the top of the tree)
#
# ELF seeds (corpus/elf/), all from one small C file with allocator-like
# names, -nostdlib so that they stay a few KB:
#   so-both       .so, .gnu.hash and .hash, .symtab, build-id
#   so-gnu        .so, .gnu.hash only, stripped
#   so-sysv       .so, .hash only, stripped
#   so-versions   .so with symbol versions (default and hidden)
#   so-mini       .so stripped, function symbols in .gnu_debugdata
#   exec-static   ET_EXEC, static, non-PIE, unstripped
#   so-i386       ELFCLASS32
#   rel.o         ET_REL, an object file
# corpus/elf-debugdata/ gets the uncompressed inner images: the
# MiniDebugInfo file of so-mini, and so-both.
# corpus/profile/ gets a gperftools dump of prof-tc (tcmalloc's heap
# profiler) and a jemalloc dump of the same chains.
set -eu
cd "$(dirname "$0")/../.."
C=tests/fuzz/corpus
work=$(mktemp -d /tmp/memsnap-seeds.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$C/elf" "$C/elf-debugdata" "$C/profile"

cat >"$work/tiny.c" <<'EOF'
/* Names memsnap's detection asks for, and a few decoys. */
static int counter;
int data_object[16] = { 1 };
static int local_helper(int x) { return x * 3 + counter++; }
int je_mallctl(const char *n, void *o, unsigned long *ol, void *v,
	       unsigned long vl)
{ (void)n; (void)o; (void)ol; (void)v; (void)vl; return local_helper(1); }
int je_mallctlnametomib(const char *n, unsigned long *m, unsigned long *l)
{ (void)n; (void)m; (void)l; return local_helper(2); }
void je_malloc_stats_print(void (*w)(void *, const char *), void *a,
			   const char *o)
{ (void)w; (void)a; (void)o; local_helper(3); }
int mallctl_int(void) { return local_helper(4); }
void *malloc(unsigned long n) { return (void *)(n + (unsigned long)local_helper(5)); }
int weak_one(void) __attribute__((weak));
int weak_one(void) { return 6; }
EOF
cat >"$work/vers.map" <<'EOF'
V1 { global: je_mallctl; malloc; local: *; };
V2 { global: je_mallctlnametomib; je_malloc_stats_print; } V1;
EOF
cat >"$work/start.c" <<'EOF'
void _start(void) { for (;;) ; }
EOF

# Small: no separate code page, no .comment, byte-aligned where allowed.
CFLAGS="-Os -fPIC -nostdlib -fno-asynchronous-unwind-tables -Wl,--build-id -Wl,-z,noseparate-code -Wl,-z,norelro"
# shellcheck disable=SC2086
{
gcc $CFLAGS -shared -Wl,--hash-style=both -o "$work/so-both" "$work/tiny.c"
gcc $CFLAGS -shared -Wl,--hash-style=gnu -o "$work/so-gnu" "$work/tiny.c"
gcc $CFLAGS -shared -Wl,--hash-style=sysv -o "$work/so-sysv" "$work/tiny.c"
gcc $CFLAGS -shared -Wl,--version-script="$work/vers.map" \
	-o "$work/so-versions" "$work/tiny.c"
gcc $CFLAGS -static -no-pie -fno-pic -o "$work/exec-static" \
	"$work/tiny.c" "$work/start.c"
gcc -m32 $CFLAGS -shared -o "$work/so-i386" "$work/tiny.c"
gcc -Os -fPIC -fno-asynchronous-unwind-tables -c -o "$work/rel.o" \
	"$work/tiny.c"
}
for f in so-both exec-static so-versions so-i386 rel.o; do
	objcopy -R .comment "$work/$f" "$C/elf/$f"
done
strip --strip-all -R .comment -o "$C/elf/so-gnu" "$work/so-gnu"
strip --strip-all -R .comment -o "$C/elf/so-sysv" "$work/so-sysv"
tests/fixtures/elf-minidebug.sh "$work/so-both" "$C/elf/so-mini" \
	"$work/mini"
cp "$work/mini/mini_debuginfo" "$C/elf-debugdata/mini-debuginfo"
cp "$C/elf/so-both" "$C/elf-debugdata/so-both"

# Profiles: the prof-chain chains on tcmalloc (gperftools format, every
# allocation) and on jemalloc (heap_v2, sampled at 2^10).
F=tests/fixtures
gcc -std=gnu11 -O1 -g0 -fno-omit-frame-pointer \
	-fno-optimize-sibling-calls -o "$work/prof-tc" \
	$F/prof_tc_main.c $F/prof_f0.c $F/prof_f1.c $F/prof_f2.c \
	$F/prof_h0.c -ltcmalloc
"$work/prof-tc" "$work/tc" 3 2>/dev/null
# Paths of this machine's build directory would change on every run.
sed "s|$work/prof-tc|/prof/prof-tc|" "$work/tc.0001.heap" \
	>"$C/profile/tcmalloc.heap"
gcc -std=gnu11 -O1 -g0 -fno-omit-frame-pointer \
	-fno-optimize-sibling-calls -o "$work/prof-chain" \
	$F/prof_main.c $F/prof_f0.c $F/prof_f1.c $F/prof_f2.c \
	$F/prof_h0.c -ljemalloc
MALLOC_CONF=prof:true,lg_prof_sample:10 \
	"$work/prof-chain" "$work/je.heap" 3 >/dev/null 2>&1
sed "s|$work/prof-chain|/prof/prof-chain|" "$work/je.heap" \
	>"$C/profile/jemalloc-lg10.heap"
# Unwinder inputs: struct head (16 registers, flags, stack length), the
# stack, then the object's memory (a small ELF whose segments sit at
# their file offsets).
cat >"$work/chain.c" <<'EOF'
__attribute__((noinline)) int leaf(int x) { return x * 7 + 1; }
__attribute__((noinline)) int with_fp(int x)
{ volatile int a[8]; a[x & 7] = x; return leaf(a[x & 7]) + 1; }
__attribute__((noinline)) int aligned(int x)
{ volatile int v[8] __attribute__((aligned(32))); v[x & 7] = x;
  return with_fp(v[x & 7]) + 2; }
__attribute__((noinline)) int recurse(int x)
{ return x > 0 ? recurse(x - 1) + 1 : aligned(x); }
int entry(int x) { return recurse(x) + 3; }
EOF
LDSMALL="-Wl,-z,noseparate-code -Wl,-z,norelro"
# shellcheck disable=SC2086
{
gcc -O2 -fPIC -shared -nostdlib -fasynchronous-unwind-tables \
	-fno-optimize-sibling-calls $LDSMALL -o "$work/chain.so" \
	"$work/chain.c"
gcc -shared -nostdlib -Wa,--gdwarf-cie-version=3 -DHOSTILE_CIE_ONLY \
	$LDSMALL -o "$work/hostile.so" tests/fixtures/hostile_cfi.S
# no PT_GNU_EH_FRAME, as gcc -static links
gcc -O2 -fPIC -shared -nostdlib -fasynchronous-unwind-tables \
	-fno-optimize-sibling-calls $LDSMALL -Wl,--no-eh-frame-hdr \
	-o "$work/chain-noeh.so" "$work/chain.c"
}
# unwind_seed OUT OBJECT FUNCTION FLAGS: pc 4 bytes into FUNCTION, every
# stack word a return address after one of OBJECT's calls; the image is
# OBJECT stripped
unwind_seed() {
	pc=$(nm "$2" | awk -v f="$3" '$3 == f { print $1 }')
	calls=$(objdump -d "$2" | awk '/call/ { sub(":", "", $1); print $1 }')
	[ -n "$pc" ] || { echo "make-seeds: no $3 in $2" >&2; exit 1; }
	# shellcheck disable=SC2086
	perl -e '
		my ($pc, $flags, @calls) = @ARGV;
		my $base = 0x555555554000;
		my @regs = (hex($pc) + 4, 64, (0) x 14);
		my $stack = "";
		for my $i (0 .. 63) {
			my $c = @calls ? $calls[$i % @calls] : 0;
			$stack .= pack("Q<", $base + hex($c) + 5);
		}
		print pack("Q<16 L< L<", @regs, $flags, length $stack), $stack;
	' "$pc" "$4" $calls >"$1"
	strip -R .comment -o "$work/stripped" "$2"
	cat "$work/stripped" >>"$1"
}
mkdir -p "$C/unwind" tests/fuzz/regressions/unwind
unwind_seed "$C/unwind/saved-leaf" "$work/chain.so" leaf 0
unwind_seed "$C/unwind/saved-aligned" "$work/chain.so" aligned 0
unwind_seed "$C/unwind/live-recurse" "$work/chain.so" recurse 1
# flags bit 1, and the image offset of .eh_frame (its address: the first
# segment is at offset 0) from bit 8: the table made from the records
ehf=$(readelf -SW "$work/chain-noeh.so" |
	sed -n 's/.* \.eh_frame  *PROGBITS  *\([0-9a-f]*\) .*/\1/p')
unwind_seed "$C/unwind/saved-aligned-eh-frame" "$work/chain-noeh.so" \
	aligned $(((0x$ehf << 8) | 2))
unwind_seed "$C/unwind/live-recurse-eh-frame" "$work/chain-noeh.so" \
	recurse $(((0x$ehf << 8) | 3))
unwind_seed tests/fuzz/regressions/unwind/cie-return-column-100000000 \
	"$work/hostile.so" hostile_through 0
ls -l "$C/elf" "$C/elf-debugdata" "$C/profile" "$C/unwind"

# Entry patches (corpus/patch/): the first 64 bytes (fewer when the
# symbol is shorter) of malloc, free, calloc and realloc as this
# machine's glibc, jemalloc (libjemalloc.a, linked in as a program
# links it) and tcmalloc_minimal have them, as `prof on --sampler`
# reads them from a target; and the same cut after the last whole
# instruction ("-cut"), which the planner can take.
cat >"$work/prologue.c" <<'EOF'
#define _GNU_SOURCE
#include <capstone/capstone.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f))
		exit(1);
}

/* linked statically: these pull the allocator's definitions in */
void *volatile prologue_refs[] = { malloc, free, calloc, realloc };

/* prologue DIR PREFIX LIBNAME FUNCTION... */
int main(int argc, char **argv)
{
	csh h;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return 1;
	for (int i = 4; i < argc; i++) {
		void *fn = dlsym(RTLD_DEFAULT, argv[i]);
		const ElfW(Sym) *sym = NULL;
		size_t n = 64, off = 0, left;
		const uint8_t *c;
		uint64_t addr = 0;
		cs_insn *insn = cs_malloc(h);
		char path[4096];
		Dl_info info;

		if (!fn || !dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) ||
		    !strstr(info.dli_fname, argv[3])) {
			fprintf(stderr, "prologue: %s is not %s's\n", argv[i],
				argv[3]);
			return 1;
		}
		if (sym && sym->st_size && sym->st_size < n)
			n = sym->st_size;
		snprintf(path, sizeof(path), "%s/%s-%s", argv[1], argv[2],
			 argv[i]);
		put(path, fn, n);
		c = fn;
		left = n;
		while (cs_disasm_iter(h, &c, &left, &addr, insn))
			off = (size_t)(c - (const uint8_t *)fn);
		snprintf(path, sizeof(path), "%s/%s-%s-cut", argv[1], argv[2],
			 argv[i]);
		put(path, fn, off);
		cs_free(insn, 1);
	}
	cs_close(&h);
	return 0;
}
EOF
mkdir -p "$C/patch"
fns="malloc free calloc realloc"
gcc -O1 -o "$work/prologue-glibc" "$work/prologue.c" -lcapstone -ldl
# shellcheck disable=SC2086
"$work/prologue-glibc" "$C/patch" glibc libc.so $fns
gcc -O1 -rdynamic -o "$work/prologue-jemalloc" "$work/prologue.c" \
	/usr/lib/"$(gcc -print-multiarch)"/libjemalloc.a -lcapstone -ldl \
	-lpthread -lm
# shellcheck disable=SC2086
"$work/prologue-jemalloc" "$C/patch" jemalloc prologue-jemalloc $fns
gcc -O1 -o "$work/prologue-tcmalloc" "$work/prologue.c" \
	-Wl,--no-as-needed -ltcmalloc_minimal -lcapstone -ldl
# shellcheck disable=SC2086
"$work/prologue-tcmalloc" "$C/patch" tcmalloc libtcmalloc_minimal $fns

# Allocator statistics (corpus/stats/): what memsnap's `stats` captures
# from each allocator in a program with a few threads' allocations.
cat >"$work/stats.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(STATS_GLIBC)
#include <malloc.h>
#elif defined(STATS_MIMALLOC)
#include <mimalloc.h>
#elif defined(STATS_TCMALLOC)
#include <gperftools/malloc_extension_c.h>
#elif defined(STATS_JEMALLOC)
#include <jemalloc/jemalloc.h>
#endif

static void *churn(void *arg)
{
	void *keep[64];

	for (int i = 0; i < 64; i++) {
		keep[i] = malloc((size_t)(i + 1) * (arg ? 4096 : 24));
		memset(keep[i], 1, 8);
	}
	for (int i = 0; i < 64; i += 2)
		free(keep[i]);
	return keep[1];
}

#if defined(STATS_MIMALLOC)
static void out(const char *msg, void *arg)
{
	fputs(msg, arg);
}
#elif defined(STATS_JEMALLOC)
static void out(void *arg, const char *msg)
{
	fputs(msg, arg);
}
#endif

int main(void)
{
	pthread_t t[3];

	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, churn, i ? (void *)1 : NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	churn(NULL);
	free(malloc(1 << 20));
#if defined(STATS_GLIBC)
	malloc_info(0, stdout);
#elif defined(STATS_MIMALLOC)
	mi_stats_print_out(out, stdout);
#elif defined(STATS_TCMALLOC)
	{
		char buf[30000];

		MallocExtension_GetStats(buf, sizeof(buf));
		fputs(buf, stdout);
	}
#elif defined(STATS_JEMALLOC)
	malloc_stats_print(out, stdout, "Jablxeh");
#endif
	return 0;
}
EOF
mkdir -p "$C/stats"
gcc -O1 -DSTATS_GLIBC -o "$work/stats-glibc" "$work/stats.c" -lpthread
"$work/stats-glibc" >"$C/stats/malloc-info.xml"
gcc -O1 -DSTATS_MIMALLOC -o "$work/stats-mi" "$work/stats.c" -lmimalloc \
	-lpthread
"$work/stats-mi" >"$C/stats/mimalloc.txt"
gcc -O1 -DSTATS_TCMALLOC -o "$work/stats-tc" "$work/stats.c" \
	-ltcmalloc_minimal -lpthread
"$work/stats-tc" >"$C/stats/tcmalloc-stats.txt"
gcc -O1 -DSTATS_JEMALLOC -o "$work/stats-je" "$work/stats.c" -ljemalloc \
	-lpthread
"$work/stats-je" >"$C/stats/jemalloc.json"
# The tcmalloc profile above with a bucket of memsnap's own (a stack
# through the stub page, 0x7fff00000000 in tests/fuzz/fuzz_stats.c)
# that tcmalloc_drop_own_buckets() takes out, and the header's totals
# raised by it.
awk 'NR == 1 {
	sub(/^heap profile: */, "")
	split($0, f, /[^0-9]+/)
	printf "heap profile: %6d: %8d [%6d: %8d] @ heapprofile\n",
		f[1] + 1, f[2] + 1048576, f[3] + 1, f[4] + 1048576
	print "     1:  1048576 [     1:  1048576] @ 0x7fff00000010 0x5555555551a0"
	next
} { print }' "$C/profile/tcmalloc.heap" >"$C/stats/tcmalloc-own-bucket.heap"
ls -l "$C/patch" "$C/stats"

# arm64 entry patches (corpus/patch-aarch64/): the same functions of
# Debian's arm64 glibc (libc6-arm64-cross), and tiny.c built for arm64
# with pointer authentication and BTI (gcc-aarch64-linux-gnu), whose
# entries start with paciasp or bti c.  Skipped without the cross
# packages.
# a64_seed OUT ELF SYMBOL MAX: MAX bytes (fewer if the symbol is
# shorter) at the symbol, through the executable LOAD segment
a64_seed() {
	set -- "$1" "$2" "$3" "$4" "$(aarch64-linux-gnu-nm -D -S "$2" |
		awk -v s="$3" '$4 == s || index($4, s "@") == 1 {
			print $1, $2; exit }')"
	[ -n "$5" ] || { echo "make-seeds: no $3 in $2" >&2; exit 1; }
	# shellcheck disable=SC2086
	perl -e '
		my ($out, $elf, $max, $addr, $size) = @ARGV;
		my ($o, $v) = map { hex } (`aarch64-linux-gnu-readelf -lW $elf` =~
			/^\s*LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+R E/m);
		my $n = hex($size) < $max ? hex($size) : $max;
		open(my $in, "<:raw", $elf) or die;
		seek($in, hex($addr) - $v + $o, 0) or die;
		read($in, my $buf, $n) == $n or die;
		open(my $fh, ">:raw", $out) or die;
		print $fh $buf;
	' "$1" "$2" "$4" $5
}
A64_LIBC=/usr/aarch64-linux-gnu/lib/libc.so.6
if [ -f "$A64_LIBC" ] && command -v aarch64-linux-gnu-gcc >/dev/null; then
	mkdir -p "$C/patch-aarch64"
	for f in $fns; do
		a64_seed "$C/patch-aarch64/glibc-$f" "$A64_LIBC" "$f" 64
	done
	# the whole of free: its branches for arch_patch_calls
	a64_seed "$C/patch-aarch64/glibc-free-whole" "$A64_LIBC" free 4096
	aarch64-linux-gnu-gcc -O2 -fPIC -shared -nostdlib \
		-mbranch-protection=standard -o "$work/tiny-a64.so" \
		"$work/tiny.c"
	for f in je_mallctl je_malloc_stats_print malloc; do
		a64_seed "$C/patch-aarch64/pac-bti-$f" "$work/tiny-a64.so" \
			"$f" 64
	done
	ls -l "$C/patch-aarch64"
else
	echo "make-seeds: no arm64 cross glibc and gcc: corpus/patch-aarch64 kept"
fi
