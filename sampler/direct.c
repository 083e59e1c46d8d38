/*
 * The sampler for an allocator linked into the program itself (a static
 * libjemalloc.a, libtcmalloc_minimal.a, je_malloc in a redis built from
 * source): the program calls it directly, through no GOT slot, so its
 * entry points are patched to jump to the direct family of hooks
 * (injector/patch.h has the shape of a patch, injector/world.c writes
 * them with every thread stopped).
 *
 *   - One mapping near the program (a jump's reach) holds, for each
 *     function, a stub on to its hook and a trampoline that is the
 *     original: the moved first instructions, then back into it.  It
 *     stays mapped after prof off, like the sampler's code, for a thread
 *     still inside it.
 *   - Every function is planned before any is written: malloc and every
 *     function that frees must plan, or nothing is patched (a block
 *     sampled at malloc and freed where no hook sees it would stay in
 *     the profile as a leak); others that cannot be moved are left out
 *     and named.
 *   - The plans are logged in the control block before they are
 *     written, so prof off (and a later prof on) finds every patch even
 *     after a memsnap killed half-way.
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"
#include "injector/patch.h"
#include "proc/maps.h"
#include "proc/procfs.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* The longest function body read and checked for branches back into
 * its first bytes: entry points are small, a larger one is left out. */
#define BODY_MAX (64u << 10)
/* Space kept free around the mapping near the program. */
#define GUARD (1u << 20)
#define LOWEST (1u << 16)	/* mmap_min_addr's usual value */

/* The program's object: the one its program headers (AT_PHDR) are in. */
static struct object *program(struct objects *os)
{
	const struct proc_auxv *av;

	if (objects_auxv(os, &av) || !av->phdr)
		return NULL;
	return objects_find(os, av->phdr);
}

const struct allocator *sampler_linked_allocator(struct objects *os,
						 const struct detection *det)
{
	struct object *prog = program(os);
	size_t i;

	for (i = 0; prog && i < det->n; i++)
		if (det->v[i].obj == prog)
			return &det->v[i];
	return NULL;
}

