/*
 * proc/smaps.c: smaps, status, task/TID/syscall and the THP mode as the
 * kernel writes them (tests/data/smaps/, captured from a live `sleep`),
 * and hostile text: the paths in smaps are the target's, and every
 * parser takes any bytes.  Expectations are computed here from the same
 * text with sscanf, never copied from memsnap.
 */
#include "proc/smaps.h"

#include "../lib/testdata.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *name, size_t *len)
{
	return testdata_slurp("smaps", name, len);
}

/* Sum of "@key: N kB" over the text, and the number of header lines,
 * by sscanf: independent of the parser. */
static uint64_t sum_key(const char *text, const char *key, size_t *headers)
{
	const char *p = text;
	uint64_t sum = 0;
	size_t nh = 0, klen = strlen(key);

	while (p && *p) {
		unsigned long long v, a, b;

		if (!strncmp(p, key, klen) && p[klen] == ':' &&
		    sscanf(p + klen + 1, " %llu kB", &v) == 1)
			sum += v * 1024;
		else if (sscanf(p, "%llx-%llx ", &a, &b) == 2)
			nh++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (headers)
		*headers = nh;
	return sum;
}

Test(explain_proc, real_smaps_every_mapping_and_sum)
{
	struct proc_memory m = { 0 };
	struct smaps_totals t;
	size_t len, headers;
	char *text = slurp("sleep.smaps", &len);
	uint64_t rss = sum_key(text, "Rss", &headers);
	uint64_t anon = sum_key(text, "Anonymous", NULL);
	size_t i, files = 0, stacks = 0;

	cr_assert_eq(smaps_parse(text, len, &m), 0);
	cr_assert_eq(m.n, headers, "%zu mappings, %zu header lines", m.n,
		     headers);
	cr_assert_eq(m.malformed, 0);
	smaps_total(&m, NULL, 0, &t);
	cr_assert_eq(t.rss, rss);
	cr_assert_eq(t.anon, anon);
	cr_assert_eq(t.anon + t.file + t.shmem, t.rss);
	for (i = 0; i < m.n; i++) {
		files += m.v[i].kind == SMAP_FILE;
		stacks += m.v[i].kind == SMAP_STACK;
	}
	cr_assert_eq(stacks, 1, "one [stack]");
	cr_assert_gt(files, 3);
	proc_memory_free(&m);
	free(text);
}

Test(explain_proc, real_status)
{
	struct proc_mem_status st;
	size_t len;
	char *text = slurp("sleep.status", &len);
	unsigned long long rss = 0, anon = 0, file = 0, shm = 0, thr = 0;
	const char *p;

	cr_assert_eq(proc_mem_status_parse(text, len, &st), 0);
	cr_assert(sscanf(strstr(text, "VmRSS:"), "VmRSS: %llu", &rss) == 1);
	cr_assert(sscanf(strstr(text, "RssAnon:"), "RssAnon: %llu", &anon) == 1);
	cr_assert(sscanf(strstr(text, "RssFile:"), "RssFile: %llu", &file) == 1);
	cr_assert(sscanf(strstr(text, "RssShmem:"), "RssShmem: %llu", &shm) == 1);
	p = strstr(text, "Threads:");
	cr_assert(p && sscanf(p, "Threads: %llu", &thr) == 1);
	cr_assert_eq(st.vm_rss, rss * 1024);
	cr_assert_eq(st.rss_anon, anon * 1024);
	cr_assert_eq(st.rss_file, file * 1024);
	cr_assert_eq(st.rss_shmem, shm * 1024);
	cr_assert_eq(st.threads, thr);
	cr_assert(st.have_rss && st.have_split);
	free(text);
}

Test(explain_proc, status_without_rss_or_with_nonsense)
{
	static const char none[] = "Name:\tx\nThreads:\t3\n";
	static const char huge[] = "VmRSS:\t18446744073709551615 kB\n";
	static const char neg[] = "VmRSS:\t-5 kB\nRssAnon:\t12x kB\n";
	struct proc_mem_status st;

	cr_assert_eq(proc_mem_status_parse(none, strlen(none), &st), -ENOENT);
	cr_assert_eq(st.threads, 3);
	/* more kB than 2^64 bytes: not a size */
	cr_assert_eq(proc_mem_status_parse(huge, strlen(huge), &st), -ENOENT);
	cr_assert_eq(proc_mem_status_parse(neg, strlen(neg), &st), -ENOENT);
	cr_assert_eq(st.rss_anon, 0);
}

/* One mapping's header and fields. */
#define MAP(hdr, rss, anon) \
	hdr "\nSize: 8 kB\nRss: " rss " kB\nAnonymous: " anon " kB\n"

Test(explain_proc, a_path_is_never_a_field)
{
	/* A file named like a field, with a huge number: a path. */
	static const char t[] =
		MAP("7f0000000000-7f0000002000 r--p 00000000 08:01 12 /tmp/Rss: 99999999 kB", "8", "0")
		MAP("7f0000002000-7f0000004000 rw-p 00000000 00:00 0", "8", "8");
	struct proc_memory m = { 0 };
	struct smaps_totals tt;

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 2);
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.rss, 16 << 10);
	cr_assert_eq(tt.file, 8 << 10);
	cr_assert_eq(tt.anon_private, 8 << 10);
	cr_assert_eq(m.v[0].kind, SMAP_FILE);
	proc_memory_free(&m);
}

