/*
 * gperftools tcmalloc.  Full libtcmalloc (and libtcmalloc_and_profiler)
 * has the heap profiler:
 *
 *   prof on   HeapProfilerStart(prefix)    prof off  HeapProfilerStop()
 *   dump      GetHeapProfile(): the profile as a malloc'ed string, read
 *             here and freed in the target; nothing touches its disk
 *   info      IsHeapProfilerRunning()
 *
 * libtcmalloc_minimal has none of that.  Both: `stats` is
 * MallocExtension_GetStats(buf, len) (a bounded buffer on the borrowed
 * stack) with MallocExtension_GetNumericProperty() for the numbers, and
 * `trim` is MallocExtension_ReleaseFreeMemory().
 *
 * HeapProfilerStart() on its own would print "Starting tracking the
 * heap" on the target's stderr (gperftools logs at verbosity 0 unless
 * PERFTOOLS_VERBOSE < 0), and dump to files "<prefix>.NNNN.heap" by
 * itself every 1 GiB allocated or 100 MiB of new high.  So when those
 * flags are exported (Debian's build exports them), memsnap sets the
 * verbosity to -1 for the call only and turns the two interval dumps off
 * while it profiles: memsnap's `dump` collects the profile instead.  The
 * prefix still names a file in memsnap's private directory of the
 * target's view, gone after the call, so a dump at exit (gperftools
 * writes one when the profiler is still on) cannot land anywhere.
 * memsnap's own allocations are taken out of the profile by
 * allocators/tcmalloc_parse.c.
 */
#include "allocators/allocator_internal.h"

#include "common/fsio.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FLAG_NS32 "_ZN61FLAG__namespace_do_not_use_directly_use_DECLARE_int32_instead"
#define FLAG_NS64 "_ZN61FLAG__namespace_do_not_use_directly_use_DECLARE_int64_instead"
#define FLAG_VERBOSE FLAG_NS32 "13FLAGS_verboseE"
#define FLAG_ALLOC_INTERVAL \
	FLAG_NS64 "38FLAGS_heap_profile_allocation_intervalE"
#define FLAG_INUSE_INTERVAL FLAG_NS64 "33FLAGS_heap_profile_inuse_intervalE"

/* GetHeapProfile() output larger than this is not a profile. */
#define PROFILE_MAX (1024u << 20)
#define STATS_BUF 30000

static bool has_profiler(const struct allocator *a)
{
	return a->kind == ALLOC_TCMALLOC;
}

static int running(struct alloc_session *s, const struct allocator *a,
		   bool *on)
{
	uint64_t ret = 0;
	int rc = alloc_call(s, alloc_func_addr(a, "IsHeapProfilerRunning"),
			    NULL, 0, &ret);

	if (rc == -EOPNOTSUPP)
		alloc_fail(s, rc, DIAG_UNSUPPORTED,
			   "IsHeapProfilerRunning not found");
	if (!rc)
		*on = (int)(uint32_t)ret != 0;
	return rc;
}

static int no_profiler(struct alloc_session *s, const struct allocator *a)
{
	(void)a;
	alloc_set_hint(s,
		       "link or LD_PRELOAD the full libtcmalloc.so.4 (Debian: libgoogle-perftools4) for heap profiles");
	return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
			  "libtcmalloc_minimal has no heap profiler; it can report stats and trim");
}

/* A flag of the target's gperftools, exported as a data symbol. */
static uint64_t flag_addr(struct alloc_session *s, const struct allocator *a,
			  const char *name)
{
	struct symbol sym;

	if (object_lookup(s->os, a->obj, name, 0, &sym) || sym.size < 4)
		return 0;
	return sym.addr;
}

static int tc_prof(struct alloc_session *s, const struct allocator *a,
		   enum alloc_prof_op op, uint64_t arg, struct dumpdir *dir,
		   struct alloc_prof_result *res)
{
	uint64_t verbose = flag_addr(s, a, FLAG_VERBOSE);
	uint64_t ialloc = flag_addr(s, a, FLAG_ALLOC_INTERVAL);
	uint64_t iinuse = flag_addr(s, a, FLAG_INUSE_INTERVAL);
	struct inject_call c = { .nargs = 1, .nbufs = 1 };
	struct inject_result r;
	int32_t old_verbose = 0, quiet = -1;
	int64_t zero = 0;
	const char *prefix;
	struct diag err;
	int rc;

