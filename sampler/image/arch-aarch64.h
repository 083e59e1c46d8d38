/*
 * AArch64 for the sampler's in-target code (sampler/image/records.c, included
 * through sampler/image/image.mk): the thread pointer, the registers an
 * unwinder starts from, and a raw system call.
 */

static inline uint64_t thread_pointer(void)
{
	uint64_t tp;

	__asm__("mrs %0, tpidr_el0" : "=r"(tp));
	return tp;
}

/* pc, sp, x29, x30, x19-x28 at one instruction (sampler/layout.h). */
_Static_assert(SAMPLER_REG_PC == 0 && SAMPLER_REG_SP == 1 &&
		       SAMPLER_REG_X29 == 2 && SAMPLER_REG_X30 == 3 &&
		       SAMPLER_REG_X19 == 4 && SAMPLER_REG_X28 == 13 &&
		       SAMPLER_REGS_SAVED == 14,
	       "capture_regs() stores the registers in this order");

static inline __attribute__((always_inline)) void capture_regs(uint64_t *g)
{
	__asm__ volatile("adr x9, .\n\t"
			 "mov x10, sp\n\t"
			 "stp x9, x10, [%0]\n\t"
			 "stp x29, x30, [%0, #16]\n\t"
			 "stp x19, x20, [%0, #32]\n\t"
			 "stp x21, x22, [%0, #48]\n\t"
			 "stp x23, x24, [%0, #64]\n\t"
			 "stp x25, x26, [%0, #80]\n\t"
			 "stp x27, x28, [%0, #96]"
			 :
			 : "r"(g)
			 : "x9", "x10", "memory");
}

/* Copy @n 8-byte words from @from to @to (a stack's copy: plain loads
 * the caller knows are mapped), two at a time where it can. */
static inline void copy_words(void *to, const void *from, uint64_t n)
{
	uint64_t *d = to;
	const uint64_t *s = from;

	for (; n >= 2; n -= 2, d += 2, s += 2) {
		uint64_t a = s[0], b = s[1];

		d[0] = a;
		d[1] = b;
	}
	if (n)
		d[0] = s[0];
}

#define SYS_getpid_nr 172
#define SYS_mprotect_nr 226
#define SYS_madvise_nr 233
#define SYS_process_vm_readv_nr 270
#define SYS_clock_gettime_nr 113

static inline long raw_syscall6(long nr, long a, long b, long c, long d,
				long e, long f)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc #0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

/* The relocations of a GOT slot (<elf.h>). */
#define SAMPLER_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define SAMPLER_R_GLOB_DAT R_AARCH64_GLOB_DAT