Test(explain_proc, hostile_lines_are_counted_and_skipped)
{
	static const char t[] =
		"Rss: 4 kB\n"			/* a field before any mapping */
		MAP("7f0000000000-7f0000002000 rw-p 00000000 00:00 0", "8", "8")
		"Rss: 18014398509481984 kB\n"	/* 2^54 kB: past 2^64 bytes */
		"Anonymous: 4 MB\n"		/* not kB */
		"Rss:\n"			/* no number */
		"\x1b[31m: 5 kB\n"		/* a key of escape bytes */
		"Swap: 4 kB trailing\n"		/* something after kB */
		"VmFlags: rd wr\n";		/* known, not a size */
	struct proc_memory m = { 0 };
	struct smaps_totals tt;

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.malformed, 6, "%zu", m.malformed);
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.rss, 8 << 10, "the bad Rss left the good one");
	cr_assert_eq(tt.swap, 0);
	proc_memory_free(&m);
}

Test(explain_proc, any_bytes_no_crash_and_bounded)
{
	size_t len, i, round;
	char *real = slurp("sleep.smaps", &len);
	char *buf = malloc(len);
	uint64_t seed = 0x9e3779b97f4a7c15ull, cap = sum_key(real, "Rss", NULL);

	cr_assert_not_null(buf);
	for (round = 0; round < 200; round++) {
		struct proc_memory m = { 0 };
		struct smaps_totals tt;
		size_t cut;

		memcpy(buf, real, len);
		/* flip a few bytes, cut somewhere: NULs and newlines too */
		for (i = 0; i < 16; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			buf[(seed >> 33) % len] = (char)(seed >> 17);
		}
		cut = (size_t)((seed >> 40) % (len + 1));
		cr_assert_eq(smaps_parse(buf, cut, &m), 0);
		smaps_total(&m, NULL, 0, &tt);
		/* a flipped digit can grow a number, never past what a
		 * 20-digit kB amount can say; and parts never exceed it */
		cr_assert_leq(tt.anon + tt.file + tt.shmem, tt.rss);
		(void)cap;
		proc_memory_free(&m);
	}
	free(buf);
	free(real);
}

Test(explain_proc, shmem_file_cow_and_kinds)
{
	static const char t[] =
		MAP("7f0000000000-7f0000100000 rw-s 00000000 00:01 5 /dev/shm/pool", "1024", "0")
		MAP("7f0000100000-7f0000200000 rw-s 00000000 00:00 0", "512", "0")
		MAP("7f0000200000-7f0000300000 rw-p 00001000 08:01 9 /usr/lib/libx.so", "256", "64")
		MAP("7f0000300000-7f0000400000 rw-p 00000000 00:00 0 [anon:jit]", "128", "128")
		MAP("7f0000400000-7f0000500000 rw-p 00000000 00:00 0 [heap]", "100", "100")
		MAP("7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]", "16", "16")
		MAP("7fff00000000-7fff00002000 r-xp 00000000 00:00 0 [vdso]", "8", "0");
	struct proc_memory m = { 0 };
	struct smaps_totals tt;

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 7);
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.shmem, (1024 + 512) << 10);
	cr_assert_eq(tt.anon_in_files, 64 << 10);
	cr_assert_eq(tt.file, (256 - 64 + 8) << 10);
	cr_assert_eq(tt.anon_private, (128 + 100) << 10);
	cr_assert_eq(tt.anon_heap, 100 << 10);
	cr_assert_eq(tt.stacks, 16 << 10, "the main thread's [stack]");
	cr_assert_eq(tt.anon + tt.file + tt.shmem, tt.rss);
	proc_memory_free(&m);
}

