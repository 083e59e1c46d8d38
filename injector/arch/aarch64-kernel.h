#ifndef MEMSNAP_INJECTOR_ARCH_AARCH64_KERNEL_H
#define MEMSNAP_INJECTOR_ARCH_AARCH64_KERNEL_H

/*
 * The kernel's AArch64 layouts the call engine (aarch64.c) reads and
 * writes: the ptrace regsets and the signal frame, spelled out here as
 * the uapi headers give them (checked by size and offset), so that no
 * libc header's version of them is relied on.
 */
#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#ifndef NT_ARM_SYSTEM_CALL
#define NT_ARM_SYSTEM_CALL 0x404
#endif
#ifndef NT_ARM_SVE
#define NT_ARM_SVE 0x405
#endif
#ifndef NT_ARM_GCS
#define NT_ARM_GCS 0x410
#endif
#define GCS_ENABLE 1ull		/* PR_SHADOW_STACK_ENABLE */

#define SVE_PT_REGS_SVE 1	/* user_sve_header.flags: SVE, not FPSIMD */
#define SVE_MAX (64 * 1024)
#ifndef SVE_MAGIC
#define SVE_MAGIC 0x53564501
#endif
#ifndef FPSIMD_MAGIC
#define FPSIMD_MAGIC 0x46508001
#endif
#define PSR_BTYPE_MASK 0x00000c00ull
#define PSR_SS 0x00200000ull

struct k_regs {			/* struct user_pt_regs */
	uint64_t x[31];
	uint64_t sp, pc, pstate;
};

struct k_fpsimd {		/* struct user_fpsimd_state */
	__uint128_t v[32];
	uint32_t fpsr, fpcr;
	uint32_t reserved[2];
};

struct k_sve_header {		/* struct user_sve_header */
	uint32_t size, max_size;
	uint16_t vl, max_vl, flags, reserved;
};

/* The kernel's arm64 signal frame (uapi asm/sigcontext.h, ucontext.h). */
struct k_ctx_head {
	uint32_t magic, size;
};

struct k_fpsimd_context {
	struct k_ctx_head head;
	uint32_t fpsr, fpcr;
	__uint128_t v[32];
};

struct k_sigcontext {
	uint64_t fault_address;
	uint64_t regs[31];
	uint64_t sp, pc, pstate;
	uint8_t reserved[4096] __attribute__((aligned(16)));
};

struct k_stack {
	uint64_t ss_sp;
	int32_t ss_flags;
	int32_t pad;
	uint64_t ss_size;
};

struct k_ucontext {
	uint64_t uc_flags;
	uint64_t uc_link;
	struct k_stack uc_stack;
	uint64_t uc_sigmask;
	uint8_t unused[1024 / 8 - 8];
	struct k_sigcontext uc_mcontext;
};

struct k_rt_sigframe {
	uint8_t info[128];
	struct k_ucontext uc;
};

_Static_assert(sizeof(struct k_regs) == 272, "user_pt_regs");
_Static_assert(sizeof(struct k_fpsimd) == 528, "user_fpsimd_state");
_Static_assert(sizeof(struct k_fpsimd_context) == 528, "fpsimd_context");
_Static_assert(offsetof(struct k_sigcontext, reserved) == 288, "sigcontext");
_Static_assert(offsetof(struct k_ucontext, uc_mcontext) == 176, "ucontext");
_Static_assert(offsetof(struct k_rt_sigframe, uc) == 128, "rt_sigframe");
_Static_assert(sizeof(struct k_rt_sigframe) % 16 == 0, "rt_sigframe");

#endif
