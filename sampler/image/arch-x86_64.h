/*
 * x86-64 for the sampler's in-target code (sampler/image/records.c, included
 * through sampler/image/image.mk): the thread pointer, the registers an
 * unwinder starts from, and a raw system call.
 */

/* %fs:0 holds the thread pointer itself (the TCB's self pointer). */
static inline uint64_t thread_pointer(void)
{
	uint64_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return tp;
}

/*
 * pc, sp, rbp, rbx, r12-r15 at one instruction (sampler/layout.h): the
 * pc is the instruction after the lea, and every register holds there
 * what the CFI of the surrounding function says it does.
 */
_Static_assert(SAMPLER_REG_PC == 0 && SAMPLER_REG_SP == 1 &&
		       SAMPLER_REG_RBP == 2 && SAMPLER_REG_RBX == 3 &&
		       SAMPLER_REG_R12 == 4 && SAMPLER_REG_R13 == 5 &&
		       SAMPLER_REG_R14 == 6 && SAMPLER_REG_R15 == 7 &&
		       SAMPLER_REGS_SAVED == 8,
	       "capture_regs() stores the registers in this order");

static inline __attribute__((always_inline)) void capture_regs(uint64_t *g)
{
	__asm__ volatile("lea 0(%%rip), %%rax\n\t"
			 "mov %%rax, 0(%0)\n\t"
			 "mov %%rsp, 8(%0)\n\t"
			 "mov %%rbp, 16(%0)\n\t"
			 "mov %%rbx, 24(%0)\n\t"
			 "mov %%r12, 32(%0)\n\t"
			 "mov %%r13, 40(%0)\n\t"
			 "mov %%r14, 48(%0)\n\t"
			 "mov %%r15, 56(%0)"
			 :
			 : "r"(g)
			 : "rax", "memory");
}

/* Copy @n 8-byte words from @from to @to (a stack's copy: plain loads
 * the caller knows are mapped). */
static inline void copy_words(void *to, const void *from, uint64_t n)
{
	__asm__ volatile("rep movsq"
			 : "+D"(to), "+S"(from), "+c"(n)
			 :
			 : "memory");
}

#define SYS_getpid_nr 39
#define SYS_mprotect_nr 10
#define SYS_madvise_nr 28
#define SYS_process_vm_readv_nr 310
#define SYS_clock_gettime_nr 228

static inline long raw_syscall6(long nr, long a, long b, long c, long d,
				long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* The relocations of a GOT slot (<elf.h>). */
#define SAMPLER_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define SAMPLER_R_GLOB_DAT R_X86_64_GLOB_DAT
