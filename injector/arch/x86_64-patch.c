/*
 * x86-64 entry patches (injector/patch.h): a jmp rel32 written over the
 * whole instructions that cover the first 5 bytes of a function, those
 * instructions moved to a trampoline.  A Debian libjemalloc.a malloc:
 *
 *   entry:    48 81 ff 00 10 00 00   cmp $0x1000,%rdi
 *             77 ..                  ja ...
 *   becomes   e9 <stub - entry - 5>  jmp stub    (N = 7: the cmp)
 *             00 00                  (the old cmp's tail, never run)
 *   stub:     ff 25 00 00 00 00      jmp *0(%rip)
 *             <hook, 8 bytes>
 *   tramp:    48 81 ff 00 10 00 00   cmp $0x1000,%rdi
 *             e9 <entry + 7 - ...>   jmp entry+7  (near, by contract)
 *
 * Where the hook itself is within a rel32 of the entry (the sampler
 * mapped near the program), the entry jumps to it and the stub is not
 * used (stub_len 0).
 *
 * Capstone (4.0.2 and later) decodes; the moves are this file's.
 */
#include "injector/patch.h"

#include <capstone/capstone.h>

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define JMP_REL32_LEN 5		/* e9 rel32 */
#define JCC_REL32_LEN 6		/* 0f 8x rel32 */
#define CALL_REL32_LEN 5	/* e8 rel32 */
#define JMP_ABS_LEN 14		/* ff 25 00 00 00 00, then the address */
#define X86_INSN_MAX 15

/*
 * A rel32 reaches 2 GiB either way.  The margin is for what lies
 * beyond the entry the caller measured from: the rest of the function
 * (a moved branch's target), and the stub and trampoline within their
 * own mapping.
 */
#define PATCH_REACH ((UINT64_C(1) << 31) - (UINT64_C(16) << 20))

enum move_kind {
	MOVE_VERBATIM,		/* position-independent: copied as is */
	MOVE_RIP,		/* a disp(%rip) operand: disp32 recomputed */
	MOVE_JMP,		/* jmp rel8/rel32: jmp rel32 */
	MOVE_JCC,		/* jcc rel8/rel32: 0f 8x rel32 */
	MOVE_CALL,		/* call rel32: call rel32 */
};

/* One displaced instruction and how it moves. */
struct moved {
	unsigned int off;	/* from the entry */
	unsigned int len;
	enum move_kind kind;
	uint64_t target;	/* jmp, jcc, call: where it goes; rip:
				   the operand's absolute address */
	unsigned int disp_off;	/* rip: the disp32's offset in the insn */
	unsigned char cc;	/* jcc: the condition, as in 0f 8x */
	bool ends;		/* an unconditional jmp: no way back needed */
};

/* Displaced instructions cover at most 5 bytes: at most 5 of them. */
#define MOVED_MAX JMP_REL32_LEN

_Static_assert(MOVED_MAX * X86_INSN_MAX + JMP_ABS_LEN <= PATCH_TRAMP_MAX,
	       "the longest trampoline fits");
_Static_assert(JMP_ABS_LEN <= PATCH_STUB_LEN, "the stub fits");
_Static_assert(JMP_REL32_LEN <= PATCH_MAX, "the jmp fits");

static bool fits_rel32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* The condition of each jcc, the low nibble of its 7x / 0f 8x opcode. */
static const struct {
	unsigned int id;
	unsigned char cc;
} jcc_codes[] = {
	{ X86_INS_JO, 0x0 },  { X86_INS_JNO, 0x1 }, { X86_INS_JB, 0x2 },
	{ X86_INS_JAE, 0x3 }, { X86_INS_JE, 0x4 },  { X86_INS_JNE, 0x5 },
	{ X86_INS_JBE, 0x6 }, { X86_INS_JA, 0x7 },  { X86_INS_JS, 0x8 },
	{ X86_INS_JNS, 0x9 }, { X86_INS_JP, 0xa },  { X86_INS_JNP, 0xb },
	{ X86_INS_JL, 0xc },  { X86_INS_JGE, 0xd }, { X86_INS_JLE, 0xe },
	{ X86_INS_JG, 0xf },
};

static bool jcc_code(unsigned int id, unsigned char *cc)
{
	for (size_t i = 0; i < sizeof(jcc_codes) / sizeof(jcc_codes[0]); i++) {
		if (jcc_codes[i].id == id) {
			*cc = jcc_codes[i].cc;
			return true;
		}
	}
	return false;
}

