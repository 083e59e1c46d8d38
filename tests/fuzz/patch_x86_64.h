/*
 * fuzz_patch.c's checks for the x86-64 planner (injector/arch/
 * x86_64-patch.c): the layouts it is planned at, the trampoline
 * decoded back against the instructions it moves, PLANNER.calls()
 * against a sweep of capstone's own.  Included by fuzz_patch.c alone.
 */
#ifndef MEMSNAP_TESTS_FUZZ_PATCH_X86_64_H
#define MEMSNAP_TESTS_FUZZ_PATCH_X86_64_H

static const struct layout layouts[] = {
	/* as sampler/direct.c maps them: 1 MiB above, hook far */
	{ ENTRY, ENTRY + 0x100000, ENTRY + 0x100040, FAR_HOOK },
	/* the hook itself within reach: no stub */
	{ ENTRY, ENTRY + 0x100000, ENTRY + 0x100040, ENTRY + 0x200000 },
	/* stub and trampoline below, as far as reach (2 GiB - 16 MiB)
	 * allows: moved rip-relative operands and branches fall out of
	 * reach */
	{ ENTRY, ENTRY - 0x7effff00, ENTRY - 0x7effff00 + 0x40, FAR_HOOK },
	/* low in the address space: targets wrap below 0 */
	{ 0x10000, 0x20000, 0x20040, FAR_HOOK },
};

static csh cs;

FUZZ_NOCOV
static void planner_init(void)
{
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		abort();
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
}

FUZZ_NOCOV
static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

FUZZ_NOCOV
static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

/* The target of a direct branch (jmp, jcc, call, loop, jrcxz,
 * xbegin): true and *@to. */
FUZZ_NOCOV
static bool direct_target(const cs_insn *insn, uint64_t *to)
{
	const cs_x86 *x = &insn->detail->x86;
	bool branch = false;

	for (unsigned int i = 0; i < insn->detail->groups_count; i++)
		if (insn->detail->groups[i] == X86_GRP_JUMP ||
		    insn->detail->groups[i] == X86_GRP_CALL ||
		    insn->detail->groups[i] == X86_GRP_BRANCH_RELATIVE)
			branch = true;
	if (insn->id == X86_INS_XBEGIN || insn->id == X86_INS_LOOP ||
	    insn->id == X86_INS_LOOPE || insn->id == X86_INS_LOOPNE)
		branch = true;
	if (!branch || x->op_count < 1 || x->operands[0].type != X86_OP_IMM)
		return false;
	*to = (uint64_t)x->operands[0].imm;
	return true;
}

/* The absolute address of a rip-relative operand: true and *@addr. */
FUZZ_NOCOV
static bool rip_address(const cs_insn *insn, uint64_t *addr)
{
	const cs_x86 *x = &insn->detail->x86;

	for (unsigned int i = 0; i < x->op_count; i++)
		if (x->operands[i].type == X86_OP_MEM &&
		    x->operands[i].mem.base == X86_REG_RIP) {
			*addr = insn->address + insn->size +
				(uint64_t)x->operands[i].mem.disp;
			return true;
		}
	return false;
}

/* One instruction of @code (@size bytes, at @addr) into @insn. */
FUZZ_NOCOV
static bool decode_one(const unsigned char *code, size_t size, uint64_t addr,
		       cs_insn *insn)
{
	const uint8_t *c = code;

	return cs_disasm_iter(cs, &c, &size, &addr, insn);
}

/* jmp rel32 at @p (at address @at): where to. */
FUZZ_NOCOV
static uint64_t jmp_rel32_to(const unsigned char *p, uint64_t at)
{
	FUZZ_CHECK(p[0] == 0xe9);
	return at + 5 + (uint64_t)(int64_t)(int32_t)rd32(p + 1);
}

/*
 * The whole body decodes, no branch of it (nor a rip-relative address)
 * lands strictly inside (entry, busy_hi).
 */
FUZZ_NOCOV
static void check_body(const unsigned char *code, size_t size,
		       const struct patch_plan *p, cs_insn *insn)
{
	const uint8_t *c = code;
	uint64_t addr = p->entry, to;
	size_t left = size;

	while (left) {
		FUZZ_CHECK(cs_disasm_iter(cs, &c, &left, &addr, insn));
		if (direct_target(insn, &to))
			FUZZ_CHECK(!(to > p->entry && to < p->busy_hi));
		if (rip_address(insn, &to))
			FUZZ_CHECK(!(to > p->entry && to < p->busy_hi));
	}
}