Test(explain_proc, syscall_stack_pointer)
{
	static const char in_call[] =
		"202 0x7f2c 0x80 0x0 0x0 0x0 0x0 0x7ffd4c1ef8d8 0x7f1c2a4e1d1b\n";
	static const char outside[] = "-1 0x7f1c2b5ffe40 0x7f1c2a4e1d1b\n";
	uint64_t sp = 0;

	cr_assert_eq(proc_syscall_sp(in_call, strlen(in_call), &sp), 0);
	cr_assert_eq(sp, 0x7ffd4c1ef8d8ull);
	cr_assert_eq(proc_syscall_sp(outside, strlen(outside), &sp), 0);
	cr_assert_eq(sp, 0x7f1c2b5ffe40ull);
	cr_assert_eq(proc_syscall_sp("running\n", 8, &sp), -EAGAIN);
	cr_assert_eq(proc_syscall_sp("", 0, &sp), -EINVAL);
	cr_assert_eq(proc_syscall_sp("-2 0x1 0x2", 10, &sp), -EINVAL);
	cr_assert_eq(proc_syscall_sp("7 0x1 0x2", 9, &sp), -EINVAL,
		     "a call needs six arguments, sp and pc");
	cr_assert_eq(proc_syscall_sp("-1 0x12345678901234567 0x1", 26, &sp),
		     -EINVAL, "17 hex digits");
	cr_assert_eq(proc_syscall_sp("-1 0xzz 0x1", 11, &sp), -EINVAL);
}

Test(explain_proc, thp_mode)
{
	char b[16];

	thp_mode_parse("always [madvise] never\n", 23, b, sizeof(b));
	cr_assert_str_eq(b, "madvise");
	thp_mode_parse("[always] madvise never\n", 23, b, sizeof(b));
	cr_assert_str_eq(b, "always");
	thp_mode_parse("always madvise never\n", 21, b, sizeof(b));
	cr_assert_str_eq(b, "");
	thp_mode_parse("[]", 2, b, sizeof(b));
	cr_assert_str_eq(b, "");
	thp_mode_parse("[\x1b[31m]", 7, b, sizeof(b));
	cr_assert_str_eq(b, "");
	thp_mode_parse("[aaaaaaaaaaaaaaaaaaaaaaaaa]", 27, b, sizeof(b));
	cr_assert_str_eq(b, "", "longer than the buffer");
}

Test(explain_proc, stacks_are_the_threads_never_a_shape)
{
	static const char t[] =
		/* a runtime's heap a goroutine's stack pointer is in */
		MAP("c000000000-c004000000 rw-p 00000000 00:00 0", "4096", "4096")
		/* a glibc thread stack's shape: guard page, then the stack;
		 * no thread says it is one */
		MAP("7f0000000000-7f0000001000 ---p 00000000 00:00 0", "0", "0")
		MAP("7f0000001000-7f0000801000 rw-p 00000000 00:00 0", "40", "40")
		/* a stack named by its stack pointer, no guard */
		MAP("7f0010000000-7f0010100000 rw-p 00000000 00:00 0", "20", "20")
		/* the main thread's */
		MAP("7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]", "132", "132");
	struct proc_memory m = { 0 };
	struct smaps_totals tt;
	struct smap_claim go = { 0xc000000000ull, 0xc004000000ull,
				 SMAP_RUNTIME };

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 5);
	cr_assert(proc_memory_mark_sp(&m, 0x7f0010000100ull));
	cr_assert(proc_memory_mark_sp(&m, 0xc000100000ull));
	cr_assert_not(proc_memory_mark_sp(&m, 0x1000), "in no mapping");
	cr_assert_not(proc_memory_mark_sp(&m, 0x7f0000000800ull),
		      "in the guard: not anonymous memory anyone runs on");
	cr_assert_not(smap_is_stack(&m.v[2], SMAP_PROGRAM), "a shape");
	cr_assert(smap_is_stack(&m.v[3], SMAP_PROGRAM));
	cr_assert_not(smap_is_stack(&m.v[0], SMAP_RUNTIME));
	cr_assert(smap_is_stack(&m.v[4], SMAP_PROGRAM));
	smaps_total(&m, &go, 1, &tt);
	cr_assert_eq(tt.nstacks, 2);
	cr_assert_eq(tt.stacks, (20 + 132) << 10);
	cr_assert_eq(tt.largest_stack, 132 << 10);
	cr_assert_eq(tt.runtime, 4096 << 10);
	cr_assert_eq(tt.anon_private, 40 << 10,
		     "the fenced mapping is the program's; the runtime's "
		     "heap is the runtime's");
	/* without the claim, a stack pointer makes it a stack */
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.nstacks, 3);
	/* vouched for by a thread's control block */
	m.v[2].vouched = true;
	smaps_total(&m, &go, 1, &tt);
	cr_assert_eq(tt.nstacks, 3);
	cr_assert_eq(tt.stacks, (40 + 20 + 132) << 10);
	proc_memory_free(&m);
}