/*
 * Is @insn a control transfer to an address encoded relative to it,
 * and where to?  By instruction id, not by capstone's groups: 4.0.2
 * leaves loop out of CS_GRP_BRANCH_RELATIVE.
 */
static bool rel_target(const cs_insn *insn, uint64_t *target)
{
	const cs_x86 *x = &insn->detail->x86;
	unsigned char cc;

	switch (insn->id) {
	case X86_INS_JMP:
	case X86_INS_CALL:
	case X86_INS_LOOP:
	case X86_INS_LOOPE:
	case X86_INS_LOOPNE:
	case X86_INS_JCXZ:
	case X86_INS_JECXZ:
	case X86_INS_JRCXZ:
	case X86_INS_XBEGIN:
		break;
	default:
		if (!jcc_code(insn->id, &cc))
			return false;
	}
	if (x->op_count < 1 || x->operands[0].type != X86_OP_IMM)
		return false;		/* jmp *%rax, call *8(%rbx), ... */
	*target = (uint64_t)x->operands[0].imm;
	return true;
}

/* Capstone's groups: a safety net under the explicit cases only. */
static bool transfers_control(const cs_insn *insn)
{
	const cs_detail *d = insn->detail;

	for (unsigned int i = 0; i < d->groups_count; i++) {
		switch (d->groups[i]) {
		case X86_GRP_JUMP:
		case X86_GRP_CALL:
		case X86_GRP_RET:
		case X86_GRP_INT:
		case X86_GRP_IRET:
		case X86_GRP_BRANCH_RELATIVE:
			return true;
		}
	}
	return false;
}

/*
 * Does @insn address memory relative to the next instruction, and
 * where is its disp32?  1 and *@disp_off, 0 for no, -EOPNOTSUPP and
 * *@what for a form this planner does not move.  Capstone's operands
 * and the ModR/M byte (mod 00, r/m 101: RIP-relative in 64-bit mode)
 * must agree, so that neither an operand capstone does not list nor a
 * ModR/M offset it gets wrong goes unnoticed.  The disp32 follows the
 * ModR/M byte (RIP-relative forms have no SIB): capstone 4.0.2's
 * disp_size says 2 under a 66 prefix (movdqa 0x40(%rip),%xmm0), so
 * only its value is trusted, checked against the bytes.
 */
static int rip_operand(const cs_insn *insn, unsigned int *disp_off,
		       const char **what)
{
	const cs_x86 *x = &insn->detail->x86;
	unsigned int modrm = x->encoding.modrm_offset;
	bool by_operand = false, by_modrm;

	for (unsigned int i = 0; i < x->op_count; i++) {
		if (x->operands[i].type != X86_OP_MEM)
			continue;
		if (x->operands[i].mem.base == X86_REG_EIP) {
			*what = "an eip-relative operand";
			return -EOPNOTSUPP;
		}
		if (x->operands[i].mem.base == X86_REG_RIP)
			by_operand = true;
	}
	by_modrm = modrm && modrm < insn->size &&
		   (insn->bytes[modrm] & 0xc7) == 0x05;
	if (!by_operand && !by_modrm)
		return 0;
	if (by_operand != by_modrm || x->addr_size != 8 ||
	    modrm + 1u + 4u > insn->size ||
	    (x->encoding.disp_offset && x->encoding.disp_offset != modrm + 1) ||
	    (int32_t)patch_get32(insn->bytes + modrm + 1) != x->disp) {
		*what = "a rip-relative operand whose disp32 is not where expected";
		return -EOPNOTSUPP;
	}
	*disp_off = modrm + 1;
	return 1;
}

/*
 * How the displaced @insn, @off bytes into the function, moves: 0 and
 * *@m, or -EOPNOTSUPP and @why.
 */