FUZZ_NOCOV
static void check_plan_arch(const unsigned char *code, size_t size,
			   const struct patch_plan *p, const struct layout *l)
{
	cs_insn *orig = cs_malloc(cs), *moved = cs_malloc(cs);
	unsigned int off = 0, toff = 0, n;
	bool ended = false;
	uint64_t a, b;

	FUZZ_CHECK(orig && moved);
	FUZZ_CHECK(p->at == l->entry && p->len == 5);
	FUZZ_CHECK(p->busy_lo == l->entry);
	n = (unsigned int)(p->busy_hi - l->entry);
	FUZZ_CHECK(n >= 5 && n <= size);

	/* the entry: jmp to the hook, or to the stub that jumps to it */
	if (p->stub_len) {
		FUZZ_CHECK(jmp_rel32_to(p->new, l->entry) == l->stub);
		FUZZ_CHECK(p->stub_len == 14);
		FUZZ_CHECK(!memcmp(p->stub_code, "\xff\x25\0\0\0\0", 6));
		FUZZ_CHECK(rd64(p->stub_code + 6) == l->hook);
	} else {
		FUZZ_CHECK(jmp_rel32_to(p->new, l->entry) == l->hook);
	}

	/* the trampoline, against the instructions it replaces */
	while (off < n) {
		ended = false;
		FUZZ_CHECK(decode_one(code + off, size - off, l->entry + off,
				      orig));
		FUZZ_CHECK(off + orig->size <= n);
		FUZZ_CHECK(toff < p->tramp_len);
		FUZZ_CHECK(decode_one(p->tramp_code + toff, p->tramp_len - toff,
				      l->tramp + toff, moved));
		if (direct_target(orig, &a)) {
			FUZZ_CHECK(direct_target(moved, &b));
			FUZZ_CHECK(moved->id == orig->id);
			FUZZ_CHECK(a == b);
			ended = orig->id == X86_INS_JMP;
		} else if (rip_address(orig, &a)) {
			FUZZ_CHECK(rip_address(moved, &b));
			FUZZ_CHECK(moved->id == orig->id);
			FUZZ_CHECK(moved->size == orig->size);
			FUZZ_CHECK(a == b);
			ended = orig->id == X86_INS_JMP;
		} else {
			FUZZ_CHECK(moved->size == orig->size);
			FUZZ_CHECK(!memcmp(moved->bytes, orig->bytes,
					   orig->size));
			/* only what runs the same anywhere moves verbatim */
			FUZZ_CHECK(orig->id != X86_INS_JMP &&
				   orig->id != X86_INS_CALL);
		}
		off += orig->size;
		toff += moved->size;
	}
	FUZZ_CHECK(off == n);
	if (!ended) {
		FUZZ_CHECK(toff + 5 == p->tramp_len);
		FUZZ_CHECK(jmp_rel32_to(p->tramp_code + toff,
					l->tramp + toff) == l->entry + n);
	} else {
		FUZZ_CHECK(toff == p->tramp_len);
	}
	check_body(code, size, p, orig);
	cs_free(orig, 1);
	cs_free(moved, 1);
}

/*
 * PLANNER.calls() against a sweep of our own: the direct targets found
 * before the first byte that does not decode.
 */
FUZZ_NOCOV
static void check_calls(const unsigned char *code, size_t size,
			uint64_t entry)
{
	uint64_t targets[NTARGETS + 2], to, addr = entry;
	bool hit[NTARGETS + 2] = { false }, want[NTARGETS + 2] = { false };
	cs_insn *insn = cs_malloc(cs);
	const uint8_t *c = code;
	size_t left = size, n = 0, j;
	bool stopped = false;
	int rc;

	FUZZ_CHECK(insn);
	/* pass 1: the targets to ask for */
	while (left && n < NTARGETS) {
		if (!cs_disasm_iter(cs, &c, &left, &addr, insn))
			break;
		if (direct_target(insn, &to) && to != entry)
			targets[n++] = to;
	}
	targets[n++] = entry;		/* never counted */
	targets[n++] = entry - 1;	/* counted only if some branch goes */
	/* pass 2: which of them the body reaches */
	c = code;
	left = size;
	addr = entry;
	while (left) {
		if (!cs_disasm_iter(cs, &c, &left, &addr, insn)) {
			stopped = true;
			break;
		}
		if (!direct_target(insn, &to) || to == entry)
			continue;
		for (j = 0; j < n; j++)
			if (targets[j] == to)
				want[j] = true;
	}
	cs_free(insn, 1);

	rc = PLANNER.calls(code, size, entry, targets, n, hit);
	FUZZ_CHECK(rc == 0 || rc == -EOPNOTSUPP);
	FUZZ_CHECK((rc == -EOPNOTSUPP) == stopped);
	for (j = 0; j < n; j++)
		FUZZ_CHECK(hit[j] == want[j]);
}

#endif