static bool frees(enum sampler_fn fn)
{
#define FREES(sym, FN, SHAPE, cxx, name) \
	[SAMPLER_##FN] = SAMPLER_FREES_SHAPE(SHAPE),
	static const bool v[SAMPLER_NFN] = { SAMPLER_FAMILY(FREES) };
#undef FREES

	return fn < SAMPLER_NFN && v[fn];
}

/*
 * The malloc family as the program's allocator @a defines it: C names
 * behind its prefix, the C++ operators only where they are its own (a
 * libstdc++ linked in statically has std::get_new_handler, and its
 * operator new calls malloc, which is seen there).  An alias of a
 * function already found (tcmalloc's memalign is its aligned_alloc) is
 * patched once.
 */
static size_t find_functions(struct objects *os, const struct allocator *a,
			     struct sampler_entry *v, size_t max)
{
	struct symbol sym;
	bool cxx;
	size_t i, j, n = 0;

	cxx = !object_lookup(os, a->obj, "_Znwm", 0, &sym) &&
	      object_lookup(os, a->obj, "_ZSt15get_new_handlerv", 0, &sym);
	for (i = 0; i < sampler_nhooks && n < max; i++) {
		const struct sampler_hook *h = &sampler_hooks[i];

		if (!h->direct_off || (h->cxx && !cxx))
			continue;
		snprintf(v[n].name, sizeof(v[n].name), "%s%s",
			 h->cxx ? "" : a->prefix, h->name);
		if (object_lookup(os, a->obj, v[n].name, 0, &sym) ||
		    sym.type != STT_FUNC || !sym.addr)
			continue;
		for (j = 0; j < n && v[j].addr != sym.addr; j++)
			;
		if (j < n)
			continue;
		v[n].h = h;
		v[n].addr = sym.addr;
		v[n].size = sym.size;
		n++;
	}
	return n;
}

/*
 * An address for @len bytes within reach of the whole program
 * [@lo, @hi): at the top of a gap below it or the bottom of one above,
 * GUARD away from any mapping and from [@xlo, @xhi) (the sampler, just
 * mapped: @m is older), never just above the heap (brk grows there) nor
 * just below the stack.  0 when none is.
 */
static uint64_t near_gap(const struct maps *m, uint64_t lo, uint64_t hi,
			 uint64_t len, uint64_t xlo, uint64_t xhi)
{
	uint64_t reach = patch_native()->reach, best = 0, best_d = UINT64_MAX;
	size_t i;

	for (i = 0; i <= m->n; i++) {
		uint64_t g_lo = i ? m->v[i - 1].end : LOWEST;
		uint64_t g_hi = i < m->n ? m->v[i].start : 0;
		uint64_t a, d;

		if (i == m->n || g_hi <= g_lo || g_hi - g_lo < len + 2 * GUARD)
			continue;
		if (i && m->v[i - 1].path &&
		    !strcmp(m->v[i - 1].path, "[heap]"))
			continue;
		if (m->v[i].path && !strcmp(m->v[i].path, "[stack]"))
			continue;
		if (g_hi <= lo) {
			a = (g_hi - GUARD - len) & ~(uint64_t)(page_size() - 1);
			if (xhi && a < xhi + GUARD && a + len + GUARD > xlo)
				a = (xlo - GUARD - len) &
				    ~(uint64_t)(page_size() - 1);
			if (a < g_lo + GUARD || a > g_hi)
				continue;
		} else if (g_lo >= hi) {
			a = (g_lo + GUARD + page_size() - 1) &
			    ~(uint64_t)(page_size() - 1);
			if (xhi && a < xhi + GUARD && a + len + GUARD > xlo)
				a = (xhi + GUARD + page_size() - 1) &
				    ~(uint64_t)(page_size() - 1);
			if (a + len + GUARD > g_hi)
				continue;
		} else {
			continue;
		}
		/* every byte of it within reach of every byte of the
		 * program */
		if ((a < lo ? hi - a : a + len - lo) > reach)
			continue;
		d = a < lo ? lo - a : a - hi;
		if (d < best_d) {
			best = a;
			best_d = d;
		}
	}
	return best;
}

uint64_t sampler_near(const struct allocator *linked, const struct maps *maps,
		      uint64_t len)
{
	return linked ? near_gap(maps, linked->obj->lo, linked->obj->hi, len,
				 0, 0)
		      : 0;
}

static void unmap(struct alloc_session *s, uint64_t addr, uint64_t len)
{
	uint64_t args[2] = { addr, len };
	int64_t ret;

	inject_syscall(alloc_inject(s), SYS_munmap, args, 2, &ret);
}

/* Map the page(s) near the program, and away from the sampler at
 * [@xlo, @xhi): read-write until written. */
static int map_near(struct alloc_session *s, const struct maps *maps,
		    const struct object *prog, uint64_t xlo, uint64_t xhi,
		    uint64_t len, uint64_t *out)
{
	uint64_t want = near_gap(maps, prog->lo, prog->hi, len, xlo, xhi);
	uint64_t got;
	int rc;

	*out = 0;
	if (!want)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "no free address within a jump of the program");
	rc = sampler_mmap(s, want, len, 0, &got);
	if (rc)
		return rc;
	if (got != want) {
		/* taken meanwhile: the kernel chose elsewhere */
		unmap(s, got, len);
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "the address near the program was taken");
	}
	*out = got;
	return 0;
}

/* "NAME: WHY" appended to @why, after a "; " when it holds some. */
static void why_add(char *why, size_t size, const char *name,
		    const char *reason)
{
	size_t n = strlen(why);

	if (n + 3 < size)
		snprintf(why + n, size - n, "%s%s: %s", n ? "; " : "", name,
			 reason);
}

/* Every function's body, read, into f[i].code (NULL: not readable or
 * too long, f[i].err says). */
static void read_bodies(pid_t pid, struct sampler_entry *f, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		f[i].code = NULL;
		f[i].err = -EOPNOTSUPP;
		if (!f[i].size || f[i].size > BODY_MAX)
			continue;
		f[i].code = malloc(f[i].size);
		if (!f[i].code) {
			f[i].err = -ENOMEM;
			continue;
		}
		f[i].err = proc_read_mem(pid, f[i].addr, f[i].code, f[i].size);
		if (f[i].err) {
			free(f[i].code);
			f[i].code = NULL;
		}
	}
}

/*
 * Which functions call another of them, or are called by one: those
 * get the guarded hooks.  A body that cannot be walked may call any.
 */
static void mark_related(struct sampler_entry *f, size_t n)
{
	uint64_t targets[SAMPLER_MAXPATCH];
	bool hit[SAMPLER_MAXPATCH];
	size_t i, j;

	for (i = 0; i < n; i++) {
		targets[i] = f[i].addr;
		f[i].related = false;
	}
	for (i = 0; i < n; i++) {
		memset(hit, 0, sizeof(hit));
		if (!f[i].code ||
		    patch_native()->calls(f[i].code, f[i].size, f[i].addr, targets,
				     n, hit)) {
			for (j = 0; j < n; j++)
				hit[j] = true;
		}
		for (j = 0; j < n; j++) {
			if (j == i || !hit[j])
				continue;
			f[i].related = f[j].related = true;
		}
	}
}

