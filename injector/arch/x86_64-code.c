/*
 * x86-64 facts the engine reads from code and status text, with no
 * thread to hand: how good a resumed sleep is to borrow (thread
 * choice), the instruction before a return address (the fast stack
 * check), the shadow-stack refusal.  Pure functions, unit-tested (test_arch.c).
 */
#include "injector/arch.h"

#include <elf.h>
#include <libunwind.h>

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

bool arch_thread_refused(const char *status, char *why, size_t why_size)
{
	const char *p = strstr(status, "\nx86_Thread_features:");
	const char *eol, *shstk;

	if (!p)
		return false;
	eol = strchr(p + 1, '\n');
	shstk = strstr(p, "shstk");
	if (!shstk || (eol && shstk > eol))
		return false;
	snprintf(why, why_size, "CET shadow stack enabled");
	return true;
}

/* A sleep resumed after a stop (memsnap's earlier visit): as good as
 * the sleep it was. */
const int arch_restart_score = 100;

const unsigned int arch_e_machine = EM_X86_64;

bool arch_may_be_call_site(const unsigned char *c)
{
	/* call rel32: e8 xx xx xx xx */
	if (c[3] == 0xe8)
		return true;
	/* call *r/m: ff /2, with a ModRM of 1 to 7 bytes (+ REX), or the
	 * far form ff /3: accept any ff whose ModRM reg field is 2 or 3
	 * at a length that fits the ModRM's addressing mode. */
	for (int len = 2; len <= 7; len++) {
		unsigned char op = c[8 - len], modrm = c[8 - len + 1];
		unsigned int reg = (modrm >> 3) & 7, mod = modrm >> 6;
		unsigned int rm = modrm & 7;
		int need;

		if (op != 0xff || (reg != 2 && reg != 3))
			continue;
		if (mod == 3)
			need = 2;
		else if (mod == 0 && rm == 4)
			/* SIB; base 5 means a disp32 */
			need = len >= 3 && (c[8 - len + 2] & 7) == 5 ? 7 : 3;
		else if (mod == 0)
			need = rm == 5 ? 6 : 2;
		else if (mod == 1)
			need = rm == 4 ? 4 : 3;
		else
			need = rm == 4 ? 7 : 6;
		if (need == len)
			return true;
	}
	return false;
}

uint64_t arch_strip_pac(uint64_t word)
{
	return word;
}

/* libunwind 1.6's DWARF_NUM_PRESERVED_REGS for x86-64 */
const unsigned int arch_unw_columns = 17;

const unsigned int arch_unw_pc = UNW_X86_64_RIP;
const unsigned int arch_unw_sp = UNW_X86_64_RSP;
