/*
 * arm64 entry patches (injector/patch.h): one instruction replaced by
 * a b to the stub, that instruction moved to a trampoline.  A function
 * built with -mbranch-protection=standard:
 *
 *   entry:    d503233f   paciasp              (kept: a landing pad)
 *   at:       a9bf7bfd   stp x29, x30, [sp, #-16]!
 *   becomes   14......   b stub
 *   stub:     d50323bf   autiasp              (the caller's plain lr)
 *             58000050   ldr x16, #8
 *             d61f0200   br x16
 *             <hook, 8 bytes>
 *   tramp:    d503233f   paciasp              (signs the hook's lr)
 *             a9bf7bfd   stp x29, x30, [sp, #-16]!
 *             14......   b at + 4
 *
 * A conditional branch moves as its inverse over a b to its target,
 * since its own reach (1 MiB, 32 KiB for tbz) may not span the distance
 * to the trampoline.  glibc's free:
 *
 *   at:       b4000880   cbz x0, at + 0x110
 *   tramp:    b5000040   cbnz x0, tramp + 8
 *             14......   b at + 0x110
 *             14......   b at + 4
 *
 * Capstone (4.0.2 and later) tells whether a word is an instruction;
 * the encodings below, from the Arm ARM, say which ones move and how.
 */
#include "injector/patch.h"

#include <capstone/capstone.h>

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define INSN_LEN 4

/*
 * b's imm26 reaches 128 MiB either way.  The margin is for what lies
 * beyond the entry the caller measured from: the stub and trampoline
 * within their own mapping, a moved b's target elsewhere.
 */
#define PATCH_REACH ((UINT64_C(1) << 27) - (UINT64_C(4) << 20))

#define A64_NOP 0xd503201fu
#define A64_BTI_C 0xd503245fu
#define A64_PACIASP 0xd503233fu
#define A64_PACIBSP 0xd503237fu
#define A64_AUTIASP 0xd50323bfu
#define A64_AUTIBSP 0xd50323ffu
#define A64_LDR_X16_8 0x58000050u	/* ldr x16, #8 */
#define A64_BR_X16 0xd61f0200u		/* br x16 */
#define A64_B 0x14000000u		/* b, imm26 = 0 */

/* autiasp, nop, ldr, br, the address */
_Static_assert(4 * INSN_LEN + 8 <= PATCH_STUB_LEN, "the stub fits");
/* the pad, the moved instruction (a conditional branch: two), b */
_Static_assert(4 * INSN_LEN <= PATCH_TRAMP_MAX, "the trampoline fits");

/*
 * The landing pads a function may start with, which stay in place: an
 * indirect call (blr, through the PLT or a pointer) must land on one
 * where the kernel enforces BTI, and paciasp / pacibsp also sign lr.
 * @stub_first undoes the signing before the hook runs; @tramp_first
 * starts the trampoline, which the hook calls with blr: the same
 * signing (the epilogue authenticates lr against sp, unchanged since
 * the entry), or bti c for a blr into a guarded page.
 */
static const struct {
	uint32_t word;
	uint32_t stub_first;	/* 0: none */
	uint32_t tramp_first;
} landing_pads[] = {
	{ 0xd503245fu, 0, A64_BTI_C },		/* bti c  (hint #34) */
	{ 0xd503249fu, 0, A64_BTI_C },		/* bti j  (hint #36) */
	{ 0xd50324dfu, 0, A64_BTI_C },		/* bti jc (hint #38) */
	{ A64_PACIASP, A64_AUTIASP, A64_PACIASP }, /* hint #25 */
	{ A64_PACIBSP, A64_AUTIBSP, A64_PACIBSP }, /* hint #27 */
};

enum move_kind {
	MOVE_VERBATIM,
	MOVE_REFUSE,
	MOVE_ADRP,		/* same 4 KiB page, +-4 GiB */
	MOVE_ADR,		/* same byte, +-1 MiB */
	MOVE_B,			/* b and bl: same target, +-128 MiB */
	MOVE_BCOND,		/* b.cond: inverted, over a b */
	MOVE_CB,		/* cbz, cbnz: inverted, over a b */
	MOVE_TB,		/* tbz, tbnz: inverted, over a b */
};