/* Plans for the @n functions of @f, stubs and trampolines at @page. */
static int plan_all(uint64_t image, uint64_t page,
		    const struct sampler_entry *f, size_t n,
		    struct sampler_direct *d)
{
	uint64_t tramps = page + n * PATCH_STUB_LEN;
	size_t i;
	int rc = 0;

	d->plans = calloc(n, sizeof(*d->plans));
	d->fns = calloc(n, sizeof(*d->fns));
	if (!d->plans || !d->fns)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct patch_plan *p = &d->plans[d->n];
		const struct sampler_hook *h = f[i].h;
		char why[160] = "";
		bool must = h->fn == SAMPLER_MALLOC || frees(h->fn);
		uint64_t hook = f[i].related && h->guarded_off
					? h->guarded_off
					: h->direct_off;

		if (f[i].err == -ENOMEM) {
			rc = -ENOMEM;
			break;
		}
		if (!f[i].code) {
			snprintf(why, sizeof(why), "its %" PRIu64
				 " bytes cannot be read", f[i].size);
			rc = -EOPNOTSUPP;
		} else {
			rc = patch_native()->plan(f[i].code, f[i].size, f[i].addr,
					     page + i * PATCH_STUB_LEN,
					     tramps + i * PATCH_TRAMP_MAX,
					     image + hook, p, why,
					     sizeof(why));
		}
		if (!rc) {
			d->fns[d->n++] = f[i].h->fn;
			continue;
		}
		if (rc != -EOPNOTSUPP)
			break;
		why_add(d->why, sizeof(d->why), f[i].name, why);
		rc = 0;
		if (must) {
			/* no patch rather than half of them */
			d->n = 0;
			rc = -EOPNOTSUPP;
			break;
		}
	}
	return rc;
}

/* The stubs and trampolines, written and made r-x. */
static int write_page(struct alloc_session *s, uint64_t page, uint64_t len,
		      const struct sampler_direct *d)
{
	unsigned char *buf = calloc(1, len);
	size_t i;
	int rc;

	if (!buf)
		return -ENOMEM;
	for (i = 0; i < d->n; i++) {
		const struct patch_plan *p = &d->plans[i];

		memcpy(buf + (p->stub - page), p->stub_code, p->stub_len);
		memcpy(buf + (p->tramp - page), p->tramp_code, p->tramp_len);
	}
	rc = inject_write(alloc_inject(s), page, buf, len);
	free(buf);
	if (!rc)
		rc = sampler_mprotect(s, page, len, PROT_READ | PROT_EXEC);
	return rc;
}

/* Plans back from a control block's log (a prof on after prof off). */
static int from_log(const struct sampler_ctl *c, struct sampler_direct *d)
{
	uint64_t i, n = c->npatches;

	if (n > SAMPLER_MAXPATCH)
		return -EPROTO;
	d->plans = calloc(n ? n : 1, sizeof(*d->plans));
	d->fns = calloc(n ? n : 1, sizeof(*d->fns));
	if (!d->plans || !d->fns)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct sampler_patch *l = &c->patches[i];
		struct patch_plan *p = &d->plans[i];

		if (!l->len || l->len > PATCH_MAX || l->fn >= SAMPLER_NFN)
			return -EPROTO;
		p->entry = l->entry;
		p->at = l->at;
		p->len = (unsigned int)l->len;
		memcpy(p->old, l->old, p->len);
		memcpy(p->new, l->new, p->len);
		p->busy_lo = l->busy_lo;
		p->busy_hi = l->busy_hi;
		p->stub = l->stub;
		p->tramp = l->tramp;
		d->fns[i] = (unsigned int)l->fn;
	}
	d->n = (size_t)n;
	d->logged = true;
	return 0;
}

void sampler_direct_find(struct objects *os, pid_t pid,
			 const struct allocator *a, struct sampler_prep *p)
{
	p->nentries = find_functions(os, a, p->entries, SAMPLER_MAXPATCH);
	read_bodies(pid, p->entries, p->nentries);
	mark_related(p->entries, p->nentries);
}