static int classify(const cs_insn *insn, unsigned int off, struct moved *m,
		    char *why, size_t why_size)
{
	const cs_x86 *x = &insn->detail->x86;
	const char *what = NULL;
	uint64_t target;
	int rc;

	*m = (struct moved){ .off = off, .len = insn->size };

	switch (insn->id) {
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_RETFQ:
	case X86_INS_IRET:
	case X86_INS_IRETD:
	case X86_INS_IRETQ:
	case X86_INS_INT:
	case X86_INS_INT1:
	case X86_INS_INT3:
	case X86_INS_INTO:
	case X86_INS_SYSCALL:
	case X86_INS_SYSENTER:
	case X86_INS_SYSEXIT:
	case X86_INS_SYSRET:
	case X86_INS_LOOP:
	case X86_INS_LOOPE:
	case X86_INS_LOOPNE:
	case X86_INS_JCXZ:
	case X86_INS_JECXZ:
	case X86_INS_JRCXZ:
	case X86_INS_XBEGIN:	/* its abort address is relative */
	case X86_INS_LJMP:
	case X86_INS_LCALL:
		return patch_refuse(why, why_size, "entry+%u: %s cannot be moved",
				    off, insn->mnemonic);
	/*
	 * endbr64 is an indirect branch's landing pad, and the jmp that
	 * replaces it is not one; moved, it is a nop in the trampoline.
	 * Harmless on Linux, which does not enforce IBT in user space
	 * (it has user shadow stacks only, which arch_thread_refused()
	 * refuses).
	 */
	case X86_INS_ENDBR64:
		m->kind = MOVE_VERBATIM;
		return 0;
	default:
		break;
	}

	rc = rip_operand(insn, &m->disp_off, &what);
	if (rc < 0)
		return patch_refuse(why, why_size, "entry+%u: %s with %s cannot be moved",
				    off, insn->mnemonic, what);

	if (rel_target(insn, &target)) {
		/* 66 truncates a near branch's target to 16 bits on AMD.
		 * Other prefixes (bnd, for MPX, which is gone; branch
		 * hints) are dropped by the re-encoding. */
		if (x->prefix[2] == X86_PREFIX_OPSIZE)
			return patch_refuse(why, why_size,
					    "entry+%u: %s with a 66 prefix cannot be moved",
					    off, insn->mnemonic);
		m->target = target;
		if (insn->id == X86_INS_JMP) {
			m->kind = MOVE_JMP;
			m->ends = true;
		} else if (insn->id == X86_INS_CALL) {
			/* call next; pop: the pc, which would be the
			 * trampoline's */
			if (target == insn->address + insn->size)
				return patch_refuse(why, why_size,
						    "entry+%u: call to the next instruction reads its own address",
						    off);
			m->kind = MOVE_CALL;
		} else if (jcc_code(insn->id, &m->cc)) {
			m->kind = MOVE_JCC;
		} else {
			return patch_refuse(why, why_size,
					    "entry+%u: %s cannot be moved", off,
					    insn->mnemonic);
		}
		return 0;
	}

	if (insn->id == X86_INS_JMP || insn->id == X86_INS_CALL) {
		/* Indirect: only through a rip-relative slot, whose disp
		 * the move fixes; a register or another memory form may
		 * hold anything. */
		if (rc != 1)
			return patch_refuse(why, why_size,
					    "entry+%u: %s %s cannot be moved (an indirect branch)",
					    off, insn->mnemonic, insn->op_str);
		m->ends = insn->id == X86_INS_JMP;
	} else if (transfers_control(insn)) {
		/* one the cases above do not know */
		return patch_refuse(why, why_size, "entry+%u: %s cannot be moved",
				    off, insn->mnemonic);
	}

	if (rc == 1) {
		m->kind = MOVE_RIP;
		m->target = insn->address + insn->size + x->disp;
	} else {
		m->kind = MOVE_VERBATIM;
	}
	return 0;
}

/*
 * Decode the whole instructions covering the first 5 bytes: *@nmoved
 * of them in @moved, *@n bytes.  Each is decoded from a copy padded
 * with zeros, so that one cut by the end of the body is told apart
 * from one capstone does not know, and nothing past @size is read.
 */
static int decode_displaced(csh h, cs_insn *insn, const unsigned char *code,
			    size_t size, uint64_t entry, struct moved *moved,
			    unsigned int *nmoved, unsigned int *n, char *why,
			    size_t why_size)
{
	unsigned int off = 0, count = 0;
	int rc;

	while (off < JMP_REL32_LEN) {
		unsigned char buf[X86_INSN_MAX] = { 0 };
		size_t avail = size - off, len = sizeof(buf);
		const uint8_t *c = buf;
		uint64_t addr = entry + off;

		memcpy(buf, code + off, avail < len ? avail : len);
		if (!cs_disasm_iter(h, &c, &len, &addr, insn))
			return patch_refuse(why, why_size,
					    "entry+%u: cannot decode the instruction",
					    off);
		if (insn->size > avail)
			return patch_refuse(why, why_size,
					    "entry+%u: %s runs past the end of the function (%zu bytes)",
					    off, insn->mnemonic, size);
		rc = classify(insn, off, &moved[count], why, why_size);
		if (rc)
			return rc;
		count++;
		off += insn->size;
	}
	*nmoved = count;
	*n = off;
	return 0;
}