/* Words of a stack's top, read at @at, with a glibc control block at
 * word @k (x86-64: it holds its own address, twice) and the pair
 * (@start, @size) at word @k + @pair. */
static void glibc_top(uint64_t *w, size_t n, uint64_t at, size_t k,
		      size_t pair, uint64_t start, uint64_t size)
{
	size_t i;

	for (i = 0; i < n; i++)
		w[i] = 0x4141414141414141ull ^ i;
	w[k] = w[k + 2] = at + k * 8;
	w[k + pair] = start;
	w[k + pair + 1] = size;
}

Test(explain_proc, a_control_block_vouches_for_its_stack)
{
	static uint64_t w[1024];
	const uint64_t at = 0x7f0000800000ull - sizeof(w);
	const uint64_t lo = 0x7f0000001000ull, hi = 0x7f0000800000ull;
	const pid_t tids[] = { 4242, 4243 };
	uint64_t block = 0;

	/* glibc: stackblock with the guard page below */
	glibc_top(w, 1024, at, 700, 210, lo - 4096, hi - lo + 4096);
	cr_assert(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	cr_assert_eq(block, lo - 4096);
	/* HotSpot's guard zone: the block starts further below */
	glibc_top(w, 1024, at, 700, 210, lo - 0x20000, hi - lo + 0x20000);
	cr_assert(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	/* no control block: the pair alone proves nothing */
	glibc_top(w, 1024, at, 700, 210, lo - 4096, hi - lo + 4096);
	w[700] = w[702] = 0;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	/* a pair that does not end at the mapping's end, or starts above
	 * it, or wraps, or is of no believable size */
	glibc_top(w, 1024, at, 700, 210, lo - 4096, hi - lo);
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	glibc_top(w, 1024, at, 700, 210, lo + 4096, hi - lo - 4096);
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	glibc_top(w, 1024, at, 700, 210, hi + 1, UINT64_MAX);
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	glibc_top(w, 1024, at, 10, 0, 0, 0);
	w[20] = hi - (1ull << 40);
	w[21] = 1ull << 40;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	/* the pair too far from the control block */
	glibc_top(w, 1024, at, 900, 0, 0, 0);
	w[100] = lo - 4096;
	w[101] = hi - lo + 4096;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	/* AArch64's glibc: no self pointer, a thread id of the process */
	glibc_top(w, 1024, at, 700, 100, lo - 4096, hi - lo + 4096);
	w[700] = w[702] = 0;
	w[650] = 4243ull << 32;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &block));
	cr_assert(stack_block_find(w, 1024, at, lo, hi, tids, 2, &block));
	w[650] = 4244;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, tids, 2, &block),
		      "not a thread of the process");
	/* a top of nothing but anchors, and no pair: bounded, false */
	for (size_t i = 0; i < 1024; i++)
		w[i] = at + i * 8;
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, tids, 2, &block));
}

/*
 * A stack and a 64 MiB buffer above it in one mapping (Linux before 6.7
 * merges them): the block holding the stack pointer, found above it,
 * is the stack's part; totals count only its resident pages as stack.
 */