/*
 * Every pc-relative or control-transfer form of A64, by encoding.  The
 * first match wins.
 */
static const struct {
	uint32_t mask, value;
	enum move_kind kind;
	const char *why;	/* MOVE_REFUSE */
} forms[] = {
	/* ret, br, blr, eret, drps and their pointer-authenticated forms */
	{ 0xfe000000u, 0xd6000000u, MOVE_REFUSE,
	  "cannot be moved (a branch to a register)" },
	/* svc, hvc, smc, brk, hlt, dcps */
	{ 0xff000000u, 0xd4000000u, MOVE_REFUSE,
	  "cannot be moved (an exception)" },
	{ 0xff000010u, 0x54000000u, MOVE_BCOND, NULL },	/* b.cond */
	/* bc.cond (FEAT_HBC), which capstone 4 does not decode */
	{ 0xff000010u, 0x54000010u, MOVE_REFUSE,
	  "cannot be moved by this version (a consistent conditional branch)" },
	{ 0x7e000000u, 0x34000000u, MOVE_CB, NULL },	/* cbz, cbnz */
	{ 0x7e000000u, 0x36000000u, MOVE_TB, NULL },	/* tbz, tbnz */
	/* ldr, ldrsw, prfm literal; ldr literal to a simd register */
	{ 0x3b000000u, 0x18000000u, MOVE_REFUSE,
	  "cannot be moved by this version (a literal load)" },
	{ 0x9f000000u, 0x90000000u, MOVE_ADRP, NULL },
	{ 0x9f000000u, 0x10000000u, MOVE_ADR, NULL },
	{ 0x7c000000u, 0x14000000u, MOVE_B, NULL },	/* b, bl */
};

/* Sign-extend the low @bits of @v. */
static int64_t sext(uint64_t v, unsigned int bits)
{
	uint64_t m = UINT64_C(1) << (bits - 1);

	v &= (UINT64_C(1) << bits) - 1;
	return (int64_t)((v ^ m) - m);
}

static bool fits(int64_t v, unsigned int bits)
{
	return v >= -(INT64_C(1) << (bits - 1)) &&
	       v < (INT64_C(1) << (bits - 1));
}

/* b (or bl, @op = the top six bits of @w) from @pc to @to: false if too far. */
static bool encode_b(uint32_t op, uint64_t pc, uint64_t to, uint32_t *w)
{
	int64_t rel = (int64_t)(to - pc);

	if (!fits(rel, 28))
		return false;
	*w = (op & 0xfc000000u) | (((uint64_t)rel >> 2) & 0x03ffffffu);
	return true;
}

/* adr / adrp's 21-bit immediate: immhi in bits 23:5, immlo in 30:29. */
static int64_t adr_imm(uint32_t w)
{
	return sext((uint64_t)((w >> 5) & 0x7ffff) << 2 | ((w >> 29) & 3), 21);
}

static uint32_t adr_with_imm(uint32_t w, int64_t imm)
{
	uint64_t u = (uint64_t)imm;

	return (w & 0x9f00001fu) | (uint32_t)(u & 3) << 29 |
	       (uint32_t)((u >> 2) & 0x7ffff) << 5;
}

/*
 * The target of the conditional branch @w (of @kind) at @pc, and in
 * *@inv its inverse, which skips the next instruction: imm19 (imm14 for
 * tbz / tbnz) = 2, to pc + 8.
 */
static uint64_t cond_branch(enum move_kind kind, uint32_t w, uint64_t pc,
			    uint32_t *inv)
{
	const uint32_t skip = 2u << 5;

	switch (kind) {
	case MOVE_BCOND:	/* 01010100 imm19 0 cond: cond ^ 1 */
		*inv = ((w & 0xff00000fu) ^ 1u) | skip;
		return pc + (uint64_t)(sext(w >> 5, 19) * 4);
	case MOVE_CB:		/* sf 011010 op imm19 Rt: op ^ 1 */
		*inv = ((w & 0xff00001fu) ^ (1u << 24)) | skip;
		return pc + (uint64_t)(sext(w >> 5, 19) * 4);
	default:		/* b5 011011 op b40 imm14 Rt: op ^ 1 */
		*inv = ((w & 0xfff8001fu) ^ (1u << 24)) | skip;
		return pc + (uint64_t)(sext(w >> 5, 14) * 4);
	}
}