/*
 * Nothing in the body may branch strictly inside (entry, entry + @n):
 * after the patch those bytes are the middle of the jmp.  A linear
 * sweep of the whole body; bytes capstone cannot decode (data in
 * text) end it with a refusal, since a branch might hide past them.
 * A rip-relative address into those bytes (lea of a label, for a
 * computed goto) is refused too.  Jump tables hold offsets no sweep
 * reads: compilers do not give the first instructions of a function
 * a case label.
 */
static int scan_body(csh h, cs_insn *insn, const unsigned char *code,
		     size_t size, uint64_t entry, unsigned int n, char *why,
		     size_t why_size)
{
	const uint8_t *c = code;
	uint64_t addr = entry, target;
	size_t left = size;
	unsigned int disp_off;
	const char *what;

	while (left) {
		unsigned int off = addr - entry;

		if (!cs_disasm_iter(h, &c, &left, &addr, insn))
			return patch_refuse(why, why_size,
					    "entry+%u: cannot decode the body to check its branches",
					    off);
		if (rel_target(insn, &target) && target > entry &&
		    target < entry + n)
			return patch_refuse(why, why_size,
					    "a branch at entry+%u goes back into the first %u bytes",
					    off, n);
		if (rip_operand(insn, &disp_off, &what) == 1) {
			target = insn->address + insn->size +
				 insn->detail->x86.disp;
			if (target > entry && target < entry + n)
				return patch_refuse(why, why_size,
						    "entry+%u takes an address inside the first %u bytes",
						    off, n);
		}
	}
	return 0;
}

static int calls(const unsigned char *code, size_t size, uint64_t entry,
		 const uint64_t *targets, size_t n, bool *hit)
{
	const uint8_t *c = code;
	uint64_t addr = entry, target;
	size_t left = size, j;
	cs_insn *insn;
	csh h;
	int rc = 0;

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return -EOPNOTSUPP;
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(h);
	if (!insn) {
		cs_close(&h);
		return -ENOMEM;
	}
	while (left) {
		if (!cs_disasm_iter(h, &c, &left, &addr, insn)) {
			rc = -EOPNOTSUPP;
			break;
		}
		if (!rel_target(insn, &target) || target == entry)
			continue;
		for (j = 0; j < n; j++)
			if (targets[j] == target)
				hit[j] = true;
	}
	cs_free(insn, 1);
	cs_close(&h);
	return rc;
}

/* Append a moved instruction at tramp + *@len; -EOPNOTSUPP out of reach. */
static int emit_moved(const struct moved *m, const unsigned char *code,
		      uint64_t tramp, unsigned char *out, unsigned int *len,
		      char *why, size_t why_size)
{
	uint64_t pc = tramp + *len;
	unsigned char *o = out + *len;
	unsigned int ilen, rel_at;	/* rel_at: where the rel32 goes */
	int64_t rel;

	switch (m->kind) {
	case MOVE_VERBATIM:
		memcpy(o, code + m->off, m->len);
		*len += m->len;
		return 0;
	case MOVE_RIP:
		/* same length: the same next-instruction base, moved */
		ilen = m->len;
		memcpy(o, code + m->off, ilen);
		rel_at = m->disp_off;
		break;
	case MOVE_JMP:
	case MOVE_CALL:
		ilen = m->kind == MOVE_JMP ? JMP_REL32_LEN : CALL_REL32_LEN;
		o[0] = m->kind == MOVE_JMP ? 0xe9 : 0xe8;
		rel_at = 1;
		break;
	case MOVE_JCC:
		ilen = JCC_REL32_LEN;
		o[0] = 0x0f;
		o[1] = 0x80 | m->cc;
		rel_at = 2;
		break;
	default:
		return -EINVAL;
	}
	rel = (int64_t)(m->target - (pc + ilen));
	if (!fits_rel32(rel))
		return patch_refuse(why, why_size,
				    "entry+%u: %s out of reach of the trampoline",
				    m->off, m->kind == MOVE_RIP
				    ? "its rip-relative operand is"
				    : "its branch target is");
	patch_put32(o + rel_at, (uint32_t)rel);
	*len += ilen;
	return 0;
}

