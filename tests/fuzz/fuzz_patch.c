/*
 * Fuzz the entry-point patch planners (injector/patch.h), on any
 * machine: injector/arch/x86_64-patch.c as fuzz-patch, aarch64-patch.c
 * as fuzz-patch-aarch64 (built with -DFUZZ_PLANNER_AARCH64).
 * `prof on --sampler` reads the first bytes and the body of the
 * target's malloc, free, ... from the target and plans a
 * jump over them and a trampoline: a hostile target chooses every
 * byte.  The input is the function body; each one is planned at the
 * usual layout and at one more picked by its length (the hook near, the
 * trampoline at the edge of reach, the entry low), and its calls
 * listed.  What must hold:
 *
 *   - the planner's plan and calls never read past the body: the
 *     input is copied to end where an inaccessible page begins, so that
 *     a read past it faults also inside capstone, which is not built
 *     with AddressSanitizer;
 *   - a refusal is -EOPNOTSUPP with one line in why, and changes nothing
 *     in the caller's plan;
 *   - a plan covers no more bytes than given (busy range, old bytes), its
 *     old bytes are the body's, its new bytes jump to the stub or the
 *     hook, and the stub jumps to the hook;
 *   - the trampoline decodes back (by capstone, not by the planner's
 *     tables), instruction for instruction: what moves as it is, the
 *     same rip-relative address (x86-64) or adr/adrp address (arm64),
 *     the same branch target (a conditional branch on arm64 as its
 *     inverse over a b), then the jump back to the first byte not
 *     moved, unless the last moved instruction does not come back
 *     (x86-64: what follows a jmp moves too, dead, and is relocated
 *     all the same), and nothing else;
 *   - x86-64: no branch of the body lands strictly inside the bytes
 *     the jump covers, and the whole body decodes (the planner's sweep
 *     refuses otherwise);
 *   - its calls marks exactly the targets of the body's direct
 *     branches as capstone sees them (its own entry excepted); on
 *     x86-64 up to the first byte that does not decode, and
 *     -EOPNOTSUPP where the sweep stopped early.
 */
#include "injector/patch.h"

#include "tests/fuzz/fuzz.h"

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* A PIE's text, its stub and trampoline mapping near it, a hook in a
 * library (far) or in the sampler mapped near the program. */
#define ENTRY UINT64_C(0x555555561230)
#define FAR_HOOK UINT64_C(0x7f1234567000)

struct layout {
	uint64_t entry, stub, tramp, hook;
};

/* Targets for the planner's calls: the first ones the sweep finds. */
#define NTARGETS 8

/* The planner linked in: arm64's with FUZZ_PLANNER_AARCH64, else
 * x86-64's. */
#if defined(FUZZ_PLANNER_AARCH64)
#define PLANNER patch_planner_aarch64
#include "tests/fuzz/patch_aarch64.h"
#else
#define PLANNER patch_planner_x86_64
#include "tests/fuzz/patch_x86_64.h"
#endif

#define NLAYOUTS (sizeof(layouts) / sizeof(layouts[0]))

FUZZ_NOCOV
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	planner_init();
	return 0;
}

FUZZ_NOCOV
static void check_why(const char *why, size_t size)
{
	size_t n = strnlen(why, size);

	FUZZ_CHECK(n > 0 && n < size);
	FUZZ_CHECK(!memchr(why, '\n', n));
}

/* The plan's fields that do not depend on the architecture. */
FUZZ_NOCOV
static void check_plan_common(const struct patch_plan *p, size_t size,
			      const unsigned char *code,
			      const struct layout *l)
{
	FUZZ_CHECK(p->entry == l->entry);
	FUZZ_CHECK(p->at >= l->entry && p->at - l->entry < size);
	FUZZ_CHECK(p->len > 0 && p->len <= PATCH_MAX);
	FUZZ_CHECK(p->at - l->entry + p->len <= size);
	FUZZ_CHECK(!memcmp(p->old, code + (p->at - l->entry), p->len));
	FUZZ_CHECK(p->busy_lo <= p->busy_hi);
	FUZZ_CHECK(p->busy_lo >= l->entry && p->busy_hi - l->entry <= size);
	FUZZ_CHECK(p->stub == l->stub && p->tramp == l->tramp);
	FUZZ_CHECK(p->stub_len <= PATCH_STUB_LEN);
	FUZZ_CHECK(p->tramp_len > 0 && p->tramp_len <= PATCH_TRAMP_MAX);
}

FUZZ_NOCOV
static void plan_one(const unsigned char *code, size_t size,
		     const struct layout *l)
{
	struct patch_plan p, before;
	char why[256];
	int rc;

	/* a pattern the planner would not write: must stay on refusal */
	memset(&p, 0xa5, sizeof(p));
	memcpy(&before, &p, sizeof(p));
	why[0] = '\0';
	rc = PLANNER.plan(code, size, l->entry, l->stub, l->tramp, l->hook, &p,
			  why, sizeof(why));
	if (rc) {
		FUZZ_CHECK(rc == -EOPNOTSUPP || rc == -ENOMEM);
		FUZZ_CHECK(!memcmp(&p, &before, sizeof(p)));
		if (rc == -EOPNOTSUPP)
			check_why(why, sizeof(why));
		return;
	}
	check_plan_common(&p, size, code, l);
	check_plan_arch(code, size, &p, l);
}

/* @data copied so that it ends where an inaccessible page begins. */
FUZZ_NOCOV
static unsigned char *at_page_end(const uint8_t *data, size_t size)
{
	/* sampler/direct.c's BODY_MAX */
	static const size_t room = 64 * 1024;
	static unsigned char *map;
	size_t guard = (size_t)sysconf(_SC_PAGESIZE);

	if (!map) {
		map = mmap(NULL, room + guard, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FUZZ_CHECK(map != MAP_FAILED);
		FUZZ_CHECK(!mprotect(map + room, guard, PROT_NONE));
	}
	memcpy(map + room - size, data, size);
	return map + room - size;
}

FUZZ_NOCOV
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *code;

	if (size > 64 * 1024)
		return 0;	/* longer bodies are not read */
	code = at_page_end(data, size);
	plan_one(code, size, &layouts[0]);
	plan_one(code, size, &layouts[1 + size % (NLAYOUTS - 1)]);
	check_calls(code, size, ENTRY);
	return 0;
}
