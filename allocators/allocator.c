/*
 * The allocator session: one borrowed thread, the backends behind it.
 */
#include "allocators/allocator.h"

#include "allocators/allocator_internal.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <elf.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Indexed by the catalogue's kinds (symbols/detect.h); a kind without
 * a backend here can do nothing. */
static const struct alloc_backend *const backends[ALLOC_KINDS] = {
	[ALLOC_JEMALLOC] = &jemalloc_backend,
	[ALLOC_GLIBC] = &glibc_backend,
	[ALLOC_TCMALLOC] = &tcmalloc_backend,
	[ALLOC_TCMALLOC_MINIMAL] = &tcmalloc_minimal_backend,
	[ALLOC_MIMALLOC] = &mimalloc_backend,
};

static const struct alloc_backend *backend_for(enum alloc_kind kind)
{
	return (unsigned int)kind < ALLOC_KINDS ? backends[kind] : NULL;
}

unsigned int alloc_caps(enum alloc_kind kind)
{
	const struct alloc_backend *be = backend_for(kind);

	return be ? be->caps : 0;
}

unsigned int alloc_caps_now(enum alloc_kind kind, const struct alloc_state *st)
{
	const struct alloc_backend *be = backend_for(kind);

	if (!be)
		return 0;
	if (!st || !st->n || !be->caps_lacking)
		return be->caps;
	return be->caps & ~be->caps_lacking(st);
}

void alloc_caps_text(unsigned int caps, char *buf, size_t size)
{
	static const struct {
		unsigned int cap;
		const char *name;
	} names[] = {
		{ ALLOC_CAN_DUMP, "dump" },	{ ALLOC_CAN_PROF, "prof" },
		{ ALLOC_CAN_STATS, "stats" },	{ ALLOC_CAN_TRIM, "trim" },
	};
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(names); i++)
		if ((caps & names[i].cap) && n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
					      n ? ", " : "", names[i].name);
	if (!n)
		snprintf(buf, size, "nothing");
}

int alloc_fail(struct alloc_session *s, int rc, enum diag_kind kind,
	       const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vset(&s->err, kind, fmt, ap);
	va_end(ap);
	s->err_rc = rc;
	return rc;
}

int alloc_fail_in(struct alloc_session *s, int rc, const char *fmt, ...)
{
	struct diag d;
	char head[256];
	va_list ap;

	inject_diag(s->inj, rc, &d);
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	return alloc_fail(s, rc, d.kind, "%s: %s", head, d.what);
}

void alloc_set_hint(struct alloc_session *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err.hint, sizeof(s->err.hint), fmt, ap);
	va_end(ap);
}

void alloc_clear_error(struct alloc_session *s)
{
	memset(&s->err, 0, sizeof(s->err));
	s->err_rc = 0;
	s->alloc_errno = 0;
}

struct alloc_item *alloc_state_add(struct alloc_state *st, const char *key,
				   enum alloc_item_type type)
{
	struct alloc_item *it;

	if (st->n >= ALLOC_MAX_ITEMS)
		return NULL;
	it = &st->v[st->n++];
	memset(it, 0, sizeof(*it));
	it->key = key;
	it->type = type;
	return it;
}

int alloc_state_version(struct alloc_session *s, struct alloc_state *st,
			uint64_t fn, const uint64_t *args, unsigned int nargs)
{
	struct alloc_item *it = alloc_state_add(st, "version", ALLOC_ITEM_STR);
	uint64_t ptr = 0;
	int rc;

	if (!it)
		return 0;
	rc = alloc_call(s, fn, args, nargs, &ptr);
	if (rc == -EOPNOTSUPP)
		it->err = -ENOENT;
	else if (rc)
		return rc;
	else if (proc_read_cstr(s->pid, ptr, it->s, sizeof(it->s)))
		it->err = -EFAULT;
	return 0;
}

void alloc_fence_add(struct alloc_fence *f, uint64_t lo, uint64_t hi,
		     const char *what)
{
	size_t i = f->n;

	if (i >= ALLOC_MAX_RANGES || lo >= hi)
		return;
	snprintf(f->what[i], sizeof(f->what[i]), "%s", what);
	f->v[i] = (struct inject_range){ .lo = lo, .hi = hi,
					 .what = f->what[i] };
	f->n++;
}

