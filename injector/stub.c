/*
 * The call engine: the stub page and the gadgets that create it. See
 * injector/engine.h, and the protocol at the top of inject.c.
 */
#include "injector/engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The first 16 bytes of memsnap's stub page. */
static const char stub_signature[STUB_CODE_OFF] = "memsnap-stub-v4";

/*
 * The stub page's contents: signature, stub, helpers.  Its length, or 0
 * if the arch code does not fit (a build error in practice).
 */
static size_t stub_image(unsigned char *page)
{
	if (STUB_CODE_OFF + arch_stub_len > STUB_HELPERS_OFF ||
	    STUB_HELPERS_OFF + arch_helpers_len > STUB_IMAGE_MAX)
		return 0;
	memset(page, arch_desc.trap_fill, STUB_IMAGE_MAX);
	memcpy(page, stub_signature, STUB_CODE_OFF);
	memcpy(page + STUB_CODE_OFF, arch_stub_code, arch_stub_len);
	memcpy(page + STUB_HELPERS_OFF, arch_helpers_code, arch_helpers_len);
	return STUB_HELPERS_OFF + arch_helpers_len;
}

struct find_stub {
	struct inject_session *s;
	uint64_t found;
};

static int find_stub_cb(void *arg, const struct mapline *m)
{
	struct find_stub *fs = arg;
	unsigned char want[STUB_IMAGE_MAX], buf[STUB_IMAGE_MAX];
	size_t len = stub_image(want);

	if (!len || m->has_path || strcmp(m->perms, "r-xp") ||
	    m->end - m->start != page_size())
		return 0;
	if (tracee_read(&fs->s->t, m->start, buf, len) ||
	    memcmp(buf, want, len))
		return 0;
	fs->found = m->start;
	return 1;
}

/* Executable file mappings, to look for two code sequences in. */
struct exec_maps {
	struct mapline v[256];
	size_t n;
};

static int exec_maps_cb(void *arg, const struct mapline *m)
{
	struct exec_maps *em = arg;

	if (m->perms[0] != 'r' || m->perms[2] != 'x' || !m->has_path ||
	    em->n == sizeof(em->v) / sizeof(em->v[0]))
		return 0;
	em->v[em->n++] = *m;
	return 0;
}

static int by_size(const void *a, const void *b)
{
	const struct mapline *x = a, *y = b;
	uint64_t sx = x->end - x->start, sy = y->end - y->start;

	return sx < sy ? -1 : sx > sy;
}

static bool scan(const unsigned char *buf, size_t len, uint64_t base,
		 const unsigned char *pat, size_t plen, uint64_t *out)
{
	const unsigned char *p = buf, *end = buf + len;

	while (p + plen <= end) {
		p = memchr(p, pat[0], (size_t)(end - p) - plen + 1);
		if (!p)
			return false;
		if (!memcmp(p, pat, plen)) {
			*out = base + (uint64_t)(p - buf);
			return true;
		}
		p++;
	}
	return false;
}

/*
 * A "syscall; ret" sequence and a signal restorer in the target's code
 * (the smallest objects first: ld.so has both).
 */
