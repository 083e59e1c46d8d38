/*
 * The jemalloc backend (allocators/allocator_internal.h): profiles,
 * statistics, trimming and state, through mallctl() (mallctl.c).
 */
#include "allocators/jemalloc.h"

#include "allocators/allocator_internal.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * Is profiling there to use?  No when built without it (config.prof)
 * or started without it (opt.prof): then say what to do, and return
 * -EOPNOTSUPP.  0 when it is, or when mallctl cannot tell; the engine's
 * -errno as it is (a call that timed out allows no other).  A prof.*
 * mallctl fails with ENOENT then (5.3), or EFAULT (5.1's prof.dump), or
 * even succeeds (5.1's prof.active), so prof on asks first.
 */
static int prof_unavailable(struct alloc_session *s, struct jemalloc *je)
{
	char var[ALLOC_MAX_PREFIX + 16], cur[256];
	bool config = true, opt = true;
	int rc = jemalloc_read_bool(je, "opt.prof", &opt), rc2;

	if (!rc && opt)
		return 0;	/* one call when all is well */
	if (rc && rc != -EREMOTEIO)
		return rc;	/* the engine's error: no more calls */
	/* opt.prof is false, or ENOENT without config.prof */
	rc2 = jemalloc_read_bool(je, "config.prof", &config);
	if (rc2 && rc2 != -EREMOTEIO)
		return rc2;
	if (!rc2 && !config) {
		alloc_set_hint(s,
			       "heap profiles need a jemalloc configured with --enable-prof (Debian 12's is on x86-64, not on arm64); memsnap's own sampler needs nothing: `memsnap --pid %d prof on --sampler`, then dump",
			       (int)s->pid);
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "jemalloc was built without profiling (config.prof is false)");
	}
	if (rc)
		return 0;
	jemalloc_conf_var(je->prefix, var, sizeof(var));
	proc_getenv(s->pid, var, cur, sizeof(cur));
	/* What is wrong and the exact fix; then the way without a
	 * restart. */
	alloc_set_hint(s,
		       "or, with no restart, memsnap's own sampler: `memsnap --pid %d prof on --sampler`, then dump",
		       (int)s->pid);
	return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
			  "jemalloc profiling is off (opt.prof is false, fixed at start-up); restart it with %s=%s%sprof:true,prof_active:false, then `memsnap --pid %d prof on` starts sampling",
			  var, cur, cur[0] ? "," : "", (int)s->pid);
}

/* After a failed mallctl of @name: set the session's error. */
static int refused(struct alloc_session *s, struct jemalloc *je,
		   const char *name, int rc)
{
	int err;

	if (rc != -EREMOTEIO)
		return rc;
	err = je->err;
	if ((err == ENOENT || err == EFAULT) && !strncmp(name, "prof.", 5)) {
		int why = prof_unavailable(s, je);

		if (why)
			return why;
		je->err = err;
	}
	s->alloc_errno = err;
	return alloc_fail(s, rc, DIAG_REFUSED, "mallctl(\"%s\"): %s", name,
			  jemalloc_strerror(err, name));
}

static int je_open(struct alloc_session *s, const struct allocator *a,
		   struct jemalloc *je)
{
	int rc = jemalloc_init(je, s->inj, s->pid, a);

	if (rc)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%smallctl not found", a->prefix);
	return 0;
}

/*
 * prof.dump takes a file name: the name of a memfd of the target's in
 * its own view where it can (capture_name_begin()), so that no agent
 * and no writable place are needed, else the file of @dir.  Through the
 * memfd, EFAULT means profiling is off, or the open failed after all:
 * the file's way then says which.
 */
static int je_dump(struct alloc_session *s, const struct allocator *a,
		   struct dumpdir *dir, int fd, bool *to_fd)
{
	char name[64];
	struct jemalloc je;
	int rc, rc2, tfd;

	*to_fd = false;
	rc = je_open(s, a, &je);
	if (rc)
		return rc;
	rc = capture_name_begin(s, name, sizeof(name), &tfd);
	if (rc < 0)
		return rc;
	if (!rc) {
		rc = jemalloc_write_string(&je, "prof.dump", name);
		rc2 = capture_name_end(s, tfd, rc ? -1 : fd);
		if (!rc) {
			*to_fd = !rc2;
			return rc2;
		}
		if (rc != -EREMOTEIO || je.err != EFAULT)
			goto out;
		rc = prof_unavailable(s, &je);
		if (rc)
			return rc;
	}
	rc = capture_dir_start(s, dir, "the profile");
	if (rc)
		return rc;
	rc = jemalloc_write_string(&je, "prof.dump", dumpdir_file(dir));
out:
	if (rc == -EIO)
		alloc_fail(s, rc, DIAG_FAILED,
			   "the call engine placed the path elsewhere than predicted");
	return refused(s, &je, "prof.dump", rc);
}

