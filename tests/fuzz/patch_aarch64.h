/*
 * fuzz_patch.c's checks for the arm64 planner (injector/arch/
 * aarch64-patch.c): the layouts it is planned at, the stub and the
 * trampoline decoded back with capstone (not with the planner's own
 * encoding tables) against the instruction moved, PLANNER.calls()
 * against capstone's view of every word.  Included by fuzz_patch.c
 * alone; built on any machine.
 */
#ifndef MEMSNAP_TESTS_FUZZ_PATCH_AARCH64_H
#define MEMSNAP_TESTS_FUZZ_PATCH_AARCH64_H

/* b reaches 128 MiB; the planner keeps 4 MiB of it as a margin */
#define A64_REACH ((UINT64_C(1) << 27) - (UINT64_C(4) << 20))

static const struct layout layouts[] = {
	/* as sampler/direct.c maps them: 1 MiB above, hook far */
	{ ENTRY, ENTRY + 0x100000, ENTRY + 0x100040, FAR_HOOK },
	/* the hook itself within reach: no stub unless lr is signed */
	{ ENTRY, ENTRY + 0x100000, ENTRY + 0x100040, ENTRY + 0x200000 },
	/* stub and trampoline below, at the edge of reach: moved
	 * branches and adr fall out of theirs */
	{ ENTRY, ENTRY - A64_REACH + 0x100, ENTRY - A64_REACH + 0x140,
	  FAR_HOOK },
	/* low in the address space, the stub not 8-byte aligned: the
	 * ldr literal needs a nop before it */
	{ 0x10000, 0x20004, 0x20040, FAR_HOOK },
};

static csh cs;

FUZZ_NOCOV
static void planner_init(void)
{
	if (cs_open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &cs) != CS_ERR_OK)
		abort();
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
}

