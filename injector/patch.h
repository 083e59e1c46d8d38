#ifndef MEMSNAP_INJECTOR_PATCH_H
#define MEMSNAP_INJECTOR_PATCH_H

/*
 * Entry-point patches, for an allocator linked into the program: the
 * program calls its malloc directly, through no GOT slot, so the only
 * place to divert those calls is the function itself.
 *
 *   entry:  jump to stub            (written over the first instruction(s))
 *   stub:   on to the hook          (arm64: authenticate LR first where the
 *                                    entry's landing pad signed it)
 *   tramp:  the displaced instructions, moved and fixed up, then a jump
 *           back into the function: what the hook calls for the original
 *
 * The plan only (a planner per CPU, injector/arch/CPU-patch.c): writing
 * it is injector/world.c's, with every thread of the process stopped,
 * since the write is not atomic for a thread executing those bytes.
 *
 * The planners are pure functions over capstone, which decodes either
 * CPU's code: both are linked on every CPU, as elfutils links every
 * backend, and one is picked by the ELF machine.  memsnap patches only
 * processes of its own CPU (patch_native()); the tests and fuzzers
 * plan for both wherever they run.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PATCH_MAX 16	    /* bytes changed at the entry, at most */
#define PATCH_STUB_LEN 32   /* bytes of the stub, at most */
#define PATCH_TRAMP_MAX 128 /* bytes of the trampoline, at most */

struct patch_plan {
	uint64_t entry;
	uint64_t at;		/* the first byte changed: the entry, or
				   after its landing pad (arm64 BTI/PAC) */
	unsigned int len;	/* bytes changed at @at */
	unsigned char old[PATCH_MAX];	/* what they hold now */
	unsigned char new[PATCH_MAX];	/* the jump to the stub */
	/* No thread may be stopped with its pc, or a pc saved in a
	 * signal frame on its stack, strictly inside (busy_lo, busy_hi):
	 * it would resume in the middle of the new jump.  busy_lo ==
	 * busy_hi: one instruction is replaced, no pc can be inside. */
	uint64_t busy_lo, busy_hi;
	uint64_t stub;		/* where stub[] goes */
	unsigned char stub_code[PATCH_STUB_LEN];
	unsigned int stub_len;	/* 0: the entry jumps to the hook itself */
	uint64_t tramp;		/* where tramp_code[] goes: the original */
	unsigned char tramp_code[PATCH_TRAMP_MAX];
	unsigned int tramp_len;
};

struct patch_planner {
	const char *cpu;	/* "x86_64", "aarch64" */
	unsigned int e_machine;	/* EM_X86_64, EM_AARCH64 */
	/*
	 * Plan the patch of the function at @entry, whose first @size
	 * bytes (its whole body, from its symbol's size) are @code as read
	 * from the target, to reach @hook through a stub at @stub and to
	 * keep the original callable at @tramp.  @stub and @tramp must lie
	 * within @reach of @entry (one mapping near the program).
	 *
	 * 0 and *@p filled, or -EOPNOTSUPP with one lowercase line in
	 * @why: an instruction that cannot be moved (a return, a system
	 * call, a branch whose moved form is out of reach, a form this
	 * planner does not know), a branch of the function back into the
	 * bytes the jump covers, a body shorter than the jump, the stub or
	 * trampoline out of reach.  Never reads past @code + @size.
	 */
	int (*plan)(const unsigned char *code, size_t size, uint64_t entry,
		    uint64_t stub, uint64_t tramp, uint64_t hook,
		    struct patch_plan *p, char *why, size_t why_size);
	/*
	 * Which of @n functions at @targets the body @code of @size bytes
	 * at @entry calls or jumps to directly (its own entry excepted):
	 * @hit[j] set for each.  An allocator calls its own entry points
	 * (tcmalloc's valloc jumps to its memalign), and through a patched
	 * entry the bytes would count twice: such functions get the hooks
	 * that mark the thread.  0, or -EOPNOTSUPP when the body cannot be
	 * read through (then assume it calls them all).
	 */
	int (*calls)(const unsigned char *code, size_t size, uint64_t entry,
		     const uint64_t *targets, size_t n, bool *hit);
	/* How far a stub or trampoline may be from the functions it
	 * serves. */
	uint64_t reach;
	/* An absolute jump to @to from anywhere, into @code
	 * (PATCH_JUMP_LEN bytes, the rest zero), using no register the
	 * caller may expect kept (x86-64: none; AArch64: x16, IP0): the
	 * sampler's mirrors. */
	void (*jump)(unsigned char *code, uint64_t to);
};

#define PATCH_JUMP_LEN 16

extern const struct patch_planner patch_planner_x86_64;
extern const struct patch_planner patch_planner_aarch64;

/* The planner for code of ELF machine @e_machine, or NULL. */
const struct patch_planner *patch_planner_of(unsigned int e_machine);

/* The planner for this build's CPU: the one memsnap patches with. */
const struct patch_planner *patch_native(void);

/* For the planners (injector/patch.c): -EOPNOTSUPP, with @fmt's line
 * in @why; the distance between two addresses either way; little-endian
 * words in and out of instruction bytes. */
int patch_refuse(char *why, size_t why_size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
uint64_t patch_distance(uint64_t a, uint64_t b);
void patch_put32(unsigned char *p, uint32_t v);
void patch_put64(unsigned char *p, uint64_t v);
uint32_t patch_get32(const unsigned char *p);

#endif
