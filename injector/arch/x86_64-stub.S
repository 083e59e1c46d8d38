/*
 * The code memsnap copies into the target's stub page (see
 * injector/inject.c): the return stub, then the helpers.  It is data in
 * memsnap (.rodata, never executed here), position-independent, and
 * every offset memsnap needs is a label difference the assembler
 * computes: arch_stub_len, arch_stub_done_pc, arch_helpers_len and
 * arch_helper_off[] (in the order of enum ARCH_HELPER_* in
 * injector/arch.h).
 */

/* struct restore_block in injector/arch/x86_64.c */
#define RB_ERRNO_ADDR	0
#define RB_ERRNO_VAL	8
#define RB_SIGMASK	16
#define RB_XSAVE	24
#define RB_R8		32
#define RB_RDI		96
#define RB_RSI		104
#define RB_RBP		112
#define RB_RBX		120
#define RB_RDX		128
#define RB_RAX		136
#define RB_RCX		144
#define RB_RSP		152
#define RB_RFLAGS	160
#define RIP_SLOT	136	/* below the thread's own rsp */

/* struct chain in injector/arch/x86_64.c (INJECT_HELPER_CHAIN) */
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
#define CHAIN_ALWAYS		1
#define CHAIN_NZ_GETS_RET	2

#define SYS_write		1
#define SYS_rt_sigprocmask	14
#define SIG_SETMASK		2
#define EINTR			4

	.section .rodata
	.balign 16

/*
 * The stub, entered by the callee's `ret` with rsp = B, the restore
 * block.  Everything is restored in user space, without rt_sigreturn:
 * that would reset the thread's restart block, and a thread that was
 * asleep in restart_syscall (a nanosleep resumed after an earlier stop)
 * would then get EINTR.  This way a thread interrupted in a syscall
 * re-enters it (rax = its number, rip at the syscall instruction), and
 * one in restart_syscall goes on with its own restart block.
 */
	.globl arch_stub_code
arch_stub_code:
	mov	%rax, %rbx			/* the result, where memsnap reads it */
	mov	RB_ERRNO_ADDR(%rsp), %rsi	/* errno address (0: none) */
	test	%rsi, %rsi
	je	1f
	mov	RB_ERRNO_VAL(%rsp), %edx
	mov	%edx, (%rsi)
1:	mov	$SYS_rt_sigprocmask, %eax	/* rt_sigprocmask(SIG_SETMASK, */
	mov	$SIG_SETMASK, %edi		/*   &B->sigmask, NULL, 8) */
	lea	RB_SIGMASK(%rsp), %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall					/* memsnap's completion stop */
stub_done:
	mov	RB_XSAVE(%rsp), %rcx		/* FP, SSE, AVX... state back */
	mov	$-1, %eax
	mov	$-1, %edx
	xrstor64 (%rcx)
	mov	RB_R8 + 0(%rsp), %r8
	mov	RB_R8 + 8(%rsp), %r9
	mov	RB_R8 + 16(%rsp), %r10
	mov	RB_R8 + 24(%rsp), %r11
	mov	RB_R8 + 32(%rsp), %r12
	mov	RB_R8 + 40(%rsp), %r13
	mov	RB_R8 + 48(%rsp), %r14
	mov	RB_R8 + 56(%rsp), %r15
	mov	RB_RDI(%rsp), %rdi
	mov	RB_RSI(%rsp), %rsi
	mov	RB_RBP(%rsp), %rbp
	mov	RB_RBX(%rsp), %rbx
	mov	RB_RDX(%rsp), %rdx
	mov	RB_RCX(%rsp), %rcx
	push	RB_RFLAGS(%rsp)
	popfq
	mov	RB_RAX(%rsp), %rax
	mov	RB_RSP(%rsp), %rsp		/* the thread's own stack pointer */
	jmp	*-RIP_SLOT(%rsp)		/* its rip, kept below the red zone */
stub_end:

	.balign 16
	.globl arch_helpers_code
arch_helpers_code:

/* long syscall(nr, a1, a2, a3, a4, a5): the raw result, -errno on failure */
h_syscall:
	mov	%rdi, %rax
	mov	%rsi, %rdi
	mov	%rdx, %rsi
	mov	%rcx, %rdx
	mov	%r8, %r10
	mov	%r9, %r8
	syscall
	ret

/* void write_cb_msg_first(const char *s, void *fd): mimalloc's order */
h_write_cb_msg_first:
	xchg	%rsi, %rdi
/* void write_cb(void *fd, const char *s): all of s to fd, EINTR retried,
 * any other error gives up.  jemalloc's malloc_stats_print() callback. */
h_write_cb:
	mov	%edi, %edi
	mov	%rsi, %rdx
1:	cmpb	$0, (%rdx)			/* strlen */
	je	2f
	inc	%rdx
	jmp	1b
2:	sub	%rsi, %rdx
3:	test	%rdx, %rdx
	je	4f
	mov	$SYS_write, %eax
	syscall
	cmp	$-EINTR, %rax
	je	3b
	test	%rax, %rax
	jle	4f				/* an error, or nothing written */
	add	%rax, %rsi
	sub	%rax, %rdx
	jmp	3b
4:	ret

/*
 * long chain(struct chain *c): ret = c->fn(a0, a1, a2), then, when
 * CHAIN_ALWAYS is set or memsnap has marked the call abandoned, the
 * follow-up for that result: nz_fn(nz_a0 or ret, t_a1) when ret (all 64
 * bits) is not 0, z_fn(z_a0, t_a1) when it is.  Returns ret.  So a call
 * that memsnap gave up on still closes what it was given when it ends.
 */
h_chain:
	push	%rbx				/* and the stack is 16-byte aligned */
	mov	%rdi, %rbx
	mov	CH_A0(%rbx), %rdi
	mov	CH_A1(%rbx), %rsi
	mov	CH_A2(%rbx), %rdx
	call	*CH_FN(%rbx)
	mov	%rax, CH_RET(%rbx)
	testq	$CHAIN_ALWAYS, CH_FLAGS(%rbx)
	jne	1f
	cmpq	$0, CH_ABANDONED(%rbx)
	je	9f
1:	test	%rax, %rax
	je	3f
	mov	CH_NZ_FN(%rbx), %rcx
	mov	CH_NZ_A0(%rbx), %rdi
	testq	$CHAIN_NZ_GETS_RET, CH_FLAGS(%rbx)
	je	4f
	mov	%rax, %rdi
	jmp	4f
3:	mov	CH_Z_FN(%rbx), %rcx
	mov	CH_Z_A0(%rbx), %rdi
4:	test	%rcx, %rcx
	je	9f
	mov	CH_T_A1(%rbx), %rsi
	call	*%rcx
9:	mov	CH_RET(%rbx), %rax
	pop	%rbx
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