FUZZ_NOCOV
static uint32_t a64_word(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* The word at @p, at address @pc, decoded into @insn. */
FUZZ_NOCOV
static bool a64_decode(const unsigned char *p, uint64_t pc, cs_insn *insn)
{
	const uint8_t *c = p;
	size_t left = 4;

	return cs_disasm_iter(cs, &c, &left, &pc, insn);
}

FUZZ_NOCOV
static bool a64_is_branch(const cs_insn *insn)
{
	for (unsigned int i = 0; i < insn->detail->groups_count; i++)
		if (insn->detail->groups[i] == ARM64_GRP_JUMP ||
		    insn->detail->groups[i] == ARM64_GRP_CALL ||
		    insn->detail->groups[i] == ARM64_GRP_BRANCH_RELATIVE)
			return true;
	return false;
}

/* A direct branch's target: its last operand, an address. */
FUZZ_NOCOV
static bool a64_target(const cs_insn *insn, uint64_t *to)
{
	const cs_arm64 *a = &insn->detail->arm64;

	if (!a64_is_branch(insn) || !a->op_count ||
	    a->operands[a->op_count - 1].type != ARM64_OP_IMM)
		return false;
	*to = (uint64_t)a->operands[a->op_count - 1].imm;
	return true;
}

/* b (not bl) at @p, at address @pc: where to. */
FUZZ_NOCOV
static uint64_t a64_b_to(const unsigned char *p, uint64_t pc)
{
	uint32_t w = a64_word(p);
	uint64_t imm = w & 0x03ffffffu;

	FUZZ_CHECK((w & 0xfc000000u) == 0x14000000u);
	return pc + (uint64_t)(((int64_t)(imm << 38) >> 38) * 4);
}

/* The inverse condition in capstone's numbering: EQ 1 / NE 2, ... */
FUZZ_NOCOV
static arm64_cc a64_inverse(arm64_cc cc)
{
	return cc & 1 ? cc + 1 : cc - 1;
}

/* cbz <-> cbnz, tbz <-> tbnz */
FUZZ_NOCOV
static unsigned int a64_inverse_id(unsigned int id)
{
	switch (id) {
	case ARM64_INS_CBZ:
		return ARM64_INS_CBNZ;
	case ARM64_INS_CBNZ:
		return ARM64_INS_CBZ;
	case ARM64_INS_TBZ:
		return ARM64_INS_TBNZ;
	case ARM64_INS_TBNZ:
		return ARM64_INS_TBZ;
	}
	return ARM64_INS_INVALID;
}

FUZZ_NOCOV
static bool same_operand(const cs_arm64_op *a, const cs_arm64_op *b)
{
	if (a->type != b->type)
		return false;
	if (a->type == ARM64_OP_REG)
		return a->reg == b->reg;
	return a->imm == b->imm;
}

FUZZ_NOCOV
static void check_plan_arch(const unsigned char *code, size_t size,
			    const struct patch_plan *p, const struct layout *l)
{
	cs_insn *orig = cs_malloc(cs), *moved = cs_malloc(cs);
	uint32_t first = a64_word(code);
	unsigned int off = (unsigned int)(p->at - l->entry), t = 0, s = 0;
	uint64_t to, mto, pc;
	const cs_arm64 *oa, *ma;
	bool pac = first == 0xd503233fu || first == 0xd503237fu;
	bool back = true;

	(void)size;
	FUZZ_CHECK(orig && moved);
	/* one word replaced, after a landing pad if there is one */
	FUZZ_CHECK(off == 0 || off == 4);
	FUZZ_CHECK(p->len == 4 && p->busy_lo == p->at && p->busy_hi == p->at);
	FUZZ_CHECK(a64_decode(code + off, p->at, orig));
	oa = &orig->detail->arm64;

	/* the entry: b to the hook, or to the stub that goes on to it */
	if (p->stub_len) {
		FUZZ_CHECK(a64_b_to(p->new, p->at) == l->stub);
		if (pac) {	/* autiasp / autibsp first */
			FUZZ_CHECK(a64_word(p->stub_code) ==
				   (first == 0xd503233fu ? 0xd50323bfu
							 : 0xd50323ffu));
			s = 4;
		}
		if ((l->stub + s) & 7) {
			FUZZ_CHECK(a64_word(p->stub_code + s) == 0xd503201fu);
			s += 4;
		}
		FUZZ_CHECK(a64_word(p->stub_code + s) == 0x58000050u);
		FUZZ_CHECK(a64_word(p->stub_code + s + 4) == 0xd61f0200u);
		FUZZ_CHECK(a64_word(p->stub_code + s + 8) == (uint32_t)l->hook);
		FUZZ_CHECK(a64_word(p->stub_code + s + 12) ==
			   (uint32_t)(l->hook >> 32));
		FUZZ_CHECK(p->stub_len == s + 16);
	} else {
		FUZZ_CHECK(!pac);
		FUZZ_CHECK(a64_b_to(p->new, p->at) == l->hook);
	}

	/* the trampoline: the landing pad's own first, then the word */
	if (off) {
		FUZZ_CHECK(a64_word(p->tramp_code) ==
			   (pac ? first : 0xd503245fu));
		t = 4;
	}
	pc = l->tramp + t;
	FUZZ_CHECK(t < p->tramp_len);
	FUZZ_CHECK(a64_decode(p->tramp_code + t, pc, moved));
	ma = &moved->detail->arm64;
	if (a64_target(orig, &to)) {
		bool cond = oa->cc != ARM64_CC_INVALID &&
			    oa->cc != ARM64_CC_AL && oa->cc != ARM64_CC_NV;

		if (orig->id == ARM64_INS_B && !cond) {
			/* b, b.al, b.nv: a b to the same place, no way back */
			FUZZ_CHECK(a64_b_to(p->tramp_code + t, pc) == to);
			back = false;
			t += 4;
		} else if (orig->id == ARM64_INS_BL) {
			FUZZ_CHECK(moved->id == ARM64_INS_BL);
			FUZZ_CHECK(a64_target(moved, &mto) && mto == to);
			t += 4;
		} else {
			/* the inverse skips the b to the target */
			FUZZ_CHECK(a64_target(moved, &mto) && mto == pc + 8);
			FUZZ_CHECK(ma->op_count == oa->op_count);
			if (orig->id == ARM64_INS_B) {
				FUZZ_CHECK(moved->id == ARM64_INS_B);
				FUZZ_CHECK(ma->cc == a64_inverse(oa->cc));
			} else {
				FUZZ_CHECK(moved->id ==
					   a64_inverse_id(orig->id));
				/* the register, and tbz's bit */
				for (int i = 0; i + 1 < oa->op_count; i++)
					FUZZ_CHECK(same_operand(
						&oa->operands[i],
						&ma->operands[i]));
			}
			FUZZ_CHECK(a64_b_to(p->tramp_code + t + 4, pc + 4) ==
				   to);
			t += 8;
		}
	} else if (orig->id == ARM64_INS_ADR || orig->id == ARM64_INS_ADRP) {
		/* the same register gets the same address (or page) */
		FUZZ_CHECK(moved->id == orig->id);
		FUZZ_CHECK(oa->op_count == 2 && ma->op_count == 2);
		FUZZ_CHECK(same_operand(&oa->operands[0], &ma->operands[0]));
		FUZZ_CHECK(oa->operands[1].imm == ma->operands[1].imm);
		t += 4;
	} else {
		FUZZ_CHECK(!a64_is_branch(orig));
		FUZZ_CHECK(a64_word(p->tramp_code + t) == a64_word(code + off));
		t += 4;
	}
	if (back) {
		FUZZ_CHECK(t + 4 == p->tramp_len);
		FUZZ_CHECK(a64_b_to(p->tramp_code + t, l->tramp + t) ==
			   p->at + 4);
	} else {
		FUZZ_CHECK(t == p->tramp_len);
	}
	cs_free(orig, 1);
	cs_free(moved, 1);
}

/*
 * PLANNER.calls() walks words, not a decoder's stream: every direct
 * branch capstone sees in a whole word is one it marks.
 */
FUZZ_NOCOV
static void check_calls(const unsigned char *code, size_t size,
			uint64_t entry)
{
	uint64_t targets[NTARGETS + 2], to;
	bool hit[NTARGETS + 2] = { false }, want[NTARGETS + 2] = { false };
	cs_insn *insn = cs_malloc(cs);
	size_t n = 0, off, j;
	int rc;

	FUZZ_CHECK(insn);
	for (off = 0; off + 4 <= size && n < NTARGETS; off += 4)
		if (a64_decode(code + off, entry + off, insn) &&
		    a64_target(insn, &to) && to != entry)
			targets[n++] = to;
	targets[n++] = entry;
	targets[n++] = entry - 4;
	for (off = 0; off + 4 <= size; off += 4) {
		if (!a64_decode(code + off, entry + off, insn) ||
		    !a64_target(insn, &to) || to == entry)
			continue;
		for (j = 0; j < n; j++)
			if (targets[j] == to)
				want[j] = true;
	}
	cs_free(insn, 1);
	rc = PLANNER.calls(code, size, entry, targets, n, hit);
	FUZZ_CHECK(rc == 0);
	for (j = 0; j < n; j++)
		FUZZ_CHECK(hit[j] == want[j]);
}

#endif