/* jmp *0(%rip) and the absolute @to: any distance, 14 bytes. */
static void emit_jmp_abs(unsigned char *o, uint64_t to)
{
	static const unsigned char jmp_rip[6] = { 0xff, 0x25, 0, 0, 0, 0 };

	memcpy(o, jmp_rip, sizeof(jmp_rip));
	patch_put64(o + sizeof(jmp_rip), to);
}

static void jump(unsigned char *code, uint64_t to)
{
	memset(code, 0, PATCH_JUMP_LEN);
	emit_jmp_abs(code, to);
}

static int plan(const unsigned char *code, size_t size, uint64_t entry,
		uint64_t stub, uint64_t tramp, uint64_t hook,
		struct patch_plan *p, char *why, size_t why_size)
{
	struct moved moved[MOVED_MAX];
	struct patch_plan plan = { .entry = entry, .at = entry };
	unsigned int nmoved = 0, n = 0;
	uint64_t to;
	cs_insn *insn;
	csh h;
	int rc;

	if (size < JMP_REL32_LEN)
		return patch_refuse(why, why_size,
				    "the function is %zu bytes, shorter than a %d-byte jmp",
				    size, JMP_REL32_LEN);
	if (patch_distance(stub, entry) > PATCH_REACH ||
	    !fits_rel32((int64_t)(stub - (entry + JMP_REL32_LEN))))
		return patch_refuse(why, why_size,
				    "the stub is out of jmp rel32 reach of the entry");
	if (patch_distance(tramp, entry) > PATCH_REACH)
		return patch_refuse(why, why_size,
				    "the trampoline is out of reach of the entry");

	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return patch_refuse(why, why_size, "capstone has no x86-64 decoder");
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(h);
	if (!insn) {
		rc = -ENOMEM;
		goto out_close;
	}

	rc = decode_displaced(h, insn, code, size, entry, moved, &nmoved, &n,
			      why, why_size);
	if (rc)
		goto out_free;
	rc = scan_body(h, insn, code, size, entry, n, why, why_size);
	if (rc)
		goto out_free;

	for (unsigned int i = 0; i < nmoved; i++) {
		rc = emit_moved(&moved[i], code, tramp, plan.tramp_code,
				&plan.tramp_len, why, why_size);
		if (rc)
			goto out_free;
	}
	/* the way back: a direct jmp (the trampoline is within reach,
	 * checked above), which costs an allocation less than an
	 * indirect one; room for it: the _Static_assert above */
	if (!moved[nmoved - 1].ends) {
		unsigned char *o = plan.tramp_code + plan.tramp_len;

		o[0] = 0xe9;
		patch_put32(o + 1, (uint32_t)(entry + n - (tramp + plan.tramp_len +
						     JMP_REL32_LEN)));
		plan.tramp_len += JMP_REL32_LEN;
	}
	plan.tramp = tramp;

	/* Straight to the hook where a rel32 reaches it (the sampler
	 * mapped near the program), else through the stub. */
	plan.stub = stub;
	if (fits_rel32((int64_t)(hook - (entry + JMP_REL32_LEN))) &&
	    patch_distance(hook, entry) <= PATCH_REACH) {
		to = hook;
	} else {
		emit_jmp_abs(plan.stub_code, hook);
		plan.stub_len = JMP_ABS_LEN;
		to = stub;
	}

	plan.len = JMP_REL32_LEN;
	memcpy(plan.old, code, JMP_REL32_LEN);
	plan.new[0] = 0xe9;
	patch_put32(plan.new + 1, (uint32_t)(to - (entry + JMP_REL32_LEN)));
	plan.busy_lo = entry;
	plan.busy_hi = entry + n;
	*p = plan;

out_free:
	cs_free(insn, 1);
out_close:
	cs_close(&h);
	return rc;
}

const struct patch_planner patch_planner_x86_64 = {
	.cpu = "x86_64",
	.e_machine = EM_X86_64,
	.plan = plan,
	.calls = calls,
	.reach = PATCH_REACH,
	.jump = jump,
};
