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
unwind_seed tests/fuzz/regressions/unwind/cie-return-column-100000000 \
	"$work/hostile.so" hostile_through 0
ls -l "$C/elf" "$C/elf-debugdata" "$C/profile" "$C/unwind"