	(void)arg;
	memset(res, 0, sizeof(*res));
	if (!has_profiler(a))
		return no_profiler(s, a);
	if (op != ALLOC_PROF_ON && op != ALLOC_PROF_OFF) {
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "gperftools' heap profiler has no %s; it can: prof on, prof off, dump",
				  op == ALLOC_PROF_RESET ? "reset" : "gdump");
	}
	rc = running(s, a, &res->was);
	if (rc)
		return rc;
	res->now = op == ALLOC_PROF_ON;
	if (res->was == res->now)
		return 0;
	if (op == ALLOC_PROF_OFF) {
		c.fn = alloc_func_addr(a, "HeapProfilerStop");
		c.nargs = 0;
		c.nbufs = 0;
		return c.fn ? inject_call(alloc_inject(s), &c, &r) : -EOPNOTSUPP;
	}
	c.fn = alloc_func_addr(a, "HeapProfilerStart");
	if (!c.fn)
		return -EOPNOTSUPP;
	/* The private directory's name, unguessable, removed after the
	 * command: see the top of this file. */
	if (!dir || dumpdir_start(dir, &err) ||
	    dumpdir_set_name(dir, "tcmalloc"))
		return -EINVAL;
	prefix = dumpdir_file(dir);
	c.bufs[0] = (struct inject_buf){ .in = prefix,
					 .len = strlen(prefix) + 1 };
	c.args[0] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	if (ialloc && iinuse) {
		rc = inject_write(alloc_inject(s), ialloc, &zero, sizeof(zero));
		if (!rc)
			rc = inject_write(alloc_inject(s), iinuse, &zero,
					  sizeof(zero));
		if (rc)
			return rc;
	}
	if (verbose && proc_read_mem(s->pid, verbose, &old_verbose,
				     sizeof(old_verbose)))
		verbose = 0;
	if (verbose && old_verbose >= 0 &&
	    inject_write(alloc_inject(s), verbose, &quiet, sizeof(quiet)))
		verbose = 0;
	rc = inject_call(alloc_inject(s), &c, &r);
	if (verbose && old_verbose >= 0 && rc != -ETIMEDOUT)
		inject_write(alloc_inject(s), verbose, &old_verbose,
			     sizeof(old_verbose));
	return rc;
}

static int tc_dump(struct alloc_session *s, const struct allocator *a,
		   struct dumpdir *dir, int fd, bool *to_fd)
{
	uint64_t fn = alloc_func_addr(a, "GetHeapProfile");
	uint64_t free_fn = alloc_bound_symbol(s, "free") ?: alloc_symbol(s, a, "tc_free", false);
	uint64_t ptr = 0;
	char *text = NULL;
	size_t len = 0;
	bool on = false;
	int rc, rc2;

	(void)dir;
	if (!has_profiler(a))
		return no_profiler(s, a);
	rc = running(s, a, &on);
	if (rc)
		return rc;
	if (!on) {
		alloc_set_hint(s,
			       "start it with `memsnap --pid %d prof on` (or HEAPPROFILE=... at start-up), let the program run, then dump",
			       (int)s->pid);
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "the gperftools heap profiler is not running in pid %d",
				  (int)s->pid);
	}
	if (!fn || !free_fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%s not found", !fn ? "GetHeapProfile" : "free");
	rc = alloc_call(s, fn, NULL, 0, &ptr);
	if (rc)
		return rc;
	if (!ptr)
		return alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				  "GetHeapProfile() returned NULL");
	rc = alloc_read_string(s, ptr, PROFILE_MAX, &text, &len);
	/* The string is the target's malloc'ed memory: always free it. */
	rc2 = alloc_call(s, free_fn, &ptr, 1, NULL);
	if (!rc)
		rc = rc2;
	if (!rc) {
		uint64_t lo, hi;

		if (!inject_stub_range(alloc_inject(s), &lo, &hi))
			tcmalloc_drop_own_buckets(text, &len, lo, hi);
	}
	if (!rc)
		rc = write_in_full(fd, text, len);
	free(text);
	if (!rc)
		*to_fd = true;
	return rc;
}

/* MallocExtension_GetNumericProperty(name, &value): 1 if known. */
static int property(struct alloc_session *s, uint64_t fn, const char *name,
		    uint64_t *value, bool *known)
{
	struct inject_call c = { .fn = fn, .nargs = 2, .nbufs = 2 };
	struct inject_result r;
	int rc;

	*value = 0;
	c.bufs[0] = (struct inject_buf){ .in = name, .len = strlen(name) + 1 };
	c.bufs[1] = (struct inject_buf){ .out = value, .len = sizeof(*value) };
	c.args[0] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	c.args[1] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 1 };
	rc = inject_call(alloc_inject(s), &c, &r);
	if (!rc)
		*known = (int)(uint32_t)r.ret != 0;
	return rc;
}

static const struct {
	const char *col, *prop;
} props[] = {
	{ "allocated", "generic.current_allocated_bytes" },
	{ "heap_size", "generic.heap_size" },
	{ "physical", "generic.total_physical_bytes" },
	{ "pageheap_free", "tcmalloc.pageheap_free_bytes" },
	{ "pageheap_unmapped", "tcmalloc.pageheap_unmapped_bytes" },
	{ "central_cache_free", "tcmalloc.central_cache_free_bytes" },
	{ "transfer_cache_free", "tcmalloc.transfer_cache_free_bytes" },
	{ "thread_cache_free", "tcmalloc.current_total_thread_cache_bytes" },
	{ "thread_cache_max", "tcmalloc.max_total_thread_cache_bytes" },
};

/*
 * gperftools' C entry points all go through MallocExtension::instance(),
 * which the dynamic linker binds once for the whole process: with two
 * copies loaded (tcmalloc and tcmalloc_minimal), the later copy's
 * functions report and trim the first one's heap.  -EOPNOTSUPP, saying
 * so, when @a is not the copy instance() binds to.
 */
