/*
 * Entry-patch plans (injector/patch.h) on literal function bodies: which
 * instructions move, how their relative operands are fixed up, what is
 * refused.  libmemsnap.a holds every CPU's planner, so each CPU's tests
 * run wherever the suite does.  Every body is copied to the end
 * of a page followed by an inaccessible one, so that a read past
 * code + size faults.
 */
#include "injector/patch.h"

#include <capstone/capstone.h>
#include <elf.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A PIE's text, a stub mapping 1 MiB above it, a hook in a library */
#define ENTRY UINT64_C(0x555555561230)
#define STUB (ENTRY + 0x100000)
#define TRAMP (STUB + 0x40)
#define HOOK UINT64_C(0x7f1234567000)

#define GIB (UINT64_C(1) << 30)
#define MIB (UINT64_C(1) << 20)

static struct patch_plan plan;
static char why[160];
/* The planner a test's expected values are for: use() names it. */
static const struct patch_planner *P;

static void use(const char *cpu)
{
	P = !strcmp(cpu, "x86_64") ? &patch_planner_x86_64
				   : &patch_planner_aarch64;
	cr_assert_str_eq(P->cpu, cpu);
	cr_assert_eq(patch_planner_of(P->e_machine), P);
}

/* @code copied so that it ends where an inaccessible page begins. */
static const unsigned char *at_page_end(const unsigned char *code, size_t n)
{
	static const size_t room = 64 * 1024;	/* the longest body here */
	static unsigned char *map;
	size_t guard = sysconf(_SC_PAGESIZE);

	if (!map) {
		map = mmap(NULL, room + guard, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		cr_assert_neq(map, MAP_FAILED);
		cr_assert_eq(mprotect(map + room, guard, PROT_NONE), 0);
	}
	cr_assert_leq(n, room);
	memcpy(map + room - n, code, n);
	return map + room - n;
}

static int plan_at(const unsigned char *code, size_t size, uint64_t entry,
		   uint64_t stub, uint64_t tramp)
{
	memset(&plan, 0, sizeof(plan));
	why[0] = '\0';
	return P->plan(at_page_end(code, size), size, entry, stub,
			       tramp, HOOK, &plan, why, sizeof(why));
}

static int plan_of(const unsigned char *code, size_t size)
{
	return plan_at(code, size, ENTRY, STUB, TRAMP);
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void assert_refused(int rc, const char *expected)
{
	cr_assert_eq(rc, -EOPNOTSUPP, "rc %d, why \"%s\"", rc, why);
	cr_assert_str_eq(why, expected);
}

/* ---- x86-64 ------------------------------------------------------------ */

/* Where the rel32 at @p, ending the instruction at @next, goes. */
static uint64_t rel32_target(const unsigned char *p, uint64_t next)
{
	return next + (int64_t)(int32_t)rd32(p);
}

/* jmp rel32 to @to, at @p of the trampoline: its way back. */
static void assert_jmp_rel(const unsigned char *p, uint64_t to)
{
	uint64_t at = TRAMP + (uint64_t)(p - plan.tramp_code);

	cr_assert_eq(p[0], 0xe9, "not a jmp rel32: %#x", p[0]);
	cr_assert_eq(rel32_target(p + 1, at + 5), to,
		     "back to %#llx, not %#llx",
		     (unsigned long long)rel32_target(p + 1, at + 5),
		     (unsigned long long)to);
}

/* The entry's new bytes: jmp rel32 to the stub. */
static void assert_jmp_to_stub(void)
{
	cr_assert_eq(plan.at, ENTRY);
	cr_assert_eq(plan.len, 5);
	cr_assert_eq(plan.new[0], 0xe9);
	cr_assert_eq(rel32_target(plan.new + 1, ENTRY + 5), STUB);
	cr_assert_eq(plan.stub, STUB);
	cr_assert_eq(plan.tramp, TRAMP);
}

/* Debian's libjemalloc.a malloc: its size-class test first. */
Test(patch, x86_64_jemalloc_cmp_moves_verbatim)
{
	static const unsigned char code[] = {
		0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00, /* cmp $0x1000,%rdi */
		0x77, 0x03,		/* ja entry+12 */
		0x31, 0xc0,		/* xor %eax,%eax */
		0xc3,			/* ret */
		0xe9, 0xef, 0x0f, 0x00, 0x00, /* jmp entry+0x1000 */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_jmp_to_stub();
	cr_assert_arr_eq(plan.old, code, 5);
	cr_assert_eq(plan.busy_lo, ENTRY);
	cr_assert_eq(plan.busy_hi, ENTRY + 7, "N = 7: the whole cmp");
	cr_assert_eq(plan.tramp_len, 7 + 5);
	cr_assert_arr_eq(plan.tramp_code, code, 7);
	assert_jmp_rel(plan.tramp_code + 7, ENTRY + 7);
}

/* tcmalloc: a load from its globals, rip-relative, first. */
Test(patch, x86_64_tcmalloc_rip_relative_load_is_rebased)
{
	static const unsigned char code[] = {
		0x48, 0x8b, 0x05, 0xd9, 0x95, 0x00, 0x00,
				/* mov 0x95d9(%rip),%rax: entry+7+0x95d9 */
		0x48, 0x85, 0xc0,	/* test %rax,%rax */
		0x74, 0x01,		/* je entry+13 */
		0xc3,			/* ret */
		0xff, 0xe0,		/* jmp *%rax */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_jmp_to_stub();
	cr_assert_eq(plan.busy_hi, ENTRY + 7);
	cr_assert_eq(plan.tramp_len, 7 + 5);
	cr_assert_arr_eq(plan.tramp_code, code, 3, "same opcode and ModR/M");
	cr_assert_eq(rel32_target(plan.tramp_code + 3, TRAMP + 7),
		     ENTRY + 7 + 0x95d9, "the same global");
	cr_assert_neq(rd32(plan.tramp_code + 3), 0x95d9u, "rebased");
	assert_jmp_rel(plan.tramp_code + 7, ENTRY + 7);
}

/* A disp32 that cannot reach its global from the trampoline */
Test(patch, x86_64_rip_relative_out_of_reach_is_refused)
{
	static const unsigned char code[] = {
		0x48, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x70,
				/* mov 0x70000000(%rip),%rax */
		0xc3,		/* ret */
	};

	use("x86_64");
	/* 1 GiB below: 0x70000000 + 1 GiB does not fit in an int32 */
	assert_refused(plan_at(code, sizeof(code), ENTRY, STUB, ENTRY - GIB),
		       "entry+0: its rip-relative operand is out of reach of the trampoline");
}

/* A register-saving prologue: three 2-byte pushes cover the jmp. */
Test(patch, x86_64_push_prologue_moves_six_bytes)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x41, 0x55,	/* push %r13 */
		0x41, 0x54,	/* push %r12 */
		0x55,		/* push %rbp */
		0x53,		/* push %rbx */
		0x5b,		/* pop %rbx */
		0x5d,		/* pop %rbp */
		0x41, 0x5c,	/* pop %r12 */
		0x41, 0x5d,	/* pop %r13 */
		0x41, 0x5e,	/* pop %r14 */
		0x41, 0x5f,	/* pop %r15 */
		0xc3,		/* ret */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_jmp_to_stub();
	cr_assert_eq(plan.busy_lo, ENTRY);
	cr_assert_eq(plan.busy_hi, ENTRY + 6, "N = 6");
	cr_assert_eq(plan.tramp_len, 6 + 5);
	cr_assert_arr_eq(plan.tramp_code, code, 6);
	assert_jmp_rel(plan.tramp_code + 6, ENTRY + 6);
}

/* -fcf-protection: endbr64 moves with the next instruction. */
Test(patch, x86_64_endbr64_moves_verbatim)
{
	static const unsigned char code[] = {
		0xf3, 0x0f, 0x1e, 0xfa,	/* endbr64 */
		0x55,			/* push %rbp */
		0x48, 0x89, 0xe5,	/* mov %rsp,%rbp */
		0x5d,			/* pop %rbp */
		0xc3,			/* ret */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_jmp_to_stub();
	cr_assert_eq(plan.busy_hi, ENTRY + 5);
	cr_assert_eq(plan.tramp_len, 5 + 5);
	cr_assert_arr_eq(plan.tramp_code, code, 5);
	assert_jmp_rel(plan.tramp_code + 5, ENTRY + 5);
}

/* jmp rel8 becomes jmp rel32 to the same place. */
Test(patch, x86_64_jmp_rel8_becomes_rel32)
{
	static const unsigned char code[] = {
		0xeb, 0x06,		/* jmp entry+8 */
		0x0f, 0x1f, 0x00,	/* nopl (%rax) */
		0x0f, 0x1f, 0x00,	/* nopl (%rax) */
		0xc3,			/* ret */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 5, "jmp and the first nopl");
	cr_assert_eq(plan.tramp_len, 5 + 3 + 5);
	cr_assert_eq(plan.tramp_code[0], 0xe9);
	cr_assert_eq(rel32_target(plan.tramp_code + 1, TRAMP + 5), ENTRY + 8);
	cr_assert_arr_eq(plan.tramp_code + 5, code + 2, 3);
	assert_jmp_rel(plan.tramp_code + 8, ENTRY + 5);
}

/* je rel8 becomes 0f 84 rel32 to the same place. */
Test(patch, x86_64_je_rel8_becomes_rel32)
{
	static const unsigned char code[] = {
		0x48, 0x85, 0xff,	/* test %rdi,%rdi */
		0x74, 0x03,		/* je entry+8 */
		0x31, 0xc0,		/* xor %eax,%eax */
		0xc3,			/* ret */
		0x48, 0x89, 0xf8,	/* mov %rdi,%rax */
		0xc3,			/* ret */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 5);
	cr_assert_eq(plan.tramp_len, 3 + 6 + 5);
	cr_assert_arr_eq(plan.tramp_code, code, 3);
	cr_assert_eq(plan.tramp_code[3], 0x0f);
	cr_assert_eq(plan.tramp_code[4], 0x84, "je rel32");
	cr_assert_eq(rel32_target(plan.tramp_code + 5, TRAMP + 9), ENTRY + 8);
	assert_jmp_rel(plan.tramp_code + 9, ENTRY + 5);
}

/* A tail call: the trampoline ends with it, no way back. */
Test(patch, x86_64_jmp_rel32_needs_no_way_back)
{
	static const unsigned char code[] = {
		0xe9, 0xfb, 0x0f, 0x00, 0x00,	/* jmp entry+0x1000 */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 5);
	cr_assert_eq(plan.tramp_len, 5);
	cr_assert_eq(plan.tramp_code[0], 0xe9);
	cr_assert_eq(rel32_target(plan.tramp_code + 1, TRAMP + 5),
		     ENTRY + 0x1000);
}

Test(patch, x86_64_call_rel32_keeps_its_target)
{
	static const unsigned char code[] = {
		0xe8, 0xfb, 0x0f, 0x00, 0x00,	/* call entry+0x1000 */
		0xc3,				/* ret */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.tramp_len, 5 + 5);
	cr_assert_eq(plan.tramp_code[0], 0xe8);
	cr_assert_eq(rel32_target(plan.tramp_code + 1, TRAMP + 5),
		     ENTRY + 0x1000);
	assert_jmp_rel(plan.tramp_code + 5, ENTRY + 5);
}

/* An ifunc-like jump through a slot: its disp fixed, no way back. */
Test(patch, x86_64_jmp_through_rip_slot_is_rebased)
{
	static const unsigned char code[] = {
		0xff, 0x25, 0xfa, 0x0f, 0x00, 0x00,
				/* jmp *0xffa(%rip): the slot at entry+0x1000 */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 6);
	cr_assert_eq(plan.tramp_len, 6);
	cr_assert_arr_eq(plan.tramp_code, code, 2);
	cr_assert_eq(rel32_target(plan.tramp_code + 2, TRAMP + 6),
		     ENTRY + 0x1000);
}

/* A hook within a rel32 of the entry (the sampler mapped near the
 * program): the entry jumps to it, and no stub is written. */
Test(patch, x86_64_near_hook_needs_no_stub)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x41, 0x55,	/* push %r13 */
		0xc3,		/* ret */
	};
	const uint64_t hook = ENTRY - 0x200000;

	use("x86_64");
	memset(&plan, 0, sizeof(plan));
	cr_assert_eq(P->plan(at_page_end(code, sizeof(code)),
				     sizeof(code), ENTRY, STUB, TRAMP, hook,
				     &plan, why, sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(plan.new[0], 0xe9);
	cr_assert_eq(rel32_target(plan.new + 1, ENTRY + 5), hook);
	cr_assert_eq(plan.stub_len, 0, "a stub of %u bytes", plan.stub_len);
	assert_jmp_rel(plan.tramp_code + 6, ENTRY + 6);
}

/* The stub is jmp *0(%rip) and the hook's address. */
Test(patch, x86_64_stub_jumps_to_the_hook)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x41, 0x55,	/* push %r13 */
		0xc3,		/* ret */
	};
	static const unsigned char stub[14] = {
		0xff, 0x25, 0x00, 0x00, 0x00, 0x00,	/* jmp *0(%rip) */
		0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00, /* HOOK */
	};

	use("x86_64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.stub_len, sizeof(stub));
	cr_assert_arr_eq(plan.stub_code, stub, sizeof(stub));
}

/* Instructions that cannot run elsewhere, in the first 5 bytes */
Test(patch, x86_64_unmovable_instructions_are_refused)
{
	static const struct {
		unsigned char code[6];
		const char *why;
	} cases[] = {
		{ { 0x31, 0xc0,			/* xor %eax,%eax */
		    0xc3,			/* ret */
		    0x90, 0x90, 0x90 },		/* nop */
		  "entry+2: ret cannot be moved" },
		{ { 0xcc,			/* int3 */
		    0x90, 0x90, 0x90, 0x90, 0xc3 },
		  "entry+0: int3 cannot be moved" },
		{ { 0x0f, 0x05,			/* syscall */
		    0x90, 0x90, 0x90, 0xc3 },
		  "entry+0: syscall cannot be moved" },
		{ { 0xe2, 0xfe,			/* loop entry */
		    0x90, 0x90, 0x90, 0xc3 },
		  "entry+0: loop cannot be moved" },
		{ { 0x90,			/* nop */
		    0xe3, 0xfd,			/* jrcxz entry */
		    0x90, 0x90, 0xc3 },
		  "entry+1: jrcxz cannot be moved" },
		{ { 0xff, 0xe0,			/* jmp *%rax */
		    0x90, 0x90, 0x90, 0xc3 },
		  "entry+0: jmp rax cannot be moved (an indirect branch)" },
		{ { 0xff, 0x50, 0x08,		/* call *8(%rax) */
		    0x90, 0x90, 0xc3 },
		  "entry+0: call qword ptr [rax + 8] cannot be moved (an indirect branch)" },
		{ { 0xe8, 0x00, 0x00, 0x00, 0x00, /* call entry+5 */
		    0x58 },			/* pop %rax */
		  "entry+0: call to the next instruction reads its own address" },
	};

	use("x86_64");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_refused(plan_of(cases[i].code, sizeof(cases[i].code)),
			       cases[i].why);
}

/* A loop back to entry+2 would land in the middle of the jmp. */
Test(patch, x86_64_branch_into_the_moved_bytes_is_refused)
{
	static const unsigned char code[] = {
		0x31, 0xc0,	/* xor %eax,%eax */
		0xff, 0xc0,	/* inc %eax: the loop's head, entry+2 */
		0x39, 0xf8,	/* cmp %edi,%eax */
		0x72, 0xfa,	/* jb entry+2 */
		0xc3,		/* ret */
	};

	use("x86_64");
	assert_refused(plan_of(code, sizeof(code)),
		       "a branch at entry+6 goes back into the first 6 bytes");
}

/*
 * The edges of (entry, entry + N): the entry itself goes through the
 * patch, entry + N is where the trampoline comes back; both are fine.
 */
Test(patch, x86_64_branches_to_the_edges_are_allowed)
{
	static const unsigned char to_entry[] = {
		0x31, 0xc0,	/* xor %eax,%eax */
		0xff, 0xc0,	/* inc %eax */
		0x39, 0xf8,	/* cmp %edi,%eax */
		0x72, 0xf8,	/* jb entry */
		0xc3,		/* ret */
	};
	static const unsigned char to_n[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x53,		/* push %rbx: N = 5 */
		0x90,		/* nop: entry+5 */
		0xeb, 0xfd,	/* jmp entry+5 */
	};

	use("x86_64");
	cr_assert_eq(plan_of(to_entry, sizeof(to_entry)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 6);
	cr_assert_eq(plan_of(to_n, sizeof(to_n)), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 5);
}

/* ...but entry + N - 1, the last moved instruction, is not. */
Test(patch, x86_64_branch_to_the_last_moved_byte_is_refused)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x53,		/* push %rbx: entry+4, N = 5 */
		0x90,		/* nop */
		0xeb, 0xfc,	/* jmp entry+4 */
	};

	use("x86_64");
	assert_refused(plan_of(code, sizeof(code)),
		       "a branch at entry+6 goes back into the first 5 bytes");
}

/* An address taken into those bytes (a computed goto's label) */
Test(patch, x86_64_address_of_the_moved_bytes_is_refused)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14: entry+2 */
		0x41, 0x55,	/* push %r13 */
		0x48, 0x8d, 0x05, 0xf5, 0xff, 0xff, 0xff,
				/* lea -0xb(%rip),%rax: entry+2 */
		0xff, 0xe0,	/* jmp *%rax */
	};

	use("x86_64");
	assert_refused(plan_of(code, sizeof(code)),
		       "entry+6 takes an address inside the first 6 bytes");
}