static int je_prof(struct alloc_session *s, const struct allocator *a,
		   enum alloc_prof_op op, uint64_t arg, struct dumpdir *dir,
		   struct alloc_prof_result *res)
{
	struct jemalloc je;
	const char *name;
	bool on;
	int rc;

	(void)dir;
	rc = je_open(s, a, &je);
	if (rc)
		return rc;
	memset(res, 0, sizeof(*res));
	switch (op) {
	case ALLOC_PROF_ON:
	case ALLOC_PROF_OFF:
	case ALLOC_PROF_GDUMP_ON:
	case ALLOC_PROF_GDUMP_OFF:
		on = op == ALLOC_PROF_ON || op == ALLOC_PROF_GDUMP_ON;
		name = op == ALLOC_PROF_ON || op == ALLOC_PROF_OFF
			       ? "prof.active"
			       : "prof.gdump";
		if (on && (rc = prof_unavailable(s, &je)))
			return rc;
		rc = jemalloc_write_bool(&je, name, on, &res->was);
		if (rc)
			return refused(s, &je, name, rc);
		res->now = on;
		return 0;
	case ALLOC_PROF_RESET:
		name = "prof.reset";
		if (arg == ALLOC_PROF_KEEP)
			rc = jemalloc_write_void(&je, name);
		else
			rc = jemalloc_write_size(&je, name, arg);
		if (rc)
			return refused(s, &je, name, rc);
		rc = jemalloc_read_size(&je, "prof.lg_sample", &res->lg_sample);
		if (rc)
			return refused(s, &je, "prof.lg_sample", rc);
		return 0;
	}
	return -EINVAL;
}

static void add_value(struct alloc_state *st, struct jemalloc *je,
		      const char *key, enum alloc_item_type type, int *fatal)
{
	struct alloc_item *it;
	uint64_t u = 0;
	int rc;

	if (*fatal)
		return;
	it = alloc_state_add(st, key, type);
	if (!it)
		return;
	switch (type) {
	case ALLOC_ITEM_BOOL:
		rc = jemalloc_read_bool(je, key, &it->b);
		break;
	case ALLOC_ITEM_STR:
		rc = jemalloc_read_string(je, key, it->s, sizeof(it->s));
		break;
	default:
		rc = jemalloc_read_size(je, key, &u);
		it->u = u;
		break;
	}
	if (rc == -EREMOTEIO)
		it->err = je->err;
	else if (rc == -EFAULT || rc == -ENAMETOOLONG)
		it->err = rc; /* a bad pointer from the target: this value */
	else if (rc)
		*fatal = rc; /* the engine: stop here */
}

static int je_state(struct alloc_session *s, const struct allocator *a,
		    struct alloc_state *st)
{
	static const struct {
		const char *key;
		enum alloc_item_type type;
	} items[] = {
		{ "version", ALLOC_ITEM_STR },
		{ "config.prof", ALLOC_ITEM_BOOL },
		{ "opt.prof", ALLOC_ITEM_BOOL },
		{ "prof.active", ALLOC_ITEM_BOOL },
		{ "prof.gdump", ALLOC_ITEM_BOOL },
		{ "opt.lg_prof_sample", ALLOC_ITEM_U64 },
		{ "prof.lg_sample", ALLOC_ITEM_U64 },
		{ "opt.prof_prefix", ALLOC_ITEM_STR },
		{ "stats.allocated", ALLOC_ITEM_BYTES },
		{ "stats.active", ALLOC_ITEM_BYTES },
		{ "stats.resident", ALLOC_ITEM_BYTES },
		{ "stats.mapped", ALLOC_ITEM_BYTES },
		{ "stats.retained", ALLOC_ITEM_BYTES },
		{ "stats.metadata", ALLOC_ITEM_BYTES },
	};
	struct jemalloc je;
	int rc, fatal = 0;
	size_t i;

	rc = je_open(s, a, &je);
	if (rc)
		return rc;
	st->n = 0;
	/* Statistics are a snapshot taken at the last epoch. */
	rc = jemalloc_epoch(&je);
	if (rc && rc != -EREMOTEIO)
		return rc;
	for (i = 0; i < ARRAY_SIZE(items); i++)
		add_value(st, &je, items[i].key, items[i].type, &fatal);
	return fatal;
}

/*
 * malloc_stats_print(write_cb, cbopaque, opts) into a file of memsnap's
 * private directory: the callback is memsnap's write helper, the opaque
 * argument the target's descriptor for that file (see capture_begin()).
 * @opts: "" for everything as text, "J" for JSON.
 */