/* b.al and b.nv: always taken, whose inverses are too */
static bool always(enum move_kind kind, uint32_t w)
{
	return kind == MOVE_BCOND && (w & 0xe) == 0xe;
}

static enum move_kind form_of(uint32_t w, const char **reason)
{
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		if ((w & forms[i].mask) == forms[i].value) {
			*reason = forms[i].why;
			return forms[i].kind;
		}
	}
	return MOVE_VERBATIM;
}

/*
 * Direct branches only, by encoding (b, bl, b.cond, cbz, tbz): every
 * A64 instruction is one word, so no decoder is needed to walk a body.
 */
static int calls(const unsigned char *code, size_t size, uint64_t entry,
		 const uint64_t *targets, size_t n, bool *hit)
{
	size_t off, j;

	for (off = 0; off + INSN_LEN <= size; off += INSN_LEN) {
		uint32_t w = patch_get32(code + off), inv;
		uint64_t pc = entry + off, target;
		const char *reason;

		switch (form_of(w, &reason)) {
		case MOVE_B:
			target = pc + (uint64_t)(sext(w & 0x03ffffffu, 26) * 4);
			break;
		case MOVE_BCOND:
		case MOVE_CB:
		case MOVE_TB:
			target = cond_branch(form_of(w, &reason), w, pc, &inv);
			break;
		default:
			continue;
		}
		if (target == entry)
			continue;
		for (j = 0; j < n; j++)
			if (targets[j] == target)
				hit[j] = true;
	}
	return 0;
}

/* Capstone's groups: a net under the encodings above. */
static bool transfers_control(const cs_insn *insn)
{
	const cs_detail *d = insn->detail;

	for (unsigned int i = 0; i < d->groups_count; i++) {
		switch (d->groups[i]) {
		case ARM64_GRP_JUMP:
		case ARM64_GRP_CALL:
		case ARM64_GRP_RET:
		case ARM64_GRP_INT:
		case ARM64_GRP_BRANCH_RELATIVE:
			return true;
		}
	}
	return false;
}

/*
 * Is @w at @pc (@off from the entry) an instruction, which capstone
 * does not take for a branch the encodings above missed (@kind is
 * theirs)?  0 and its @mnemonic, or -EOPNOTSUPP and @why.
 */
static int check_decodes(uint32_t w, uint64_t pc, unsigned int off,
			 enum move_kind kind, char *why, size_t why_size,
			 char *mnemonic, size_t mnemonic_size)
{
	unsigned char bytes[INSN_LEN];
	cs_insn *insn = NULL;
	csh h;
	size_t n;
	int rc = 0;

	if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h) != CS_ERR_OK)
		return patch_refuse(why, why_size, "capstone has no arm64 decoder");
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	patch_put32(bytes, w);
	n = cs_disasm(h, bytes, sizeof(bytes), pc, 1, &insn);
	if (n != 1) {
		rc = patch_refuse(why, why_size,
				  "entry+%u: cannot decode the instruction (%08x)",
				  off, w);
		goto out_close;
	}
	snprintf(mnemonic, mnemonic_size, "%s", insn->mnemonic);
	if (kind == MOVE_VERBATIM && transfers_control(insn))
		rc = patch_refuse(why, why_size,
				  "entry+%u: %s cannot be moved (a branch this planner does not know)",
				  off, insn->mnemonic);
	cs_free(insn, n);
out_close:
	cs_close(&h);
	return rc;
}