/* The scan covers a long body to its last byte. */
Test(patch, x86_64_long_body_is_scanned_to_its_end)
{
	static unsigned char code[16384];
	size_t n = sizeof(code);

	use("x86_64");
	/* push %r15; push %r14; push %r13; nops; ret */
	memcpy(code, (const unsigned char[]){ 0x41, 0x57, 0x41, 0x56, 0x41,
					      0x55 }, 6);
	memset(code + 6, 0x90, n - 6);
	code[n - 1] = 0xc3;
	cr_assert_eq(plan_of(code, n), 0, "%s", why);
	cr_assert_eq(plan.busy_hi, ENTRY + 6);

	/* ...; jmp entry+2 (e9 rel32); ret */
	code[n - 6] = 0xe9;
	code[n - 5] = (uint8_t)(2 - (n - 1));
	code[n - 4] = (uint8_t)((2 - (n - 1)) >> 8);
	code[n - 3] = 0xff;
	code[n - 2] = 0xff;
	assert_refused(plan_of(code, n),
		       "a branch at entry+16378 goes back into the first 6 bytes");
}

/* Bytes capstone cannot decode: no telling where branches go. */
Test(patch, x86_64_undecodable_body_is_refused)
{
	static const unsigned char code[] = {
		0x55,			/* push %rbp */
		0x48, 0x89, 0xe5,	/* mov %rsp,%rbp */
		0x5d,			/* pop %rbp */
		0x06,			/* push %es: not in 64-bit mode */
		0xc3,			/* ret */
	};

	use("x86_64");
	assert_refused(plan_of(code, sizeof(code)),
		       "entry+5: cannot decode the body to check its branches");
}

