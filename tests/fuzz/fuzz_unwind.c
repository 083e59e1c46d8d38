/*
 * Fuzz the unwinder (injector/unwind/core.h) as it runs in its sandbox:
 * registers, a stack copy and the memory of one object are the input,
 * so that every byte libunwind and memsnap's checks read (ELF and
 * program headers, the PT_GNU_EH_FRAME search table or the .eh_frame
 * records, FDEs, CIEs, CFA programs and expressions, stack words) is
 * the fuzzer's.
 *
 * Input:
 *
 *   struct head    the sampler's registers (pc and sp as offsets into
 *                  the image and the stack copy), flags, stack length
 *   stack          stack_len bytes (at most STACK_MAX), at STACK
 *   image          the rest: an object's memory from its ELF header on,
 *                  mapped r-x at BASE (a small ELF file, whose segments
 *                  sit at their file offsets, is a good seed)
 *
 * flags bit 0: unwind as a stopped thread (any page of the image, the
 * stack through pages too) instead of a saved one.  bit 1: the object
 * comes with an .eh_frame (struct unwind_ehframe) from image offset
 * flags >> 8 (modulo its length) to its end, which the unwinder walks
 * into a table where the program headers show no PT_GNU_EH_FRAME.
 * bit 2: a saved stack's frames are judged for CFI (the unwind made
 * before a thread's stop).  Every unwind marks the words of the copy it
 * reads.
 *
 * What must hold: no crash, no sanitizer report (memsnap's code is
 * instrumented; libunwind is the system's unless bench/fuzz.sh built an
 * instrumented one), at most @max frames, reads within the budget, no
 * word marked read past the copy.
 */
#include "injector/unwind/core.h"
#include "sampler/layout.h"

#include "tests/fuzz/fuzz.h"

#include <string.h>

#define BASE 0x555555554000ull
#define STACK 0x7ffc00000000ull
#define STACK_MAX 4096u
#define FRAMES 128
#define BUDGET 20000

/* a record's registers, as the sampler numbers them */
static const unsigned char reg_nums[SAMPLER_REGS_SAVED] = SAMPLER_REG_NUMS;

struct head {
	uint64_t regs[SAMPLER_NREGS];
	uint32_t flags;
	uint32_t stack_len;
};

static const unsigned char *image, *stack;
static size_t image_len, stack_len;
static struct unwind_core *core;

/* The page at @addr of the image or (a stopped thread) the stack. */
static int page(void *arg, uint64_t addr, void *buf, bool index)
{
	const unsigned char *from = NULL;
	size_t len = 0, off;

	(void)arg;
	(void)index;
	if (addr >= BASE && addr - BASE < image_len) {
		off = (size_t)(addr - BASE);
		from = image + off;
		len = image_len - off;
	} else if (addr >= STACK && addr - STACK < stack_len) {
		off = (size_t)(addr - STACK);
		from = stack + off;
		len = stack_len - off;
	} else {
		return -1;
	}
	if (len > UNWIND_PAGE)
		len = UNWIND_PAGE;
	memset(buf, 0, UNWIND_PAGE);
	memcpy(buf, from, len);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	core = unwind_core_new(page, NULL);
	if (!core)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct head h;
	struct mapline maps[2];
	struct unwind_ehframe eh = { .object = BASE };
	struct unwind_job j = { .budget = BUDGET };
	uint64_t touched[STACK_MAX / 64 + 1] = { 0 };
	size_t k;
	uint64_t pcs[FRAMES];
	unsigned long reads;
	size_t span;
	bool whole;
	int n;

	if (size < sizeof(h) + 64)
		return 0;
	memcpy(&h, data, sizeof(h));
	stack_len = h.stack_len % (STACK_MAX + 1);
	if (size - sizeof(h) < stack_len + 64)
		return 0;
	stack = data + sizeof(h);
	image = stack + stack_len;
	image_len = size - sizeof(h) - stack_len;
	span = (image_len + UNWIND_PAGE - 1) & ~(size_t)(UNWIND_PAGE - 1);

	/* the object, and the stack as a stopped thread's maps show it */
	maps[0] = (struct mapline){ .start = BASE, .end = BASE + span,
				    .inode = 1, .dev_major = 8,
				    .perms = "r-xp", .has_path = true };
	maps[1] = (struct mapline){ .start = STACK, .end = STACK + STACK_MAX,
				    .perms = "rw-p" };
	if (h.flags & 2) {
		size_t off = (h.flags >> 8) % image_len;

		eh.addr = BASE + off;
		eh.len = image_len - off;
	}
	FUZZ_CHECK(!unwind_core_maps(core, maps, 2, NULL, &eh,
				     h.flags & 2 ? 1 : 0));

	h.regs[SAMPLER_REG_PC] = BASE + h.regs[SAMPLER_REG_PC] % image_len;
	h.regs[SAMPLER_REG_SP] = STACK + (stack_len ? h.regs[SAMPLER_REG_SP] %
							      stack_len : 0);
	unwind_regs_numbered(h.regs, reg_nums, SAMPLER_REGS_SAVED, &j.regs);
	j.saved = !(h.flags & 1);
	j.cfi = h.flags & 4;
	j.touched = touched;
	if (j.saved) {
		j.stack_lo = STACK;
		j.stack = stack;
		j.stack_len = stack_len;
	}
	n = unwind_core_run(core, &j, pcs, FRAMES, &whole, &reads);
	FUZZ_CHECK(n <= FRAMES);
	FUZZ_CHECK(reads <= BUDGET + 1);
	FUZZ_CHECK(!whole || n > 0);
	for (k = (stack_len + 7) / 8; k < sizeof(touched) * 8; k++)
		FUZZ_CHECK(!(touched[k / 64] >> (k % 64) & 1));
	return 0;
}
