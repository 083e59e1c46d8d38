/*
 * The code memsnap copies into the target's stub page (see
 * injector/inject.c and injector/arch/aarch64.c): the return stub, then
 * the helpers.  Data in memsnap (.rodata, never executed here),
 * position-independent; every offset memsnap needs is a label difference
 * the assembler computes: arch_stub_len, arch_stub_done_pc,
 * arch_helpers_len and arch_helper_off[] (in the order of enum
 * ARCH_HELPER_* in injector/arch.h).  Each helper starts with `bti c`:
 * the target calls it through a register (a callback, a chain).
 */

/* struct restore_block in injector/arch/aarch64.c */
#define RB_ERRNO_ADDR	0
#define RB_ERRNO_VAL	8
#define RB_SIGMASK	16
#define RB_X7		24
#define RB_SIZE		32

/* struct inject_chain (INJECT_HELPER_CHAIN) */
#define CH_FN		0
#define CH_A0		8
#define CH_A1		16
#define CH_A2		24
#define CH_NZ_FN	32
#define CH_NZ_A0	40
#define CH_Z_FN		48
#define CH_Z_A0		56
#define CH_T_A1		64
#define CH_FLAGS	72
#define CH_ABANDONED	80
#define CH_RET		88
#define CHAIN_ALWAYS_BIT	0
#define CHAIN_NZ_GETS_RET_BIT	1

#define SYS_write		64
#define SYS_rt_sigprocmask	135
#define SYS_rt_sigreturn	139
#define SIG_SETMASK		2
#define EINTR			4

	.section .rodata
	.balign 16

/*
 * The stub, entered by the callee's `ret` (x30) with sp = B, the
 * restore block, and x0 = the result.  It keeps the result in x19 (where
 * memsnap reads it), puts errno back, then the signal mask with
 * rt_sigprocmask: memsnap's completion stop, where memsnap restores the
 * thread itself.  Gone memsnap, the stub goes on: rt_sigreturn on the
 * signal frame above the block brings back every register, the FP
 * state and the mask.  x7 is the thread's at the `svc`: the kernel puts
 * that value back after a syscall stop, whatever memsnap writes.
 */
	.globl arch_stub_code
arch_stub_code:
	mov	x19, x0
	ldr	x1, [sp, #RB_ERRNO_ADDR]
	cbz	x1, 1f
	ldr	w2, [sp, #RB_ERRNO_VAL]
	str	w2, [x1]
1:	mov	x0, #SIG_SETMASK
	add	x1, sp, #RB_SIGMASK
	mov	x2, #0
	mov	x3, #8
	ldr	x7, [sp, #RB_X7]
	mov	x8, #SYS_rt_sigprocmask
	svc	#0
stub_done:
	add	sp, sp, #RB_SIZE
	mov	x8, #SYS_rt_sigreturn
	svc	#0
	udf	#0
stub_end:

	.balign 16
	.globl arch_helpers_code
arch_helpers_code:

/* long syscall(nr, a1, a2, a3, a4, a5): the raw result, -errno on failure */
h_syscall:
	hint	#34				/* bti c */
	mov	x8, x0
	mov	x0, x1
	mov	x1, x2
	mov	x2, x3
	mov	x3, x4
	mov	x4, x5
	svc	#0
	ret

/* void write_cb_msg_first(const char *s, void *fd): mimalloc's order */
h_write_cb_msg_first:
	hint	#34				/* bti c */
	mov	x9, x0
	mov	x0, x1
	mov	x1, x9
	b	0f
/* void write_cb(void *fd, const char *s): all of s to fd, EINTR retried,
 * any other error gives up.  jemalloc's malloc_stats_print() callback. */
h_write_cb:
	hint	#34				/* bti c */
0:	mov	w9, w0				/* fd */
	mov	x10, x1				/* where */
	mov	x11, x1
1:	ldrb	w12, [x11]			/* strlen */
	cbz	w12, 2f
	add	x11, x11, #1
	b	1b
2:	sub	x11, x11, x10			/* left */
3:	cbz	x11, 4f
	mov	w0, w9
	mov	x1, x10
	mov	x2, x11
	mov	x8, #SYS_write
	svc	#0
	cmn	x0, #EINTR
	b.eq	3b
	cmp	x0, #0
	b.le	4f				/* an error, or nothing written */
	add	x10, x10, x0
	sub	x11, x11, x0
	b	3b
4:	ret

/*
 * long chain(struct chain *c): ret = c->fn(a0, a1, a2), then, when
 * CHAIN_ALWAYS is set or memsnap has marked the call abandoned, the
 * follow-up for that result: nz_fn(nz_a0 or ret, t_a1) when ret (all 64
 * bits) is not 0, z_fn(z_a0, t_a1) when it is.  Returns ret.
 */
h_chain:
	hint	#34				/* bti c */
	stp	x29, x30, [sp, #-32]!
	mov	x29, sp
	str	x19, [sp, #16]
	mov	x19, x0
	ldr	x0, [x19, #CH_A0]
	ldr	x1, [x19, #CH_A1]
	ldr	x2, [x19, #CH_A2]
	ldr	x9, [x19, #CH_FN]
	blr	x9
	str	x0, [x19, #CH_RET]
	ldr	x9, [x19, #CH_FLAGS]
	tbnz	x9, #CHAIN_ALWAYS_BIT, 1f
	ldr	x10, [x19, #CH_ABANDONED]
	cbz	x10, 9f
1:	cbz	x0, 3f
	ldr	x11, [x19, #CH_NZ_FN]
	tbnz	x9, #CHAIN_NZ_GETS_RET_BIT, 4f	/* x0 is ret already */
	ldr	x0, [x19, #CH_NZ_A0]
	b	4f
3:	ldr	x11, [x19, #CH_Z_FN]
	ldr	x0, [x19, #CH_Z_A0]
4:	cbz	x11, 9f
	ldr	x1, [x19, #CH_T_A1]
	blr	x11
9:	ldr	x0, [x19, #CH_RET]
	ldr	x19, [sp, #16]
	ldp	x29, x30, [sp], #32
	ret
helpers_end:

	.balign 8
	.globl arch_stub_len, arch_stub_done_pc, arch_helpers_len
	.globl arch_helper_off
arch_stub_len:		.quad stub_end - arch_stub_code
arch_stub_done_pc:	.quad stub_done - arch_stub_code
arch_helpers_len:	.quad helpers_end - arch_helpers_code
arch_helper_off:	/* enum ARCH_HELPER_* */
	.quad h_syscall - arch_helpers_code
	.quad h_write_cb - arch_helpers_code
	.quad h_write_cb_msg_first - arch_helpers_code
	.quad h_chain - arch_helpers_code

	.section .note.GNU-stack, "", @progbits