Test(explain_proc, a_stack_merged_with_more_is_its_block)
{
	static uint64_t w[1024];
	const uint64_t lo = 0x7f0000001000ull, top = 0x7f0000800000ull,
		       hi = top + (64ull << 20), sp = top - 0x3000;
	const uint64_t at = top - sizeof(w);
	static const char t[] =
		MAP("7f0000000000-7f0000001000 ---p 00000000 00:00 0", "0", "0")
		MAP("7f0000001000-7f0004800000 rw-p 00000000 00:00 0",
		    "65560", "65560");
	struct proc_memory m = { 0 };
	struct smaps_totals tt;
	uint64_t from = 0, to = 0;

	glibc_top(w, 1024, at, 700, 210, lo - 4096, top - lo + 4096);
	cr_assert(stack_block_holding(w, 1024, at, lo, sp, hi, NULL, 0,
				      &from, &to));
	cr_assert_eq(from, lo, "the guard below is not the mapping's");
	cr_assert_eq(to, top);
	/* the exact rule of a stack alone does not hold here */
	cr_assert_not(stack_block_find(w, 1024, at, lo, hi, NULL, 0, &from));
	/* a block that does not hold the stack pointer, or ends past the
	 * mapping, or no stack pointer in the mapping */
	cr_assert_not(stack_block_holding(w, 1024, at, lo, top + 8, hi, NULL,
					  0, &from, &to));
	glibc_top(w, 1024, at, 700, 210, lo - 4096, hi - lo + 8192);
	cr_assert_not(stack_block_holding(w, 1024, at, lo, sp, hi, NULL, 0,
					  &from, &to));
	cr_assert_not(stack_block_holding(w, 1024, at, lo, lo - 8, hi, NULL,
					  0, &from, &to));
	/* a guardless block starting inside the mapping (a buffer below) */
	glibc_top(w, 1024, at, 700, 210, lo + 0x100000, top - lo - 0x100000);
	cr_assert(stack_block_holding(w, 1024, at, lo, sp, hi, NULL, 0,
				      &from, &to));
	cr_assert_eq(from, lo + 0x100000);

	/* the totals: 24 KiB of the mapping's 65560 KiB is stack */
	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert(proc_memory_mark_sp(&m, sp));
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.stacks, 65560ull << 10, "unbounded: all of it");
	m.v[1].stack_bounded = true;
	m.v[1].stack_anon = 24 << 10;
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.stacks, 24 << 10);
	cr_assert_eq(tt.largest_stack, 24 << 10);
	cr_assert_eq(tt.anon_private, (65560ull - 24) << 10);
	cr_assert_eq(tt.anon, 65560ull << 10);
	/* one more stack pointer in it whose block was not found: whole */
	m.v[1].stack_unbounded = true;
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.stacks, 65560ull << 10);
	cr_assert_eq(tt.anon_private, 0);
	/* a hostile count larger than the mapping's: the mapping's */
	m.v[1].stack_unbounded = false;
	m.v[1].stack_anon = 1ull << 40;
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.stacks, 65560ull << 10);
	proc_memory_free(&m);
}

/* The tops read through a "mem" file: the candidates (above a fence, no
 * stack pointer, no name), what vouches, and the budget. */
Test(explain_proc, vouching_reads_only_candidate_tops)
{
	static const char t[] =
		MAP("10000-11000 ---p 00000000 00:00 0", "0", "0")
		MAP("11000-13000 rw-p 00000000 00:00 0", "8", "8")
		MAP("13000-14000 ---p 00000000 00:00 0", "0", "0")
		MAP("14000-16000 rw-p 00000000 00:00 0", "8", "8")
		/* no fence below */
		MAP("20000-22000 rw-p 00000000 00:00 0", "8", "8")
		MAP("30000-31000 ---p 00000000 00:00 0", "0", "0")
		MAP("31000-33000 rw-p 00000000 00:00 0                          [anon:arena]", "8", "8");
	static uint64_t w[1024];
	struct proc_memory m = { 0 };
	const uint64_t top = 0x2000;
	int fd = memfd_create("mem", MFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 0x40000), 0);
	/* a thread's control block at the top of 11000-13000 and of
	 * 31000-33000 (named: a program's), the pair wrong in 14000-16000 */
	glibc_top(w, top / 8, 0x13000 - top, 100, 50, 0x10000, 0x3000);
	cr_assert_eq(pwrite(fd, w, top, 0x13000 - top), (ssize_t)top);
	glibc_top(w, top / 8, 0x16000 - top, 100, 50, 0x13000, 0x2000);
	cr_assert_eq(pwrite(fd, w, top, 0x16000 - top), (ssize_t)top);
	glibc_top(w, top / 8, 0x33000 - top, 100, 50, 0x30000, 0x3000);
	cr_assert_eq(pwrite(fd, w, top, 0x33000 - top), (ssize_t)top);
	glibc_top(w, top / 8, 0x22000 - top, 100, 50, 0x20000, 0x2000);
	cr_assert_eq(pwrite(fd, w, top, 0x22000 - top), (ssize_t)top);

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_str_eq(smap_name(&m, &m.v[6]), "[anon:arena]");
	proc_memory_vouch_stacks(&m, fd, NULL, 0);
	cr_assert(m.v[1].vouched);
	cr_assert_not(m.v[3].vouched, "its pair does not end at its end");
	cr_assert_not(m.v[4].vouched, "no fence below: not read");
	cr_assert_not(m.v[6].vouched, "named by the program: not read");
	cr_assert_eq(m.stack_tops_read, 2);
	cr_assert_eq(m.stacks_vouched, 1);
	proc_memory_free(&m);

	/* a stack pointer already names it: nothing to read */
	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert(proc_memory_mark_sp(&m, 0x11800));
	proc_memory_vouch_stacks(&m, fd, NULL, 0);
	cr_assert_eq(m.stack_tops_read, 1);
	proc_memory_free(&m);
	close(fd);
}