static int find_gadgets(struct inject_session *s, uint64_t *sysret,
			uint64_t *restorer)
{
	enum { CHUNK = 1 << 16 };
	struct exec_maps *em = calloc(1, sizeof(*em));
	unsigned char *buf = malloc(CHUNK);
	uint64_t scanned = 0;
	size_t i;
	int rc;

	*sysret = *restorer = 0;
	if (!em || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	rc = inj_snapshot_each(s, exec_maps_cb, em);
	if (rc)
		goto out;
	qsort(em->v, em->n, sizeof(em->v[0]), by_size);
	for (i = 0; i < em->n && !(*sysret && *restorer); i++) {
		uint64_t a;

		for (a = em->v[i].start; a < em->v[i].end; a += CHUNK - 16) {
			size_t len = em->v[i].end - a < CHUNK ?
					     (size_t)(em->v[i].end - a) : CHUNK;

			if (scanned > GADGET_SCAN_MAX ||
			    proc_read_mem(s->pid, a, buf, len))
				break;
			scanned += len;
			if (!*sysret)
				scan(buf, len, a, arch_pat_syscall_ret,
				     arch_pat_syscall_ret_len, sysret);
			if (!*restorer)
				scan(buf, len, a, arch_pat_sigreturn,
				     arch_pat_sigreturn_len, restorer);
			if ((*sysret && *restorer) || len < CHUNK)
				break;
		}
	}
	rc = *sysret && *restorer ? 0 : -ENOEXEC;
out:
	free(em);
	free(buf);
	return rc;
}

/* Create the stub page (see the top of this file). */
static int make_stub(struct inject_session *s)
{
	unsigned char page[STUB_IMAGE_MAX];
	size_t len = stub_image(page);
	uint64_t sysret, restorer, lo, sp, args[6], after;
	struct arch_peek p;
	uint64_t deadline = inj_deadline_after(STOP_TIMEOUT_MS);
	char act[64];
	void *frame;
	int rc;

	if (!len)
		return -EINVAL;
	rc = find_gadgets(s, &sysret, &restorer);
	if (rc)
		return rc;
	rc = arch_frame_build(s->ctx, arch_reg(s->ctx, ARCH_SP) - arch_desc.red_zone, restorer,
			      s->sigmask, 0, 0, &frame, &lo, &sp);
	if (rc)
		return rc;
	rc = inj_stack_write(s, lo, frame, arch_reg(s->ctx, ARCH_SP) - arch_desc.red_zone - lo);
	free(frame);
	if (rc)
		return rc;
	args[0] = 0;
	args[1] = page_size();
	args[2] = 0x1 | 0x4;	/* PROT_READ | PROT_EXEC */
	args[3] = 0x02 | 0x20;	/* MAP_PRIVATE | MAP_ANONYMOUS */
	args[4] = (uint64_t)-1;
	args[5] = 0;
	/* Neither the mmap nor, if memsnap dies, the restorer's
	 * rt_sigreturn may be something a seccomp filter punishes. */
	after = sysret + arch_desc.syscall_insn_len;
	if (!seccomp_check(s->sc, arch_audit, arch_nr_mmap, args, after, act,
			   sizeof(act))) {
		return inj_fail(s, -EOPNOTSUPP, INJ_KIND_OF_RC,
				"its seccomp filter would %s for the mmap(PROT_READ|PROT_EXEC) of memsnap's stub page",
				act);
	}
	if (!seccomp_check(s->sc, arch_audit, arch_nr_rt_sigreturn, NULL,
			   restorer + arch_pat_sigreturn_len, act, sizeof(act))) {
		return inj_fail(s, -EOPNOTSUPP, INJ_KIND_OF_RC,
				"its seccomp filter would %s for rt_sigreturn",
				act);
	}
	rc = arch_set_syscall(&s->t, s->ctx, sysret, arch_nr_mmap, args, 6, sp,
			      restorer);
	if (!rc)
		rc = tracee_syscall(&s->t, 0);
	/* Entry, then exit, both at the instruction after the syscall. */
	if (!rc)
		rc = inj_wait_syscall_stop(s, deadline, after, arch_nr_mmap, &p);
	if (!rc)
		rc = tracee_syscall(&s->t, 0);
	if (!rc)
		rc = inj_wait_syscall_stop(s, deadline, after, arch_nr_mmap, &p);
	if (rc == -EFAULT)
		inj_describe_fault(s);
	if (rc == -ETIMEDOUT) {
		/* its return runs the restorer's rt_sigreturn */
		inj_fail(s, -ETIMEDOUT, INJ_KIND_OF_RC,
			 "thread %d did not come back from the mmap of "
			 "memsnap's stub page within %d ms; it restores itself "
			 "when it runs", (int)s->t.tid, STOP_TIMEOUT_MS);
		return inj_left_healing(s);
	}
	if (rc)
		return rc;
	if (p.ret > (uint64_t)-4096 || (p.ret & (page_size() - 1)) || !p.ret) {
		return inj_fail(s, -ENOMEM, INJ_KIND_OF_RC,
				"mmap in the target failed: %s",
				strerror((int)-(int64_t)p.ret));
	}
	rc = tracee_write(&s->t, p.ret, page, len);
	if (rc)
		return rc;
	s->stub = p.ret + STUB_CODE_OFF;
	return 0;
}

int inj_ensure_stub(struct inject_session *s)
{
	struct find_stub fs = { .s = s };

	inj_snapshot_each(s, find_stub_cb, &fs);
	if (fs.found) {
		s->stub = fs.found + STUB_CODE_OFF;
		return 0;
	}
	return make_stub(s);
}

uint64_t inject_helper(const struct inject_session *s, enum inject_helper h)
{
	static const int arch_of[] = {
		[INJECT_HELPER_SYSCALL] = ARCH_HELPER_SYSCALL,
		[INJECT_HELPER_WRITE_CB] = ARCH_HELPER_WRITE_CB,
		[INJECT_HELPER_WRITE_CB_MSG_FIRST] =
			ARCH_HELPER_WRITE_CB_MSG_FIRST,
		[INJECT_HELPER_CHAIN] = ARCH_HELPER_CHAIN,
	};

	if (!s->stub || (unsigned int)h >= sizeof(arch_of) / sizeof(*arch_of))
		return 0;
	return s->stub - STUB_CODE_OFF + STUB_HELPERS_OFF +
	       arch_helper_off[arch_of[h]];
}

int inject_stub_range(const struct inject_session *s, uint64_t *lo,
		      uint64_t *hi)
{
	if (!s || !s->stub)
		return -ENOENT;
	*lo = s->stub - STUB_CODE_OFF;
	*hi = *lo + page_size();
	return 0;
}

bool inject_pc_in_stub(const struct inject_session *s, uint64_t pc)
{
	uint64_t page = s && s->stub ? s->stub - STUB_CODE_OFF : 0;

	return page && pc >= page && pc - page < page_size();
}