static int je_print_stats(struct alloc_session *s, const struct allocator *a,
			  struct dumpdir *dir, const char *opts,
			  struct alloc_stats *st)
{
	uint64_t fn = alloc_func_addr(a, "malloc_stats_print");
	int fd, rc, rc2;

	if (!fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%smalloc_stats_print not found", a->prefix);
	rc = capture_begin(s, dir, "stats.txt", &fd);
	if (rc)
		return rc;
	rc = capture_call(s, fd, fn,
			  inject_helper(alloc_inject(s), INJECT_HELPER_WRITE_CB),
			  (uint64_t)fd, opts);
	/*
	 * The chain closed the descriptor, or will when the call ends
	 * (timeout).  Only a fault inside fn kept it from closing; any
	 * other failure: it may have closed, and the number may be the
	 * target's own again, so memsnap must not close it.
	 */
	if (rc && rc != -EFAULT)
		return rc;
	rc2 = capture_end(s, dir, fd, !rc, &st->raw, &st->raw_len);
	return rc ? rc : rc2;
}

static int je_stats(struct alloc_session *s, const struct allocator *a,
		    struct dumpdir *dir, enum alloc_stats_form form,
		    struct alloc_stats *st)
{
	static const char *const cols[] = { "allocated", "active", "metadata",
					    "resident", "mapped", "retained",
					    "arenas", NULL };
	struct alloc_stat_table *t;
	struct alloc_stat_row *row;
	struct jemalloc je;
	unsigned int narenas = 0;
	size_t i;
	int rc;

	rc = je_open(s, a, &je);
	if (rc)
		return rc;
	rc = jemalloc_epoch(&je);
	if (rc)
		return refused(s, &je, "epoch", rc);
	t = stats_table(st, "total", cols, 0x3f);
	row = stats_row(t, "total");
	if (!row)
		return -ENOMEM;
	for (i = 0; i < 6; i++) {
		char name[32];
		uint64_t v;

		snprintf(name, sizeof(name), "stats.%s", cols[i]);
		rc = jemalloc_read_size(&je, name, &v);
		if (rc == -EREMOTEIO)
			continue; /* not in this version */
		if (rc)
			return rc;
		stats_set(t, row, cols[i], v);
	}
	rc = jemalloc_read_unsigned(&je, "arenas.narenas", &narenas);
	if (rc && rc != -EREMOTEIO)
		return rc;
	if (!rc)
		stats_set(t, row, "arenas", narenas);
	st->source = "mallctl(\"stats.*\") + malloc_stats_print()";
	if (form == ALLOC_STATS_TABLES)
		return 0;
	st->raw_format = form == ALLOC_STATS_JSON ? "json" : "text";
	return je_print_stats(s, a, dir, form == ALLOC_STATS_JSON ? "J" : "",
			      st);
}

static int je_trim(struct alloc_session *s, const struct allocator *a,
		   struct alloc_trim_result *res)
{
	struct jemalloc je;
	unsigned int narenas;
	char name[48];
	int rc;

	rc = je_open(s, a, &je);
	if (rc)
		return rc;
	res->how = "mallctl(\"arena.<all>.purge\")";
	snprintf(name, sizeof(name), "arena.%d.purge", JEMALLOC_ARENAS_ALL);
	rc = jemalloc_write_void(&je, name);
	if (rc == -EREMOTEIO && (je.err == ENOENT || je.err == EFAULT) &&
	    !jemalloc_read_unsigned(&je, "arenas.narenas", &narenas)) {
		/* Before 5.0, arena.<narenas> meant all of them. */
		snprintf(name, sizeof(name), "arena.%u.purge", narenas);
		rc = jemalloc_write_void(&je, name);
	}
	return rc ? refused(s, &je, name, rc) : 0;
}

/* Without config.prof, or started without opt.prof (fixed at start-up),
 * there is no profile to dump and no sampling to switch. */
static unsigned int je_caps_lacking(const struct alloc_state *st)
{
	size_t i;

	for (i = 0; i < st->n; i++) {
		const struct alloc_item *it = &st->v[i];

		if (!it->err && it->type == ALLOC_ITEM_BOOL && !it->b &&
		    (!strcmp(it->key, "config.prof") ||
		     !strcmp(it->key, "opt.prof")))
			return ALLOC_CAN_DUMP | ALLOC_CAN_PROF;
	}
	return 0;
}

const struct alloc_backend jemalloc_backend = {
	.caps = ALLOC_CAN_DUMP | ALLOC_CAN_PROF | ALLOC_CAN_STATE |
		ALLOC_CAN_STATS | ALLOC_CAN_TRIM,
	.caps_lacking = je_caps_lacking,
	.dump = je_dump,
	.prof = je_prof,
	.state = je_state,
	.stats = je_stats,
	.trim = je_trim,
};