/* Thousands of fenced pages: a bounded number of tops read. */
Test(explain_proc, vouching_has_a_budget)
{
	struct proc_memory m = { 0 };
	char *text = malloc(4000 * 2 * 128), *p = text;
	size_t i;
	int fd = memfd_create("mem", MFD_CLOEXEC);

	cr_assert_not_null(text);
	cr_assert_geq(fd, 0);
	for (i = 0; i < 4000; i++)
		p += sprintf(p, "%zx-%zx ---p 00000000 00:00 0\nRss: 0 kB\n"
			     "%zx-%zx rw-p 00000000 00:00 0\nRss: 4 kB\n"
			     "Anonymous: 4 kB\n",
			     0x100000 + i * 0x2000, 0x101000 + i * 0x2000,
			     0x101000 + i * 0x2000, 0x102000 + i * 0x2000);
	cr_assert_eq(smaps_parse(text, (size_t)(p - text), &m), 0);
	cr_assert_eq(m.n, 8000);
	cr_assert_eq(ftruncate(fd, 0x100000 + 4000 * 0x2000), 0);
	proc_memory_vouch_stacks(&m, fd, NULL, 0);
	cr_assert_eq(m.stack_tops_read, 256);
	cr_assert_eq(m.stack_tops_skipped, 4000 - 256);
	cr_assert_eq(m.stacks_vouched, 0);
	proc_memory_free(&m);
	free(text);
	close(fd);
}

/* glibc's heap_info at an arena heap's start, and what only looks like
 * one: a program's 64 MiB aligned mapping of zeros or data. */
Test(explain_proc, arena_heaps_by_their_header)
{
	const uint64_t base = 0x7f0004000000ull;
	uint64_t first[4] = { base + 48, 0, 1 << 20, 2 << 20 };
	uint64_t next[4] = { base + 48, base, 64 << 20, 64 << 20 };
	uint64_t zeros[4] = { 0 };
	uint64_t data[4] = { 0x4141414141414141ull, 7, 1, 1 };
	uint64_t grown[4] = { base + 48, 0, 65 << 20, 65 << 20 };
	static const char t[] =
		MAP("7f0004000000-7f0004200000 rw-p 00000000 00:00 0", "1024", "1024")
		MAP("7f0004200000-7f0008000000 ---p 00000000 00:00 0", "0", "0")
		MAP("7f0008000000-7f000c000000 rw-p 00000000 00:00 0", "4096", "4096")
		MAP("7f000c000000-7f0010000000 rw-p 00000000 00:00 0", "4096", "4096")
		/* not aligned: never read */
		MAP("7f0010001000-7f0010201000 rw-p 00000000 00:00 0", "1024", "1024");
	struct proc_memory m = { 0 };
	struct smaps_totals tt;
	int fd = memfd_create("mem", MFD_CLOEXEC);

	cr_assert(arena_heap_header(first));
	cr_assert(arena_heap_header(next), "a later heap of the arena");
	cr_assert_not(arena_heap_header(zeros));
	cr_assert_not(arena_heap_header(data));
	cr_assert_not(arena_heap_header(grown), "past 64 MiB");
	next[1] = base + 4096;
	cr_assert_not(arena_heap_header(next), "prev not a heap");
	next[1] = base;

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 0x7f0010300000ll), 0);
	cr_assert_eq(pwrite(fd, first, sizeof(first), 0x7f0004000000ll), 32);
	cr_assert_eq(pwrite(fd, next, sizeof(next), 0x7f0008000000ll), 32);
	cr_assert_eq(pwrite(fd, data, sizeof(data), 0x7f000c000000ll), 32);
	cr_assert_eq(pwrite(fd, first, sizeof(first), 0x7f0010001000ll), 32);
	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	proc_memory_vouch_arenas(&m, fd);
	cr_assert(m.v[0].arena_heap);
	cr_assert(m.v[2].arena_heap);
	cr_assert_not(m.v[3].arena_heap, "a program's buffer pool");
	cr_assert_not(m.v[4].arena_heap, "not 64 MiB aligned");
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.anon_arenas, (1024 + 4096) << 10);
	cr_assert_eq(tt.anon_private, (1024 + 4096 + 4096 + 1024) << 10);
	proc_memory_free(&m);
	close(fd);
}