Test(patch, x86_64_short_or_cut_bodies_are_refused)
{
	static const unsigned char three[] = {
		0x31, 0xc0,	/* xor %eax,%eax */
		0xc3,		/* ret */
	};
	static const unsigned char cut[] = {
		0x48, 0x81, 0xff, 0x00, 0x10, /* cmp $0x1000,%rdi, 2 short */
	};

	use("x86_64");
	assert_refused(plan_of(three, sizeof(three)),
		       "the function is 3 bytes, shorter than a 5-byte jmp");
	assert_refused(plan_of(cut, sizeof(cut)),
		       "entry+0: cmp runs past the end of the function (5 bytes)");
}

Test(patch, x86_64_stub_and_trampoline_must_be_in_reach)
{
	static const unsigned char code[] = {
		0x41, 0x57,	/* push %r15 */
		0x41, 0x56,	/* push %r14 */
		0x41, 0x55,	/* push %r13 */
		0xc3,		/* ret */
	};
	uint64_t reach;

	use("x86_64");
	reach = P->reach;
	cr_assert_gt(reach, GIB);
	cr_assert_lt(reach, 2 * GIB, "rel32, with a margin");
	assert_refused(plan_at(code, sizeof(code), ENTRY, ENTRY + 3 * GIB,
			       TRAMP),
		       "the stub is out of jmp rel32 reach of the entry");
	assert_refused(plan_at(code, sizeof(code), ENTRY, ENTRY - 3 * GIB,
			       TRAMP),
		       "the stub is out of jmp rel32 reach of the entry");
	assert_refused(plan_at(code, sizeof(code), ENTRY, STUB,
			       ENTRY + 3 * GIB),
		       "the trampoline is out of reach of the entry");
	cr_assert_eq(plan_at(code, sizeof(code), ENTRY, ENTRY + reach,
			     ENTRY - reach), 0, "%s", why);
	cr_assert_eq(rel32_target(plan.new + 1, ENTRY + 5), ENTRY + reach);
}