/* A fenced function's span reaches this far at most on either side
 * (glibc's malloc.c is 24 KiB of code). */
#define SPAN_MAX (256 * 1024)

static bool fenced(const struct alloc_fence *f, uint64_t addr)
{
	size_t i;

	for (i = 0; i < f->n; i++)
		if (addr >= f->v[i].lo && addr < f->v[i].hi)
			return true;
	return false;
}

static bool span_member(const char *name, void *arg);

/*
 * @name's code, and the local functions of its translation unit around
 * it (object_span()): a thread may be in _mid_memalign() holding an
 * arena lock with no frame of memalign() left on its stack, because
 * memalign() tail-called it.  Without borders to find (a stripped
 * object), the function alone.  Not in the executable: a static
 * allocator there sits beside the program's own local functions (its
 * event loop may be one), with no border between them.  Only for an
 * allocator (@a): elsewhere (fork, the loader) a hidden neighbour may be
 * where every blocked thread sits (musl's __syscall_cp_asm).
 */
static void add_symbol(struct alloc_fence *f, struct objects *os,
		       const struct detection *d, struct object *obj,
		       const struct allocator *a, const char *name,
		       const char *what)
{
	struct symbol sym;
	uint64_t lo, hi;

	if (object_lookup(os, obj, name, 0, &sym) || !sym.size ||
	    fenced(f, sym.addr))
		return;
	if (!a || obj == d->order.exe ||
	    object_span(os, obj, sym.addr, span_member, (void *)a, SPAN_MAX,
			&lo, &hi)) {
		lo = sym.addr;
		hi = sym.addr + sym.size;
	}
	alloc_fence_add(f, lo, hi, what);
}

/*
 * The public entry points through which a thread enters an allocator
 * that shares its object with other code (a static build in the
 * executable, glibc in libc.so.6): a thread inside the allocator has one
 * of them on its stack: the catalogue's entry points (alloc_entry_point())
 * and these.
 */
static const char *const control_points[] = {
	"mallctl", "mallctlnametomib", "mallctlbymib",
	"malloc_stats_print", "malloc_trim", "malloc_info", "mallinfo",
	"mallinfo2", "malloc_stats", "__libc_malloc", "__libc_free",
	"__libc_calloc", "__libc_realloc", "__libc_memalign", "_int_malloc",
	"_int_free", "malloc_consolidate", "sysmalloc", "_int_realloc",
	"_int_memalign", "_mid_memalign", "arena_get2", "tcache_init",
	"__malloc_arena_thread_freeres",
	/* stdio that holds the list of open FILEs locked: `stats` on glibc
	 * creates a FILE (fdopen) on the borrowed thread */
	"fopen", "fdopen", "fclose", "fflush", "fcloseall", "_IO_flush_all",
	"_IO_cleanup", "freopen", "open_memstream", "fmemopen", "popen",
	"pclose", "fopencookie", "_IO_link_in", "_IO_un_link",
};

/* glibc's other exports from malloc.c: inside a span, not its border. */
static const char *const malloc_c_exports[] = {
	"mallopt", "__libc_mallopt", "__libc_mallinfo", "__libc_valloc",
	"__libc_pvalloc", "__libc_reallocarray", "__libc_memalign",
	"__default_morecore", "malloc_get_state", "malloc_set_state",
};

static bool in_list(const char *name, const char *const *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(name, v[i]))
			return true;
	return false;
}

/* @name is the allocator's own, by its catalogue. */
static bool span_member(const char *name, void *arg)
{
	const struct allocator *a = arg;
	size_t plen = strlen(a->prefix);

	if (alloc_is_internal(name) || alloc_is_entry_point(name) ||
	    in_list(name, malloc_c_exports, ARRAY_SIZE(malloc_c_exports)))
		return true;
	if (plen && !strncmp(name, a->prefix, plen))
		name += plen;
	else if (!strncmp(name, "__", 2))
		name += 2;	/* glibc's __malloc_info, __posix_memalign */
	return alloc_is_entry_point(name) ||
	       in_list(name, control_points, ARRAY_SIZE(control_points));
}