/* Names the kernel gives anonymous and shared memory are kept (without
 * control bytes), and the Pss of shared memory summed. */
Test(explain_proc, kernel_names_and_shared_pss)
{
	static const char t[] =
		"7f0000000000-7f0000100000 rw-p 00000000 00:00 0                          [anon:jit \x1b[31mcode]\n"
		"Rss: 1024 kB\nPss: 1024 kB\nAnonymous: 1024 kB\n"
		"7f0000100000-7f0000200000 rw-s 00000000 00:01 4242                       /memfd:pool (deleted)\n"
		"Rss: 1024 kB\nPss: 256 kB\nAnonymous: 0 kB\n"
		"7f0000200000-7f0000300000 rw-s 00000000 00:01 17                         /dev/zero (deleted)\n"
		"Rss: 512 kB\nPss: 128 kB\nAnonymous: 0 kB\n"
		"7f0000300000-7f0000400000 r--p 00000000 08:01 12                         /usr/lib/libc.so.6\n"
		"Rss: 512 kB\nPss: 128 kB\nAnonymous: 0 kB\n";
	struct proc_memory m = { 0 };
	struct smaps_totals tt;

	cr_assert_eq(smaps_parse(t, strlen(t), &m), 0);
	cr_assert_eq(m.n, 4);
	cr_assert_str_eq(smap_name(&m, &m.v[0]), "[anon:jit ?[31mcode]");
	cr_assert_str_eq(smap_name(&m, &m.v[1]), "/memfd:pool");
	cr_assert_eq(m.v[1].inode, 4242);
	cr_assert_eq(m.v[1].dev_minor, 1);
	cr_assert_null(smap_name(&m, &m.v[3]), "a file is named by its path");
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_eq(tt.shmem, (1024 + 512) << 10);
	cr_assert_eq(tt.shmem_pss, (256 + 128) << 10);
	proc_memory_free(&m);
}

/* ---- the reader, on this process ---------------------------------------- */

static int block_pipe[2];
static volatile uintptr_t blocked_local;
static volatile pid_t blocked_tid;

