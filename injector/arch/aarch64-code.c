/*
 * AArch64 facts the engine reads from code and status text, with no
 * thread to hand: how good a resumed sleep is to borrow (thread
 * choice), the instruction before a return address and pointer authentication
 * (the fast stack check).  Pure functions, unit-tested (test_arch.c).
 */
#include "injector/arch.h"

#include <elf.h>
#include <libunwind.h>

#include <string.h>
#include <sys/syscall.h>

bool arch_thread_refused(const char *status, char *why, size_t why_size)
{
	/* GCS, the arm64 shadow stack, shows no line in status: its regset
	 * does (arch_ctx_refused()). */
	(void)status;
	(void)why;
	(void)why_size;
	return false;
}

/* A sleep resumed after a stop: rt_sigreturn, if memsnap dies mid-call,
 * would cut it short (see the top of aarch64.c). */
const int arch_restart_score = 30;

const unsigned int arch_e_machine = EM_AARCH64;

bool arch_may_be_call_site(const unsigned char *code)
{
	uint32_t i;

	/* the instruction before a return address: code[4..7] */
	memcpy(&i, code + 4, sizeof(i));
	return (i & 0xfc000000u) == 0x94000000u ||	/* bl */
	       (i & 0xfffffc1fu) == 0xd63f0000u ||	/* blr */
	       (i & 0xfffffc1fu) == 0xd63f081fu ||	/* blraaz */
	       (i & 0xfffffc1fu) == 0xd63f0c1fu ||	/* blrabz */
	       (i & 0xfffff800u) == 0xd73f0800u;	/* blraa, blrab */
}

uint64_t arch_strip_pac(uint64_t word)
{
	/* a user address has bit 55 clear and at most 48 bits; above them
	 * sit the PAC and, for data, a tag byte */
	return word >> 55 & 1 ? word : word & 0x0000ffffffffffffull;
}

/* libunwind 1.6's DWARF_NUM_PRESERVED_REGS for AArch64 */
const unsigned int arch_unw_columns = 97;

const unsigned int arch_unw_pc = UNW_AARCH64_PC;
const unsigned int arch_unw_sp = UNW_AARCH64_SP;