/* The stub at p->stub: @first (0: none), then on to @hook by x16. */
static void build_stub(struct patch_plan *p, uint32_t first, uint64_t hook)
{
	if (first) {
		patch_put32(p->stub_code + p->stub_len, first);
		p->stub_len += INSN_LEN;
	}
	if ((p->stub + p->stub_len) & 7) {
		patch_put32(p->stub_code + p->stub_len, A64_NOP);
		p->stub_len += INSN_LEN;
	}
	patch_put32(p->stub_code + p->stub_len, A64_LDR_X16_8);
	patch_put32(p->stub_code + p->stub_len + 4, A64_BR_X16);
	patch_put64(p->stub_code + p->stub_len + 8, hook);
	p->stub_len += 16;
}

/*
 * The instruction @w at entry+@off, of form @kind, moved to the
 * trampoline's next word of @p: *@nw is the word to put there (with
 * the inverse of a conditional branch before it in @p), *@back false
 * when it never falls through.  0, or a refusal in @why.
 */
static int move_insn(struct patch_plan *p, uint32_t w, unsigned int off,
		     enum move_kind kind, const char *mnemonic,
		     const char *reason, uint32_t *nw, bool *back, char *why,
		     size_t why_size)
{
	uint64_t pc, target;
	uint32_t inv;
	int64_t imm;

	pc = p->tramp + p->tramp_len;
	switch (kind) {
	case MOVE_REFUSE:
		return patch_refuse(why, why_size, "entry+%u: %s %s", off, mnemonic,
				    reason);
	case MOVE_VERBATIM:
		*nw = w;
		break;
	case MOVE_ADRP:
		target = (p->at & ~UINT64_C(0xfff)) +
			 (uint64_t)(adr_imm(w) * 4096);
		imm = (int64_t)(target - (pc & ~UINT64_C(0xfff))) / 4096;
		if (!fits(imm, 21))
			return patch_refuse(why, why_size,
					    "entry+%u: adrp's page is out of reach of the trampoline",
					    off);
		*nw = adr_with_imm(w, imm);
		break;
	case MOVE_ADR:
		target = p->at + (uint64_t)adr_imm(w);
		imm = (int64_t)(target - pc);
		if (!fits(imm, 21))
			return patch_refuse(why, why_size,
					    "entry+%u: adr's target is out of reach of the trampoline",
					    off);
		*nw = adr_with_imm(w, imm);
		break;
	case MOVE_B:
		target = p->at + (uint64_t)(sext(w, 26) * 4);
		if (!encode_b(w, pc, target, nw))
			return patch_refuse(why, why_size,
					    "entry+%u: %s's target is out of reach of the trampoline",
					    off, mnemonic);
		*back = (w & 0x80000000u) != 0;	/* bl, not b */
		break;
	case MOVE_BCOND:
	case MOVE_CB:
	case MOVE_TB:
		/*
		 * Taken: the inverse falls through to b target.  Not
		 * taken: it skips to the way back below.  b.al, always
		 * taken, is that b alone.
		 */
		target = cond_branch(kind, w, p->at, &inv);
		if (always(kind, w)) {
			*back = false;
		} else {
			patch_put32(p->tramp_code + p->tramp_len, inv);
			p->tramp_len += INSN_LEN;
			pc += INSN_LEN;
		}
		if (!encode_b(A64_B, pc, target, nw))
			return patch_refuse(why, why_size,
					    "entry+%u: %s's target is out of reach of the trampoline",
					    off, mnemonic);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static int plan(const unsigned char *code, size_t size, uint64_t entry,
		uint64_t stub, uint64_t tramp, uint64_t hook,
		struct patch_plan *p, char *why, size_t why_size)
{
	struct patch_plan plan = { .entry = entry };
	uint32_t stub_first = 0, tramp_first = 0, w, nw;
	char mnemonic[32] = "";
	const char *reason = NULL;
	enum move_kind kind;
	unsigned int off = 0;
	bool back = true;	/* the moved instruction may fall through */
	uint64_t pc;
	int rc;

	if ((entry | stub | tramp) & (INSN_LEN - 1))
		return patch_refuse(why, why_size,
				    "the entry, stub or trampoline is not 4-byte aligned");
	if (size < INSN_LEN)
		return patch_refuse(why, why_size,
				    "the function is %zu bytes, shorter than an instruction",
				    size);
	w = patch_get32(code);
	for (size_t i = 0; i < sizeof(landing_pads) / sizeof(landing_pads[0]);
	     i++) {
		if (w == landing_pads[i].word) {
			off = INSN_LEN;
			stub_first = landing_pads[i].stub_first;
			tramp_first = landing_pads[i].tramp_first;
			break;
		}
	}
	if (size < off + INSN_LEN)
		return patch_refuse(why, why_size,
				    "the function is %zu bytes: nothing after its landing pad",
				    size);
	plan.at = entry + off;
	if (patch_distance(stub, entry) > PATCH_REACH ||
	    !encode_b(A64_B, plan.at, stub, &nw))
		return patch_refuse(why, why_size,
				    "the stub is out of b reach of the entry");
	if (patch_distance(tramp, entry) > PATCH_REACH)
		return patch_refuse(why, why_size,
				    "the trampoline is out of reach of the entry");

	/* The instruction replaced */
	plan.len = INSN_LEN;
	memcpy(plan.old, code + off, INSN_LEN);
	patch_put32(plan.new, nw);
	plan.busy_lo = plan.busy_hi = plan.at;

	/*
	 * The stub.  x16, the intra-procedure-call scratch register, is
	 * free at a function boundary, and a landing pad leaves it alone.
	 * A nop keeps the ldr's literal 8-byte aligned: Linux allows an
	 * unaligned one, but it costs nothing to avoid.  None where the
	 * hook is within a b of the entry (the sampler mapped near the
	 * program) and lr needs no authenticating first.
	 */
	plan.stub = stub;
	if (!stub_first && patch_distance(hook, entry) <= PATCH_REACH &&
	    encode_b(A64_B, plan.at, hook, &nw))
		patch_put32(plan.new, nw);
	else
		build_stub(&plan, stub_first, hook);

	/* The trampoline */
	plan.tramp = tramp;
	if (tramp_first) {
		patch_put32(plan.tramp_code, tramp_first);
		plan.tramp_len = INSN_LEN;
	}
	w = patch_get32(code + off);
	kind = form_of(w, &reason);
	rc = check_decodes(w, plan.at, off, kind, why, why_size, mnemonic,
			   sizeof(mnemonic));
	if (rc)
		return rc;
	rc = move_insn(&plan, w, off, kind, mnemonic, reason, &nw, &back, why,
		       why_size);
	if (rc)
		return rc;
	patch_put32(plan.tramp_code + plan.tramp_len, nw);
	plan.tramp_len += INSN_LEN;

	/*
	 * Back into the function by a direct b, which the tramp's reach
	 * allows: not ldr x16 / br x16, since x16 may be what the moved
	 * instruction just set (compilers use it as a scratch register
	 * inside a body), and a br onto at + 4, no landing pad, faults
	 * where the kernel enforces BTI.  None after a b or b.al, which
	 * does not come back.
	 */
	if (back) {
		pc = tramp + plan.tramp_len;
		if (!encode_b(A64_B, pc, plan.at + INSN_LEN, &nw))
			return patch_refuse(why, why_size,
					    "the trampoline is out of b reach of the function");
		patch_put32(plan.tramp_code + plan.tramp_len, nw);
		plan.tramp_len += INSN_LEN;
	}
	*p = plan;
	return 0;
}

/* ldr x16, #8; br x16; the address (a literal Linux lets be 4-aligned) */
static void jump(unsigned char *code, uint64_t to)
{
	memset(code, 0, PATCH_JUMP_LEN);
	patch_put32(code, A64_LDR_X16_8);
	patch_put32(code + INSN_LEN, A64_BR_X16);
	patch_put64(code + 2 * INSN_LEN, to);
}

const struct patch_planner patch_planner_aarch64 = {
	.cpu = "aarch64",
	.e_machine = EM_AARCH64,
	.plan = plan,
	.calls = calls,
	.reach = PATCH_REACH,
	.jump = jump,
};