static void *blocker(void *arg)
{
	char c, here = 0;

	(void)arg;
	blocked_tid = gettid();
	blocked_local = (uintptr_t)&here;
	/* blocked in read(): task/TID/syscall names its stack pointer */
	if (read(block_pipe[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

Test(explain_proc, read_at_this_process)
{
	struct proc_memory m = { 0 };
	struct smaps_totals tt;
	pthread_t th;
	char self[32];
	size_t i, tries;
	int fd;
	bool marked = false, asleep = false;

	cr_assert_eq(pipe(block_pipe), 0);
	cr_assert_eq(pthread_create(&th, NULL, blocker, NULL), 0);
	/* wait until the thread sleeps in read(): its state is S (a
	 * running thread has no stack pointer in task/TID/syscall) */
	for (tries = 0; tries < 5000 && !asleep; tries++) {
		char path[64], st[512];
		FILE *f;

		usleep(1000);
		if (!blocked_local)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat",
			 (int)blocked_tid);
		f = fopen(path, "r");
		if (!f)
			continue;
		asleep = fgets(st, sizeof(st), f) && strstr(st, ") S ");
		fclose(f);
	}
	cr_assert(asleep, "the thread never blocked in read()");
	snprintf(self, sizeof(self), "/proc/%d", (int)getpid());
	fd = open(self, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(proc_memory_read_at(fd, &m), 0);
	close(fd);
	cr_assert(m.have_status && m.st.have_rss);
	cr_assert_geq(m.st.threads, 2);
	cr_assert_geq(m.threads_sp, 1, "the blocked thread's stack pointer");
	for (i = 0; i < m.n; i++)
		if (blocked_local >= m.v[i].start && blocked_local < m.v[i].end)
			marked = m.v[i].sp_in;
	cr_assert(marked, "the blocked thread's stack is marked");
	cr_assert_gt(m.page_size, 0);
	smaps_total(&m, NULL, 0, &tt);
	cr_assert_gt(tt.rss, 0);
	cr_assert_geq(tt.nstacks, 2, "[stack] and the thread's");
	cr_assert_eq(tt.anon + tt.file + tt.shmem, tt.rss);
	proc_memory_free(&m);
	cr_assert_eq(write(block_pipe[1], "x", 1), 1);
	pthread_join(th, NULL);
	close(block_pipe[0]);
	close(block_pipe[1]);
}

/* The kernel's THP size: a power of two, nothing else. */
Test(explain_proc, huge_page_size)
{
	cr_assert_eq(huge_page_parse("2097152\n"), 2097152);
	cr_assert_eq(huge_page_parse("536870912"), 536870912);
	cr_assert_eq(huge_page_parse("0\n"), 0);
	cr_assert_eq(huge_page_parse("3000000\n"), 0);
	cr_assert_eq(huge_page_parse("-2097152\n"), 0);
	cr_assert_eq(huge_page_parse("2097152 kB\n"), 0);
	cr_assert_eq(huge_page_parse("99999999999999999999999\n"), 0);
	cr_assert_eq(huge_page_parse(""), 0);
}

/* AnonHugePages where an allocator can live: not a thread's stack, a
 * file's or shared memory. */
Test(explain_proc, anon_huge_of_the_pool)
{
	static const char text[] =
		"7f0000000000-7f0004000000 rw-p 00000000 00:00 0\n"
		"Rss: 65536 kB\nAnonymous: 65536 kB\nAnonHugePages: 65536 kB\n"
		"7f0010000000-7f0010800000 rw-p 00000000 08:01 12 /usr/lib/x\n"
		"Rss: 8192 kB\nAnonymous: 4096 kB\nAnonHugePages: 4096 kB\n"
		"7f0020000000-7f0020400000 rw-p 00000000 00:00 0\n"
		"Rss: 4096 kB\nAnonymous: 4096 kB\nAnonHugePages: 2048 kB\n";
	struct proc_memory m = { 0 };
	struct smaps_totals t;

	cr_assert_eq(smaps_parse(text, strlen(text), &m), 0);
	cr_assert_eq(m.n, 3);
	cr_assert(proc_memory_mark_sp(&m, 0x7f0020100000ull));
	smaps_total(&m, NULL, 0, &t);
	cr_assert_eq(t.anon_huge, (65536 + 4096 + 2048) * 1024ull);
	cr_assert_eq(t.anon_huge_private, 65536 * 1024ull);
	proc_memory_free(&m);
}

/* smaps_rollup's totals: the guess explain makes before it borrows a
 * thread. */
Test(explain_proc, rollup_fields)
{
	static const char text[] =
		"55d0c8a00000-7ffd4c1f0000 ---p 00000000 00:00 0    [rollup]\n"
		"Rss:               75424 kB\n"
		"Pss:               74321 kB\n"
		"AnonHugePages:     67584 kB\n";
	static const char bad[] = "Rss: 12x kB\nAnonHugePages: 99999999999999999999 kB\n";
	static const char rssonly[] = "Rss:  4 kB\nRssAnon: 5 kB\n";
	uint64_t v = 0;

	cr_assert_eq(smaps_rollup_field(text, strlen(text), "Rss", &v), 0);
	cr_assert_eq(v, 75424ull << 10);
	cr_assert_eq(smaps_rollup_field(text, strlen(text), "AnonHugePages",
					&v), 0);
	cr_assert_eq(v, 67584ull << 10);
	cr_assert_eq(smaps_rollup_field(bad, strlen(bad), "Rss", &v), -EINVAL);
	cr_assert_eq(smaps_rollup_field(bad, strlen(bad), "AnonHugePages",
					&v), -EINVAL);
	/* "Rss" is not "RssAnon", and a missing line is said */
	cr_assert_eq(smaps_rollup_field(rssonly, strlen(rssonly), "Rss", &v),
		     0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(smaps_rollup_field(rssonly, strlen(rssonly),
					"AnonHugePages", &v), -ENOENT);
	/* no NUL at the end: the length bounds it */
	cr_assert_eq(smaps_rollup_field(text, 30, "AnonHugePages", &v),
		     -ENOENT);
}

/* This process's own rollup, through a directory fd as explain reads
 * it. */
Test(explain_proc, rollup_of_this_process)
{
	uint64_t rss = 0, huge = UINT64_MAX;
	int fd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	if (access("/proc/self/smaps_rollup", R_OK)) {
		close(fd);
		cr_skip_test("no smaps_rollup (a kernel before 4.14)");
	}
	cr_assert_eq(proc_rollup_read_at(fd, &rss, &huge), 0);
	close(fd);
	cr_assert_gt(rss, 0);
	cr_assert_leq(huge, rss);
}