static int own_instance(struct alloc_session *s, const struct allocator *a)
{
	struct symbol sym;

	if (alloc_bound(s, "_ZN15MallocExtension8instanceEv", &sym) ||
	    sym.obj == a->obj)
		return 0;
	return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
			  "the %s in %s calls MallocExtension through the copy in %s (first in the process's symbol search order): it would read or trim that heap, not its own",
			  alloc_kind_name(a->kind), a->obj->path, sym.obj->path);
}

static int tc_stats(struct alloc_session *s, const struct allocator *a,
		    struct dumpdir *dir, enum alloc_stats_form form,
		    struct alloc_stats *st)
{
	static const char *cols[ARRAY_SIZE(props) + 1];
	uint64_t getprop = alloc_symbol(s, a,
					"MallocExtension_GetNumericProperty",
					false);
	struct inject_call c = { .nargs = 2, .nbufs = 1 };
	struct inject_result r;
	struct alloc_stat_table *t;
	struct alloc_stat_row *row;
	size_t i;
	int rc;

	(void)dir;
	rc = own_instance(s, a);
	if (rc)
		return rc;
	for (i = 0; i < ARRAY_SIZE(props); i++)
		cols[i] = props[i].col;
	st->source = "MallocExtension_GetNumericProperty() + MallocExtension_GetStats()";
	t = stats_table(st, "total", cols, (1u << ARRAY_SIZE(props)) - 1);
	row = stats_row(t, "total");
	if (!row)
		return -ENOMEM;
	for (i = 0; getprop && i < ARRAY_SIZE(props); i++) {
		uint64_t v;
		bool known = false;

		rc = property(s, getprop, props[i].prop, &v, &known);
		if (rc)
			return rc;
		if (known)
			stats_set(t, row, props[i].col, v);
	}
	if (form == ALLOC_STATS_TABLES)
		return 0;
	/* GetStats(buffer, length) writes at most length bytes: a buffer
	 * on the borrowed stack; its text is a few KiB. */
	c.fn = alloc_func_addr(a, "MallocExtension_GetStats");
	if (!c.fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "MallocExtension_GetStats not found");
	st->raw = calloc(1, STATS_BUF + 1);
	if (!st->raw)
		return -ENOMEM;
	c.bufs[0] = (struct inject_buf){ .out = st->raw, .len = STATS_BUF };
	c.args[0] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	c.args[1] = (struct inject_arg){ .value = STATS_BUF };
	rc = inject_call(alloc_inject(s), &c, &r);
	if (rc)
		return rc;
	st->raw[STATS_BUF] = '\0';
	st->raw_len = strlen(st->raw);
	st->truncated = st->raw_len >= STATS_BUF - 1;
	st->raw_format = "text";
	return 0;
}

static int tc_trim(struct alloc_session *s, const struct allocator *a,
		   struct alloc_trim_result *res)
{
	int rc = own_instance(s, a);

	if (rc)
		return rc;
	res->how = "MallocExtension_ReleaseFreeMemory()";
	return alloc_call(s, alloc_func_addr(a, "MallocExtension_ReleaseFreeMemory"),
			  NULL, 0, NULL);
}

static int tc_state(struct alloc_session *s, const struct allocator *a,
		    struct alloc_state *st)
{
	uint64_t ver = alloc_symbol(s, a, "tc_version", false);
	uint64_t getprop = alloc_symbol(s, a,
					"MallocExtension_GetNumericProperty",
					false);
	uint64_t args[3] = { 0, 0, 0 };
	struct alloc_item *it;
	size_t i;
	int rc;

	rc = alloc_state_version(s, st, ver, args, 3);
	if (rc)
		return rc;
	if (has_profiler(a) &&
	    (it = alloc_state_add(st, "heap_profiler.running", ALLOC_ITEM_BOOL))) {
		rc = running(s, a, &it->b);
		if (rc)
			return rc;
	}
	if (getprop && own_instance(s, a))
		getprop = 0;	/* another copy's numbers: not shown */
	for (i = 0; getprop && i < 2; i++) {
		bool known = false;

		it = alloc_state_add(st, props[i].prop, ALLOC_ITEM_BYTES);
		if (!it)
			break;
		rc = property(s, getprop, props[i].prop, &it->u, &known);
		if (rc)
			return rc;
		if (!known)
			it->err = -ENOENT;
	}
	return 0;
}

const struct alloc_backend tcmalloc_backend = {
	.caps = ALLOC_CAN_DUMP | ALLOC_CAN_PROF | ALLOC_CAN_STATE |
		ALLOC_CAN_STATS | ALLOC_CAN_TRIM,
	.dump = tc_dump,
	.prof = tc_prof,
	.state = tc_state,
	.stats = tc_stats,
	.trim = tc_trim,
};

const struct alloc_backend tcmalloc_minimal_backend = {
	.caps = ALLOC_CAN_STATE | ALLOC_CAN_STATS | ALLOC_CAN_TRIM,
	.state = tc_state,
	.stats = tc_stats,
	.trim = tc_trim,
};
