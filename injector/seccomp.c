#include "injector/seccomp.h"

#include "injector/ptrace.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILTERS 64
#define MAX_INSNS BPF_MAXINSNS

struct seccomp_filters {
	struct sock_filter *prog[MAX_FILTERS];
	size_t len[MAX_FILTERS];
	size_t n;
};

/*
 * Classic BPF as seccomp accepts it (kernel/seccomp.c seccomp_check_filter:
 * loads of seccomp_data words, ALU, jumps, returns, the scratch memory).
 * Anything else, or a read outside seccomp_data, is what the kernel would
 * never have loaded: answered with KILL_PROCESS, the safe side.
 */
uint32_t seccomp_run(const void *insns, size_t n, const void *data)
{
	const struct sock_filter *f = insns;
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	size_t pc = 0;

	while (pc < n) {
		const struct sock_filter *i = &f[pc++];
		uint32_t k = i->k, src;

		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
			if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
				if (k > sizeof(struct seccomp_data) - 4 ||
				    (k & 3))
					return SECCOMP_RET_KILL_PROCESS;
				memcpy(&a, (const char *)data + k, 4);
			} else if (i->code == (BPF_LD | BPF_W | BPF_LEN)) {
				a = sizeof(struct seccomp_data);
			} else if (i->code == (BPF_LD | BPF_IMM)) {
				a = k;
			} else if (i->code == (BPF_LD | BPF_MEM) &&
				   k < BPF_MEMWORDS) {
				a = mem[k];
			} else {
				return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_LDX:
			if (i->code == (BPF_LDX | BPF_W | BPF_LEN))
				x = sizeof(struct seccomp_data);
			else if (i->code == (BPF_LDX | BPF_IMM))
				x = k;
			else if (i->code == (BPF_LDX | BPF_MEM) &&
				 k < BPF_MEMWORDS)
				x = mem[k];
			else
				return SECCOMP_RET_KILL_PROCESS;
			break;
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			mem[k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			src = BPF_SRC(i->code) == BPF_X ? x : k;
			switch (BPF_OP(i->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV:
				if (!src)
					return SECCOMP_RET_KILL_PROCESS;
				a /= src;
				break;
			case BPF_MOD:
				if (!src)
					return SECCOMP_RET_KILL_PROCESS;
				a %= src;
				break;
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default:
				return SECCOMP_RET_KILL_PROCESS;
			}
			break;
		case BPF_JMP: {
			bool t;

			if (BPF_OP(i->code) == BPF_JA) {
				pc += k;
				continue;
			}
			src = BPF_SRC(i->code) == BPF_X ? x : k;
			switch (BPF_OP(i->code)) {
			case BPF_JEQ: t = a == src; break;
			case BPF_JGT: t = a > src; break;
			case BPF_JGE: t = a >= src; break;
			case BPF_JSET: t = (a & src) != 0; break;
			default:
				return SECCOMP_RET_KILL_PROCESS;
			}
			pc += t ? i->jt : i->jf;
			break;
		}
		case BPF_RET:
			if (BPF_RVAL(i->code) == BPF_A)
				return a;
			if (BPF_RVAL(i->code) == BPF_K)
				return k;
			return SECCOMP_RET_KILL_PROCESS;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS; /* ran off the end */
}

/* "Seccomp:\t2" and "Seccomp_filters:\t3" of the thread. */
int seccomp_load(struct tracee *t, int mode, int nfilters,
		 struct seccomp_filters **out, char *why, size_t why_size)
{
	struct seccomp_filters *f;
	int rc;

	*out = NULL;
	if (mode == 0)
		return 0;
	if (mode == 1) {
		snprintf(why, why_size,
			 "thread %d runs in strict seccomp mode (read, write, exit only)",
			 (int)t->tid);
		return -EPERM;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (;;) {
		int len = tracee_seccomp_filter(t, f->n, NULL, 0);

		if (len == -ENOENT)
			break;
		if (len < 0 || len > MAX_INSNS || f->n == MAX_FILTERS) {
			snprintf(why, why_size,
				 "thread %d runs under %d seccomp filter%s that memsnap cannot read (%s)",
				 (int)t->tid, nfilters, nfilters == 1 ? "" : "s",
				 len < 0 ? strerror(-len) : "too many");
			seccomp_free(f);
			return -EPERM;
		}
		f->prog[f->n] = calloc((size_t)len + 1, sizeof(struct sock_filter));
		if (!f->prog[f->n]) {
			seccomp_free(f);
			return -ENOMEM;
		}
		rc = tracee_seccomp_filter(t, f->n, f->prog[f->n], (size_t)len);
		if (rc != len) {
			snprintf(why, why_size,
				 "thread %d: reading its seccomp filter %zu: %s",
				 (int)t->tid, f->n,
				 strerror(rc < 0 ? -rc : EIO));
			free(f->prog[f->n]);
			seccomp_free(f);
			return -EPERM;
		}
		f->len[f->n++] = (size_t)len;
	}
	if (!f->n) {
		/* Filter mode with none readable: cannot prove anything. */
		snprintf(why, why_size,
			 "thread %d is in seccomp filter mode but shows no filter",
			 (int)t->tid);
		seccomp_free(f);
		return -EPERM;
	}
	*out = f;
	return 0;
}

static const char *action_text(uint32_t ret, char *buf, size_t size)
{
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_KILL_PROCESS:
		return "kill the process";
	case SECCOMP_RET_KILL_THREAD:
		return "kill the thread";
	case SECCOMP_RET_TRAP:
		return "raise SIGSYS";
	case SECCOMP_RET_ERRNO:
		snprintf(buf, size, "fail with errno %u",
			 ret & SECCOMP_RET_DATA);
		return buf;
	case SECCOMP_RET_USER_NOTIF:
		return "wait for a supervisor";
	case SECCOMP_RET_TRACE:
		return "stop for a seccomp tracer";
	default:
		return "not run";
	}
}

bool seccomp_check(const struct seccomp_filters *f, uint32_t audit_arch,
		   long nr, const uint64_t args[6], uint64_t ip, char *why,
		   size_t why_size)
{
	struct seccomp_data d = {
		.nr = (int)nr,
		.arch = audit_arch,
		.instruction_pointer = ip,
	};
	uint32_t worst = SECCOMP_RET_ALLOW;
	char buf[32];
	size_t i;

	if (!f)
		return true;
	for (i = 0; i < 6; i++)
		d.args[i] = args ? args[i] : 0;
	/* Every filter runs; the most restrictive action wins (kernel:
	 * the lowest ACTION_ONLY as a signed value). */
	for (i = 0; i < f->n; i++) {
		uint32_t r = seccomp_run(f->prog[i], f->len[i], &d);

		if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) <
		    (int32_t)(worst & SECCOMP_RET_ACTION_FULL))
			worst = r;
	}
	if ((worst & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW ||
	    (worst & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_LOG)
		return true;
	if (why && why_size)
		snprintf(why, why_size, "%s", action_text(worst, buf, sizeof(buf)));
	return false;
}

void seccomp_free(struct seccomp_filters *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		free(f->prog[i]);
	free(f);
}