/* The function @fn of allocator @a, behind its prefix. */
static void add_entry(struct alloc_fence *f, struct objects *os,
		      const struct detection *d, const struct allocator *a,
		      const char *fn, const char *what)
{
	char name[ALLOC_MAX_PREFIX + 40];

	snprintf(name, sizeof(name), "%s%s", a->prefix, fn);
	add_symbol(f, os, d, a->obj, a, name, what);
}

static void fence_allocator(struct alloc_fence *f, struct objects *os,
			    const struct detection *d,
			    const struct allocator *a)
{
	char what[96];
	size_t i;

	snprintf(what, sizeof(what), "%s (%s)", alloc_kind_name(a->kind),
		 path_base(a->obj->path));
	if (a->kind != ALLOC_GLIBC && a->obj != d->order.exe) {
		/* An allocator library: all of it. */
		alloc_fence_add(f, a->obj->text_lo, a->obj->text_hi, what);
		return;
	}
	for (i = 0; alloc_entry_point(i); i++)
		add_entry(f, os, d, a, alloc_entry_point(i), what);
	for (i = 0; i < ARRAY_SIZE(control_points); i++)
		add_entry(f, os, d, a, control_points[i], what);
}

/* AT_BASE: where the dynamic loader is mapped (0 for static programs). */
static uint64_t interp_base(struct objects *os)
{
	const struct proc_auxv *av;

	return objects_auxv(os, &av) ? 0 : av->base;
}

void alloc_fence_build(struct objects *os, const struct detection *d,
		       struct alloc_fence *f)
{
	static const char *const dl_calls[] = { "dlopen", "dlclose", "dlsym",
						"dl_iterate_phdr" };
	struct object *ld = NULL;
	uint64_t base = interp_base(os);
	struct symbol ls;
	bool ld_is_libc;
	char what[96];
	size_t i;

	f->n = 0;
	for (i = 0; i < d->n; i++)
		fence_allocator(f, os, d, &d->v[i]);
	if (base)
		ld = objects_find(os, base);
	/* musl: one object is both the loader and libc, where every
	 * blocked thread sits; only its dl* entry points are the loader. */
	ld_is_libc = ld && !object_lookup(os, ld, "malloc",
					  ELFSYM_DYNAMIC_ONLY, &ls);
	if (ld && !ld_is_libc)
		alloc_fence_add(f, ld->text_lo, ld->text_hi, "the dynamic loader");
	for (i = 0; ld_is_libc && i < ARRAY_SIZE(dl_calls); i++)
		add_symbol(f, os, d, ld, NULL, dl_calls[i],
			   "the dynamic loader");
	for (i = 0; i < os->n; i++) {
		struct object *obj = &os->v[i];
		struct symbol sym;

		if (!obj->exec || (obj == ld && !ld_is_libc))
			continue;
		/* The unwinder: libgcc_s (or a copy linked in). */
		if (!object_lookup(os, obj, "_Unwind_Find_FDE", 0, &sym)) {
			snprintf(what, sizeof(what), "the unwinder (%s)",
				 path_base(obj->path));
			if (!object_lookup(os, obj, "_Unwind_RaiseException",
					   ELFSYM_DYNAMIC_ONLY, &sym) &&
			    obj != d->order.exe)
				alloc_fence_add(f, obj->text_lo, obj->text_hi, what);
			else
				add_symbol(f, os, d, obj, NULL,
					   "_Unwind_Find_FDE", what);
		}
		/* fork: between its prefork handlers (which take the
		 * allocator's locks) and the child's return, a call into
		 * the allocator would wait for a lock its own thread holds */
		add_symbol(f, os, d, obj, NULL, "fork", "fork");
		add_symbol(f, os, d, obj, NULL, "_Fork", "fork");
		add_symbol(f, os, d, obj, NULL, "__libc_fork", "fork");
		add_symbol(f, os, d, obj, NULL, "vfork", "fork");
	}
}