int sampler_direct_plan(struct alloc_session *s, const struct maps *maps,
			uint64_t image, const struct sampler_ctl *c,
			const struct sampler_prep *p, struct sampler_direct *d)
{
	const struct allocator *a = p->linked;
	size_t n = p->nentries;
	uint64_t page, len;
	int rc;

	memset(d, 0, sizeof(*d));
	if (!a)
		return 0;
	d->kind = alloc_kind_name(a->kind);
	if (c && c->npatches)
		return from_log(c, d);
	if (!n) {
		snprintf(d->why, sizeof(d->why), "no malloc of its own found");
		return 0;
	}
	len = (n * (PATCH_STUB_LEN + PATCH_TRAMP_MAX) + page_size() - 1) &
	      ~(uint64_t)(page_size() - 1);
	rc = map_near(s, maps, a->obj, image, image + SAMPLER_IMAGE_LEN,
		      len, &page);
	if (rc == -EOPNOTSUPP) {
		/* not an error of the command: why the sampler hooks the
		 * allocator's entry points in no other way */
		struct diag why;

		alloc_diag(s, rc, &why);
		snprintf(d->why, sizeof(d->why), "%.*s", (int)sizeof(d->why) - 1,
			 why.what);
		alloc_clear_error(s);
		return 0;
	}
	if (rc)
		return rc;
	rc = plan_all(image, page, p->entries, n, d);
	if (!rc && d->n)
		rc = write_page(s, page, len, d);
	if (rc || !d->n) {
		unmap(s, page, len);
		d->n = 0;
		return rc == -EOPNOTSUPP ? 0 : rc;
	}
	d->page = page;
	d->page_len = len;
	return 0;
}

/* Log the plans in the control block at @ctl: the entries first, then
 * their count and the page, so that a reader never counts an entry not
 * written. */
static int log_plans(struct alloc_session *s, uint64_t ctl,
		     const struct sampler_direct *d)
{
	struct sampler_patch l[SAMPLER_MAXPATCH];
	uint64_t head[3] = { d->page, d->page_len, d->n };
	size_t i;
	int rc;

	memset(l, 0, sizeof(l));
	for (i = 0; i < d->n; i++) {
		const struct patch_plan *p = &d->plans[i];

		l[i] = (struct sampler_patch){
			.entry = p->entry, .at = p->at, .len = p->len,
			.busy_lo = p->busy_lo, .busy_hi = p->busy_hi,
			.stub = p->stub, .tramp = p->tramp, .fn = d->fns[i],
		};
		memcpy(l[i].old, p->old, p->len);
		memcpy(l[i].new, p->new, p->len);
	}
	rc = inject_write(alloc_inject(s), ctl + offsetof(struct sampler_ctl, patches),
			  l, d->n * sizeof(l[0]));
	if (!rc)
		rc = inject_write(alloc_inject(s),
				  ctl + offsetof(struct sampler_ctl,
						 patch_page),
				  head, sizeof(head));
	return rc;
}

int sampler_direct_apply(struct alloc_session *s, uint64_t image,
			 const struct sampler_direct *d, unsigned int *changed)
{
	int rc = 0;

	*changed = 0;
	if (!d->n)
		return 0;
	if (!d->logged)
		rc = log_plans(s, image + SAMPLER_OFF_sampler_ctl, d);
	if (!rc)
		rc = inject_patch(alloc_inject(s), d->plans, d->n, false, changed);
	if (rc == -EBUSY)
		alloc_fail_in(s, rc, "patching %s's entry points", d->kind);
	return rc;
}

int sampler_direct_undo(struct alloc_session *s, const struct sampler_ctl *c,
			unsigned int *restored)
{
	struct sampler_direct d = { 0 };
	int rc = from_log(c, &d);

	*restored = 0;
	if (!rc && d.n)
		rc = inject_patch(alloc_inject(s), d.plans, d.n, true, restored);
	if (rc == -EBUSY)
		alloc_fail_in(s, rc, "putting back patched entry points");
	sampler_direct_free(&d);
	return rc;
}

unsigned int sampler_direct_count(pid_t pid, const struct sampler_ctl *c)
{
	unsigned char cur[PATCH_MAX];
	unsigned int n = 0;
	uint64_t i;

	for (i = 0; i < c->npatches && i < SAMPLER_MAXPATCH; i++) {
		const struct sampler_patch *l = &c->patches[i];

		if (l->len && l->len <= PATCH_MAX &&
		    !proc_read_mem(pid, l->at, cur, l->len) &&
		    !memcmp(cur, l->new, l->len))
			n++;
	}
	return n;
}

void sampler_direct_free(struct sampler_direct *d)
{
	free(d->plans);
	free(d->fns);
	d->plans = NULL;
	d->fns = NULL;
	d->n = 0;
}