/* ---- arm64 ------------------------------------------------------------- */

/* Where the b or bl @w at @pc goes. */
static uint64_t b_target(uint32_t w, uint64_t pc)
{
	int64_t imm26 = w & 0x03ffffff;

	if (imm26 & 0x02000000)
		imm26 -= 0x04000000;
	return pc + imm26 * 4;
}

/* adr / adrp's signed 21 bits: immhi in 23:5, immlo in 30:29 */
static int64_t adr_imm_of(uint32_t w)
{
	int64_t imm = ((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3);

	return imm & 0x100000 ? imm - 0x200000 : imm;
}

static void assert_word(const unsigned char *p, uint32_t w)
{
	cr_assert_eq(rd32(p), w, "%08x, not %08x", rd32(p), w);
}

static void assert_b(const unsigned char *p, uint64_t pc, uint64_t to)
{
	cr_assert_eq(rd32(p) & 0xfc000000u, 0x14000000u, "b, not %08x",
		     rd32(p));
	cr_assert_eq(b_target(rd32(p), pc), to);
}

/* ldr x16, #8; br x16; .quad HOOK at @p */
static void assert_stub_tail(const unsigned char *p)
{
	static const unsigned char tail[16] = {
		0x50, 0x00, 0x00, 0x58,	/* ldr x16, #8 */
		0x00, 0x02, 0x1f, 0xd6,	/* br x16 */
		0x00, 0x70, 0x56, 0x34, 0x12, 0x7f, 0x00, 0x00, /* HOOK */
	};

	cr_assert_arr_eq(p, tail, sizeof(tail));
}

/* No landing pad: the first instruction is replaced. */
Test(patch, aarch64_plain_entry_moves_the_first_instruction)
{
	static const unsigned char code[] = {
		0xfd, 0x7b, 0xbf, 0xa9,	/* stp x29, x30, [sp, #-16]! */
		0xfd, 0x03, 0x00, 0x91,	/* mov x29, sp */
		0xfd, 0x7b, 0xc1, 0xa8,	/* ldp x29, x30, [sp], #16 */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};

	use("aarch64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY);
	cr_assert_eq(plan.len, 4);
	cr_assert_arr_eq(plan.old, code, 4);
	assert_b(plan.new, ENTRY, STUB);
	cr_assert_eq(plan.busy_lo, ENTRY);
	cr_assert_eq(plan.busy_hi, ENTRY, "one instruction");
	cr_assert_eq(plan.stub_len, 16, "STUB is 8-byte aligned: no nop");
	assert_stub_tail(plan.stub_code);
	cr_assert_eq(plan.tramp_len, 8);
	cr_assert_arr_eq(plan.tramp_code, code, 4);
	assert_b(plan.tramp_code + 4, TRAMP + 4, ENTRY + 4);
}

/* bti c stays; the trampoline, called with blr, has its own. */
Test(patch, aarch64_bti_c_stays_at_the_entry)
{
	static const unsigned char code[] = {
		0x5f, 0x24, 0x03, 0xd5,	/* bti c */
		0xfd, 0x7b, 0xbf, 0xa9,	/* stp x29, x30, [sp, #-16]! */
		0xfd, 0x7b, 0xc1, 0xa8,	/* ldp x29, x30, [sp], #16 */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};

	use("aarch64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY + 4);
	cr_assert_arr_eq(plan.old, code + 4, 4);
	assert_b(plan.new, ENTRY + 4, STUB);
	cr_assert_eq(plan.busy_lo, ENTRY + 4);
	cr_assert_eq(plan.busy_hi, ENTRY + 4);
	cr_assert_eq(plan.stub_len, 16);
	assert_stub_tail(plan.stub_code);
	cr_assert_eq(plan.tramp_len, 12);
	assert_word(plan.tramp_code, 0xd503245f);
	cr_assert_arr_eq(plan.tramp_code + 4, code + 4, 4);
	assert_b(plan.tramp_code + 8, TRAMP + 8, ENTRY + 8);
}

/* paciasp: the stub authenticates, the trampoline signs again. */
Test(patch, aarch64_paciasp_is_undone_and_redone)
{
	static const unsigned char code[] = {
		0x3f, 0x23, 0x03, 0xd5,	/* paciasp */
		0xfd, 0x7b, 0xbf, 0xa9,	/* stp x29, x30, [sp, #-16]! */
		0xfd, 0x7b, 0xc1, 0xa8,	/* ldp x29, x30, [sp], #16 */
		0xbf, 0x23, 0x03, 0xd5,	/* autiasp */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};

	use("aarch64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY + 4);
	assert_b(plan.new, ENTRY + 4, STUB);
	/* autiasp; nop (the literal 8-byte aligned); ldr; br; HOOK */
	cr_assert_eq(plan.stub_len, 24);
	assert_word(plan.stub_code, 0xd50323bf);
	assert_word(plan.stub_code + 4, 0xd503201f);
	assert_stub_tail(plan.stub_code + 8);
	cr_assert_eq(plan.tramp_len, 12);
	assert_word(plan.tramp_code, 0xd503233f);
	cr_assert_arr_eq(plan.tramp_code + 4, code + 4, 4);
	assert_b(plan.tramp_code + 8, TRAMP + 8, ENTRY + 8);
}

Test(patch, aarch64_pacibsp_is_undone_with_autibsp)
{
	static const unsigned char code[] = {
		0x7f, 0x23, 0x03, 0xd5,	/* pacibsp */
		0xfd, 0x7b, 0xbf, 0xa9,	/* stp x29, x30, [sp, #-16]! */
		0xfd, 0x7b, 0xc1, 0xa8,	/* ldp x29, x30, [sp], #16 */
		0xff, 0x23, 0x03, 0xd5,	/* autibsp */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};

	use("aarch64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY + 4);
	assert_word(plan.stub_code, 0xd50323ff);
	assert_word(plan.tramp_code, 0xd503237f);
}

/* adrp keeps its page from the trampoline's. */
Test(patch, aarch64_adrp_keeps_its_page)
{
	static const unsigned char code[] = {
		0x80, 0x00, 0x00, 0x90,	/* adrp x0, 16 pages up */
		0x00, 0x00, 0x40, 0xf9,	/* ldr x0, [x0] */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};
	uint64_t page = (ENTRY & ~UINT64_C(0xfff)) + 0x10000;
	uint32_t w;
	int64_t imm;

	use("aarch64");
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.tramp_len, 8);
	w = rd32(plan.tramp_code);
	cr_assert_eq(w & 0x9f00001fu, 0x90000000u, "adrp x0, not %08x", w);
	imm = adr_imm_of(w);
	cr_assert_eq((TRAMP & ~UINT64_C(0xfff)) + imm * 4096, page);
	assert_b(plan.tramp_code + 4, TRAMP + 4, ENTRY + 4);

	/* A trampoline below the page, 0x240 into its own */
	cr_assert_eq(plan_at(code, sizeof(code), ENTRY, STUB,
			     ENTRY - MIB + 0x10), 0, "%s", why);
	w = rd32(plan.tramp_code);
	imm = adr_imm_of(w);
	cr_assert_eq(((ENTRY - MIB + 0x10) & ~UINT64_C(0xfff)) + imm * 4096,
		     page);
}

/* adr: only within 1 MiB of the trampoline */
Test(patch, aarch64_adr_moves_only_nearby)
{
	static const unsigned char code[] = {
		0x80, 0x00, 0x00, 0x10,	/* adr x0, entry+0x10 */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};
	uint64_t near = ENTRY + 0x1000;
	uint32_t w;
	int64_t imm;

	use("aarch64");
	assert_refused(plan_of(code, sizeof(code)),
		       "entry+0: adr's target is out of reach of the trampoline");
	cr_assert_eq(plan_at(code, sizeof(code), ENTRY, STUB, near), 0,
		     "%s", why);
	w = rd32(plan.tramp_code);
	cr_assert_eq(w & 0x9f00001fu, 0x10000000u, "adr x0, not %08x", w);
	imm = adr_imm_of(w);
	cr_assert_eq(near + imm, ENTRY + 0x10);
}

/* bl keeps its target and comes back; b does not come back. */
Test(patch, aarch64_b_and_bl_keep_their_targets)
{
	static const unsigned char bl[] = {
		0x00, 0x04, 0x00, 0x94,	/* bl entry+0x1000 */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};
	static const unsigned char b[] = {
		0x00, 0x04, 0x00, 0x14,	/* b entry+0x1000 */
	};

	use("aarch64");
	cr_assert_eq(plan_of(bl, sizeof(bl)), 0, "%s", why);
	cr_assert_eq(plan.tramp_len, 8);
	cr_assert_eq(rd32(plan.tramp_code) & 0xfc000000u, 0x94000000u, "bl");
	cr_assert_eq(b_target(rd32(plan.tramp_code), TRAMP), ENTRY + 0x1000);
	assert_b(plan.tramp_code + 4, TRAMP + 4, ENTRY + 4);

	cr_assert_eq(plan_of(b, sizeof(b)), 0, "%s", why);
	cr_assert_eq(plan.tramp_len, 4, "no way back after a b");
	assert_b(plan.tramp_code, TRAMP, ENTRY + 0x1000);
}

Test(patch, aarch64_unmovable_instructions_are_refused)
{
	static const struct {
		unsigned char code[4];
		const char *why;
	} cases[] = {
		{ { 0xc0, 0x03, 0x5f, 0xd6 },	/* ret */
		  "entry+0: ret cannot be moved (a branch to a register)" },
		{ { 0x20, 0x02, 0x1f, 0xd6 },	/* br x17 */
		  "entry+0: br cannot be moved (a branch to a register)" },
		{ { 0x01, 0x00, 0x00, 0xd4 },	/* svc #0 */
		  "entry+0: svc cannot be moved (an exception)" },
		{ { 0x40, 0x00, 0x00, 0x58 },	/* ldr x0, entry+8 */
		  "entry+0: ldr cannot be moved by this version (a literal load)" },
	};

	static const unsigned char bc_eq[] = {
		0x50, 0x00, 0x00, 0x54,	/* bc.eq entry+8 (FEAT_HBC) */
	};
	int rc;

	use("aarch64");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_refused(plan_of(cases[i].code, sizeof(cases[i].code)),
			       cases[i].why);

	/* capstone 4 does not decode bc.cond; a later one may */
	rc = plan_of(bc_eq, sizeof(bc_eq));
	cr_assert_eq(rc, -EOPNOTSUPP, "rc %d, why \"%s\"", rc, why);
	cr_assert(!strcmp(why, "entry+0: cannot decode the instruction (54000050)") ||
		  !strcmp(why, "entry+0: bc.eq cannot be moved by this version (a consistent conditional branch)"),
		  "why \"%s\"", why);
}

/* ---- arm64 conditional branches, checked with capstone ----------------- */

/* @n words as little-endian bytes at @out */
static void le_words(unsigned char *out, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = w[i] >> (8 * j);
}

struct a64 {
	char mnemonic[32];
	uint8_t op_count;
	cs_arm64_op op[4];
};

/* The instruction at @p, as at @pc. */
static struct a64 decode_a64(const unsigned char *p, uint64_t pc)
{
	struct a64 d = { .op_count = 0 };
	cs_insn *insn = NULL;
	csh h;
	size_t n;

	cr_assert_eq(cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h),
		     CS_ERR_OK);
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	n = cs_disasm(h, p, 4, pc, 1, &insn);
	cr_assert_eq(n, 1, "%08x does not decode", rd32(p));
	snprintf(d.mnemonic, sizeof(d.mnemonic), "%s", insn->mnemonic);
	d.op_count = insn->detail->arm64.op_count;
	cr_assert(d.op_count >= 1 && d.op_count <= 4, "%s: %u operands",
		  d.mnemonic, d.op_count);
	memcpy(d.op, insn->detail->arm64.operands,
	       d.op_count * sizeof(d.op[0]));
	cs_free(insn, n);
	cs_close(&h);
	return d;
}

/* A branch's target: its last operand */
static uint64_t a64_target(const struct a64 *d)
{
	const cs_arm64_op *op = &d->op[d->op_count - 1];

	cr_assert_eq(op->type, ARM64_OP_IMM, "%s: no target", d->mnemonic);
	return (uint64_t)op->imm;
}

/*
 * The conditional branch @code, at plan.at, moved to tramp_code + @off:
 * @inverse with the same register and bit, which skips
 *   b <the original's target>
 * to
 *   b plan.at + 4
 * where the trampoline ends.  The original's target, for the caller.
 */
static uint64_t assert_moved_inverted(const unsigned char *code,
				      const char *inverse, unsigned int off)
{
	struct a64 o = decode_a64(code, plan.at);
	uint64_t pc = plan.tramp + off;
	struct a64 m = decode_a64(plan.tramp_code + off, pc);
	struct a64 b;

	cr_assert_eq(plan.tramp_len, off + 12);
	cr_assert_str_eq(m.mnemonic, inverse, "%s moved as %s, not %s",
			 o.mnemonic, m.mnemonic, inverse);
	cr_assert_eq(m.op_count, o.op_count);
	for (unsigned int i = 0; i + 1 < o.op_count; i++) {
		cr_assert_eq(m.op[i].type, o.op[i].type);
		if (o.op[i].type == ARM64_OP_REG)
			cr_assert_eq(m.op[i].reg, o.op[i].reg,
				     "operand %u: the same register", i);
		else
			cr_assert_eq(m.op[i].imm, o.op[i].imm,
				     "operand %u: the same bit", i);
	}
	cr_assert_eq(a64_target(&m), pc + 8, "%s skips one b", inverse);

	b = decode_a64(plan.tramp_code + off + 4, pc + 4);
	cr_assert_str_eq(b.mnemonic, "b");
	cr_assert_eq(a64_target(&b), a64_target(&o),
		     "taken: to %#llx, not %#llx",
		     (unsigned long long)a64_target(&b),
		     (unsigned long long)a64_target(&o));

	b = decode_a64(plan.tramp_code + off + 8, pc + 8);
	cr_assert_str_eq(b.mnemonic, "b");
	cr_assert_eq(a64_target(&b), plan.at + 4, "not taken: on at at + 4");
	return a64_target(&o);
}

/* Debian 12's glibc 2.36 free (libc6-arm64-cross), whole */
Test(patch, aarch64_glibc_free_cbz_moves_inverted)
{
	static const uint32_t words[] = {
		0xb4000880, 0xa9bc7bfd, 0x910003fd, 0xa9025bf5, 0xf00008b5,
		0x912562a1, 0xa90153f3, 0xd53bd054, 0xd1004013, 0x39408421,
		0xf9001bf7, 0x90000897, 0xf946e2f7, 0xb8776a96, 0x350006e1,
		0xf9400661, 0x36080241, 0xb0000882, 0x9106c040, 0xb9404803,
		0x350000c3, 0xf9400804, 0xd2a04003, 0xeb04003f, 0xfa438022,
		0x540004c9, 0xaa1303e0, 0x97ffee44, 0xb8376a96, 0xa94153f3,
		0xa9425bf5, 0xf9401bf7, 0xa8c47bfd, 0xd65f03c0, 0x90000880,
		0xf946b800, 0x8b000280, 0xf9400402, 0xb4000542, 0x912562b5,
		0x394086a0, 0x35000420, 0x36100241, 0xb0000880, 0xb26697e1,
		0xf940f000, 0xf100001f, 0xcb000be0, 0x9a811000, 0x8a130000,
		0xf9400000, 0xaa1303e1, 0x52800002, 0x97fff403, 0xb8376a96,
		0xa94153f3, 0xa9425bf5, 0xf9401bf7, 0xa8c47bfd, 0xd65f03c0,
		0xb0000880, 0x912cc000, 0x17fffff5, 0x927df021, 0xf9000801,
		0xd37ff821, 0xf900d841, 0x17ffffd7, 0xd65f03c0, 0x39400000,
		0xaa1303e0, 0xd9600000, 0xaa0003f3, 0x17ffffc6, 0x927df021,
		0x91004260, 0xd1004021, 0x9401686e, 0xf9400661, 0x17ffffdb,
		0x39404000, 0x35fffac0, 0x97fffb99, 0xf9400661, 0x17ffffd3,
	};
	unsigned char code[sizeof(words)];

	use("aarch64");
	le_words(code, words, sizeof(words) / sizeof(words[0]));
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY);
	assert_word(plan.old, 0xb4000880);	/* cbz x0, entry+0x110 */
	assert_b(plan.new, ENTRY, STUB);
	cr_assert_eq(plan.busy_hi, ENTRY);
	assert_word(plan.tramp_code, 0xb5000040);	/* cbnz x0, #8 */
	cr_assert_eq(assert_moved_inverted(code, "cbnz", 0), ENTRY + 0x110);
	assert_word(code + 0x110, 0xd65f03c0);	/* ret, where free(NULL) goes */
}

Test(patch, aarch64_cbnz_w_moves_inverted)
{
	static const uint32_t words[] = {
		0x35000201,	/* cbnz w1, entry+0x40 */
		0xd65f03c0,	/* ret */
	};
	unsigned char code[sizeof(words)];

	use("aarch64");
	le_words(code, words, 2);
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_word(plan.tramp_code, 0x34000041);	/* cbz w1, #8 */
	cr_assert_eq(assert_moved_inverted(code, "cbz", 0), ENTRY + 0x40);
}

/* Bit 40: b5 (bit 31) set, b40 = 8 */
Test(patch, aarch64_tbz_high_bit_moves_inverted)
{
	static const uint32_t words[] = {
		0xb6400803,	/* tbz x3, #40, entry+0x100 */
		0xd65f03c0,	/* ret */
	};
	unsigned char code[sizeof(words)];
	struct a64 m;

	use("aarch64");
	le_words(code, words, 2);
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_word(plan.tramp_code, 0xb7400043);	/* tbnz x3, #40, #8 */
	cr_assert_eq(assert_moved_inverted(code, "tbnz", 0), ENTRY + 0x100);
	m = decode_a64(plan.tramp_code, TRAMP);
	cr_assert_eq(m.op[1].imm, 40);
}

/* After a landing pad, to a target before the function (a .cold part) */
Test(patch, aarch64_tbnz_after_paciasp_moves_inverted)
{
	static const uint32_t words[] = {
		0xd503233f,	/* paciasp */
		0x372fff02,	/* tbnz w2, #5, entry+4-0x20 */
		0xd50323bf,	/* autiasp */
		0xd65f03c0,	/* ret */
	};
	unsigned char code[sizeof(words)];

	use("aarch64");
	le_words(code, words, 4);
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	cr_assert_eq(plan.at, ENTRY + 4);
	assert_b(plan.new, ENTRY + 4, STUB);
	assert_word(plan.tramp_code, 0xd503233f);
	assert_word(plan.tramp_code + 4, 0x36280042);	/* tbz w2, #5, #8 */
	cr_assert_eq(assert_moved_inverted(code + 4, "tbz", 4),
		     ENTRY + 4 - 0x20);
}

Test(patch, aarch64_b_ne_moves_inverted)
{
	static const uint32_t words[] = {
		0x54000201,	/* b.ne entry+0x40 */
		0xd65f03c0,	/* ret */
	};
	unsigned char code[sizeof(words)];

	use("aarch64");
	le_words(code, words, 2);
	cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
	assert_word(plan.tramp_code, 0x54000040);	/* b.eq #8 */
	cr_assert_eq(assert_moved_inverted(code, "b.eq", 0), ENTRY + 0x40);
}

/* b.al and b.nv are always taken: a b, no way back */
Test(patch, aarch64_b_al_and_b_nv_move_as_b)
{
	static const uint32_t words[] = {
		0x5400020e,	/* b.al entry+0x40 */
		0x5400020f,	/* b.nv entry+0x40 */
	};
	unsigned char code[4];

	use("aarch64");
	for (size_t i = 0; i < 2; i++) {
		le_words(code, &words[i], 1);
		cr_assert_eq(plan_of(code, sizeof(code)), 0, "%s", why);
		cr_assert_eq(plan.tramp_len, 4);
		assert_b(plan.tramp_code, TRAMP, ENTRY + 0x40);
	}
}

/*
 * The farthest targets (imm19: 1 MiB - 4 up, 1 MiB down) from the
 * farthest trampolines still fit the b's 128 MiB: reach leaves the
 * margin.
 */
Test(patch, aarch64_conditional_branches_reach_from_the_far_trampolines)
{
	static const struct {
		uint32_t w;
		int64_t to;	/* from the entry */
		const char *inverse;
	} cases[] = {
		{ 0xb47fffe0, 0xffffc, "cbnz" },	/* cbz x0, +1 MiB - 4 */
		{ 0xb4800000, -0x100000, "cbnz" },	/* cbz x0, -1 MiB */
		{ 0x547fffe1, 0xffffc, "b.eq" },	/* b.ne +1 MiB - 4 */
		{ 0x54800001, -0x100000, "b.eq" },	/* b.ne -1 MiB */
		{ 0x3703ffe0, 0x7ffc, "tbz" },		/* tbnz w0, #0, +32 KiB - 4 */
		{ 0x37040000, -0x8000, "tbz" },		/* tbnz w0, #0, -32 KiB */
	};
	uint64_t reach;
	unsigned char code[4];

	use("aarch64");
	reach = P->reach;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* the trampoline as far as it may be the other way */
		uint64_t tramp = cases[i].to > 0 ? ENTRY - reach
						 : ENTRY + reach;

		le_words(code, &cases[i].w, 1);
		cr_assert_eq(plan_at(code, sizeof(code), ENTRY, STUB, tramp),
			     0, "%08x: %s", cases[i].w, why);
		cr_assert_eq(assert_moved_inverted(code, cases[i].inverse, 0),
			     ENTRY + (uint64_t)cases[i].to);
	}
}

Test(patch, aarch64_short_bodies_and_reach_are_checked)
{
	static const unsigned char pad_only[] = {
		0x5f, 0x24, 0x03, 0xd5,	/* bti c */
	};
	static const unsigned char code[] = {
		0xfd, 0x7b, 0xbf, 0xa9,	/* stp x29, x30, [sp, #-16]! */
		0xc0, 0x03, 0x5f, 0xd6,	/* ret */
	};
	uint64_t reach;

	use("aarch64");
	reach = P->reach;
	assert_refused(plan_of(code, 2),
		       "the function is 2 bytes, shorter than an instruction");
	assert_refused(plan_of(pad_only, sizeof(pad_only)),
		       "the function is 4 bytes: nothing after its landing pad");
	cr_assert_gt(reach, 64 * MIB);
	cr_assert_lt(reach, 128 * MIB, "b's imm26, with a margin");
	assert_refused(plan_at(code, sizeof(code), ENTRY, ENTRY + 200 * MIB,
			       TRAMP),
		       "the stub is out of b reach of the entry");
	assert_refused(plan_at(code, sizeof(code), ENTRY, STUB,
			       ENTRY - 200 * MIB),
		       "the trampoline is out of reach of the entry");
	assert_refused(plan_at(code, sizeof(code), ENTRY + 2, STUB, TRAMP),
		       "the entry, stub or trampoline is not 4-byte aligned");
	cr_assert_eq(plan_at(code, sizeof(code), ENTRY, ENTRY + reach,
			     ENTRY - reach), 0, "%s", why);
	assert_b(plan.new, ENTRY, ENTRY + reach);
	assert_b(plan.tramp_code + 4, ENTRY - reach + 4, ENTRY + 4);
}

/* memsnap patches with the planner of the CPU it runs on: the ELF
 * machine of its own executable. */
Test(patch, native_planner_is_this_cpu)
{
	Elf64_Ehdr eh;
	FILE *f = fopen("/proc/self/exe", "rb");

	cr_assert_not_null(f);
	cr_assert_eq(fread(&eh, sizeof(eh), 1, f), 1u);
	fclose(f);
	cr_assert_not_null(patch_native());
	cr_assert_eq(patch_native()->e_machine, eh.e_machine, "%s",
		     patch_native()->cpu);
	cr_assert_null(patch_planner_of(EM_386));
}

/* The absolute jumps of the sampler's mirrors: x86-64's jmp *0(%rip)
 * with the address after it, AArch64's ldr x16, #8; br x16 with the
 * address after them; the rest zero. */
Test(patch, absolute_jumps_of_both_cpus)
{
	static const unsigned char x86[PATCH_JUMP_LEN] = {
		0xff, 0x25, 0, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33,
		0x22, 0x11, 0, 0 };
	static const unsigned char a64[PATCH_JUMP_LEN] = {
		0x50, 0x00, 0x00, 0x58, 0x00, 0x02, 0x1f, 0xd6, 0x88, 0x77,
		0x66, 0x55, 0x44, 0x33, 0x22, 0x11 };
	unsigned char code[PATCH_JUMP_LEN];

	memset(code, 0xcc, sizeof(code));
	patch_planner_x86_64.jump(code, 0x1122334455667788ull);
	cr_assert_arr_eq(code, x86, sizeof(code));
	memset(code, 0xcc, sizeof(code));
	patch_planner_aarch64.jump(code, 0x1122334455667788ull);
	cr_assert_arr_eq(code, a64, sizeof(code));
}