int alloc_open(pid_t pid, struct objects *os, const struct detection *det,
	       const struct inject_opts *iopts, const struct alloc_fence *extra,
	       struct alloc_session **out)
{
	struct inject_opts o = *iopts;
	struct alloc_session *s;
	size_t i;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->os = os;
	s->det = det;
	s->capture_here = -1;
	alloc_fence_build(os, det, &s->fence);
	for (i = 0; extra && i < extra->n; i++)
		alloc_fence_add(&s->fence, extra->v[i].lo, extra->v[i].hi,
				extra->what[i]);
	o.forbidden = s->fence.v;
	o.nforbidden = s->fence.n;
	if (!o.errno_location)
		/* the borrowed thread's errno is saved and put back around
		 * each call */
		o.errno_location = alloc_bound_symbol(s, "__errno_location");
	rc = inject_open(pid, &o, &s->inj);
	if (rc) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static int check(struct alloc_session *s, const struct allocator *a,
		 unsigned int cap, const char *what,
		 const struct alloc_backend **be)
{
	alloc_clear_error(s);
	*be = backend_for(a->kind);
	if (!*be || !((*be)->caps & cap))
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%s cannot %s", alloc_kind_title(a->kind),
				  what);
	return 0;
}

int alloc_dump(struct alloc_session *s, const struct allocator *a,
	       struct dumpdir *dir, int fd, bool *to_fd)
{
	const struct alloc_backend *be;
	int rc = check(s, a, ALLOC_CAN_DUMP, "write a heap profile", &be);

	*to_fd = false;
	return rc ? rc : be->dump(s, a, dir, fd, to_fd);
}

int alloc_stats(struct alloc_session *s, const struct allocator *a,
		struct dumpdir *dir, enum alloc_stats_form form,
		struct alloc_stats *st)
{
	const struct alloc_backend *be;
	int rc = check(s, a, ALLOC_CAN_STATS, "report statistics", &be);

	memset(st, 0, sizeof(*st));
	return rc ? rc : be->stats(s, a, dir, form, st);
}

int alloc_trim(struct alloc_session *s, const struct allocator *a,
	       struct alloc_trim_result *res)
{
	const struct alloc_backend *be;
	int rc = check(s, a, ALLOC_CAN_TRIM, "give memory back", &be);

	memset(res, 0, sizeof(*res));
	return rc ? rc : be->trim(s, a, res);
}

int alloc_prof(struct alloc_session *s, const struct allocator *a,
	       enum alloc_prof_op op, uint64_t arg, struct dumpdir *dir,
	       struct alloc_prof_result *res)
{
	const struct alloc_backend *be;
	int rc = check(s, a, ALLOC_CAN_PROF, "control heap profiling", &be);

	return rc ? rc : be->prof(s, a, op, arg, dir, res);
}

int alloc_state(struct alloc_session *s, const struct allocator *a,
		struct alloc_state *st)
{
	const struct alloc_backend *be;
	int rc = check(s, a, ALLOC_CAN_STATE, "report its state", &be);

	st->n = 0;
	return rc ? rc : be->state(s, a, st);
}

int alloc_call_function(struct alloc_session *s, struct inject_call *c,
			struct inject_result *r)
{
	return inject_call(s->inj, c, r);
}

void alloc_diag(const struct alloc_session *s, int rc, struct diag *d)
{
	if (rc && s->err_rc == rc) {
		*d = s->err;
		return;
	}
	inject_diag(s->inj, rc, d);
	if (rc == -EOPNOTSUPP) {
		d->kind = DIAG_UNSUPPORTED;
		snprintf(d->what, sizeof(d->what), "not supported");
	} else if (rc == -EREMOTEIO) {
		d->kind = DIAG_REFUSED;
		snprintf(d->what, sizeof(d->what), "the allocator refused");
	}
}

int alloc_errno(const struct alloc_session *s)
{
	return s->alloc_errno;
}

bool alloc_pc_in_stub(const struct alloc_session *s, uint64_t pc)
{
	return inject_pc_in_stub(s->inj, pc);
}

size_t alloc_backtrace(const struct alloc_session *s, uint64_t *pcs,
		       size_t max)
{
	return inject_backtrace(s->inj, pcs, max);
}

pid_t alloc_tid(const struct alloc_session *s)
{
	return inject_tid(s->inj);
}

pid_t alloc_pid(const struct alloc_session *s)
{
	return s->pid;
}

int alloc_close(struct alloc_session *s, struct inject_timings *t)
{
	int rc;

	if (!s)
		return 0;
	/* Restore and detach first: the timings then hold those phases. */
	rc = inject_finish(s->inj);
	if (t)
		inject_timings(s->inj, t);
	if (inject_close(s->inj) && !rc)
		rc = -EIO;
	if (s->capture_here >= 0)
		close(s->capture_here);
	free(s);
	return rc;
}
