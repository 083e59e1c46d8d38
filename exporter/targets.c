/*
 * The exporter's targets (exporter/exporter.h): found, pinned, read at
 * most every --attach-every each, measured at every scrape, ended when
 * their process exits.
 */
#include "exporter/exporter_internal.h"

#include "common/util.h"
#include "proc/cgroup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const reasons[EXPORTER_REASONS] = {
	[DIAG_FAILED] = "failed",
	[DIAG_NO_PROCESS] = "exited",
	[DIAG_PERMISSION] = "permission",
	[DIAG_UNSUPPORTED] = "unsupported",
	[DIAG_UNSAFE] = "unsafe",
	[DIAG_TIMEOUT] = "timeout",
	[DIAG_REFUSED] = "refused",
	[DIAG_INTERRUPTED] = "interrupted",
	[DIAG_BAD_INPUT] = "bad_input",
	[DIAG_USAGE] = "usage",
};

const char *exporter_reason(enum diag_kind kind)
{
	return (unsigned int)kind < EXPORTER_REASONS ? reasons[kind] : "failed";
}

uint64_t exporter_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void note(struct exporter *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct exporter *e, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!e->c.reader.note)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	e->c.reader.note(e->c.reader.ctx, line);
}

static void target_free(struct target *t)
{
	if (!t)
		return;
	pin_close(&t->pin);
	expo_free(&t->labels);
	free(t);
}

/* @t's process exited: it is a target no more (its series end). */
static void end_target(struct exporter *e, struct target *t)
{
	if (t->ended)
		return;
	t->ended = true;
	e->ended++;
	if (t->given)
		note(e, "pid %d (%s) exited: it is no longer a target",
		     (int)t->pin.proc.pid, t->st.comm);
	pin_close(&t->pin);
}

/* The ended targets taken out of the set. */
static void prune(struct exporter *e)
{
	size_t i, n = 0;

	for (i = 0; i < e->n; i++) {
		if (e->t[i]->ended)
			target_free(e->t[i]);
		else
			e->t[n++] = e->t[i];
	}
	e->n = n;
}

/* Pinned process @p (stat @st) a target; @t holds what the filters
 * read of it.  0 or -ENOMEM (@t freed). */
static int add_target(struct exporter *e, struct target *t, bool given)
{
	if (array_grow((void **)&e->t, &e->cap, e->n + 1, sizeof(*e->t))) {
		target_free(t);
		return -ENOMEM;
	}
	t->given = given;
	t->last_failed = -1;
	if (!t->exe[0])
		pin_exe(&t->pin, t->exe, sizeof(t->exe));
	if (!t->cgroup[0] && proc_cgroup_at(t->pin.dir, t->cgroup,
					    sizeof(t->cgroup)))
		t->cgroup[0] = '\0';
	container_id(t->cgroup, t->container, sizeof(t->container));
	t->due_ms = 0;		/* its first reading: now */
	e->t[e->n++] = t;
	return 0;
}

static struct target *target_new(void)
{
	struct target *t = calloc(1, sizeof(*t));

	if (t) {
		t->pin.dir = t->pin.proc.pidfd = -1;
		expo_init(&t->labels);
	}
	return t;
}

static bool have_filters(const struct exporter *e)
{
	return e->have_re || e->c.min_rss || e->c.cgroup;
}

/* When the system booted (/proc/stat's "btime"), 0 unknown. */
static uint64_t boot_time(void)
{
	char line[256];
	uint64_t t = 0;
	FILE *f = fopen("/proc/stat", "re");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "btime ", 6)) {
			line[strcspn(line, "\n")] = '\0';
			if (parse_u64(line + 6, 10, &t))
				t = 0;
			break;
		}
	if (f)
		fclose(f);
	return t;
}

int exporter_new(const struct exporter_config *c, struct exporter **out,
		 char *why, size_t size)
{
	struct exporter *e = calloc(1, sizeof(*e));
	size_t i;
	int rc;

	*out = NULL;
	why[0] = '\0';
	if (!e)
		return -ENOMEM;
	e->c = *c;
	e->self = getpid();
	e->boot_time = boot_time();
	e->clk_tck = sysconf(_SC_CLK_TCK);
	e->ex = calloc(1, sizeof(*e->ex));
	e->pids = calloc(c->npids ? c->npids : 1, sizeof(*e->pids));
	if (!e->ex || !e->pids) {
		exporter_free(e);
		return -ENOMEM;
	}
	if (c->npids)
		memcpy(e->pids, c->pids, c->npids * sizeof(*e->pids));
	e->c.pids = e->pids;
	if (c->match) {
		rc = regcomp(&e->re, c->match, REG_EXTENDED | REG_NOSUB);
		if (rc) {
			char re[128];

			regerror(rc, &e->re, re, sizeof(re));
			snprintf(why, size, "--match '%s': %s", c->match, re);
			exporter_free(e);
			return -EINVAL;
		}
		e->have_re = true;
	}
	if (c->cgroup && select_cgroup_arg(c->cgroup, e->cgroup,
					   sizeof(e->cgroup))) {
		snprintf(why, size,
			 "--cgroup '%s': not a cgroup's path (e.g. /system.slice/redis-server.service)",
			 c->cgroup);
		exporter_free(e);
		return -EINVAL;
	}
	for (i = 0; i < c->npids; i++) {
		struct target *t = target_new();

		if (!t) {
			exporter_free(e);
			return -ENOMEM;
		}
		rc = pin_open(c->pids[i], &t->pin, &t->st);
		if (!rc && t->st.kernel_thread)
			snprintf(why, size,
				 "pid %d (%s) is a kernel thread: it has no allocator",
				 (int)c->pids[i], t->st.comm);
		else if (!rc && (t->st.state == 'Z' || t->st.state == 'X'))
			snprintf(why, size,
				 "pid %d (%s) is a zombie: it has exited and holds no memory",
				 (int)c->pids[i], t->st.comm);
		else if (rc)
			snprintf(why, size, "pid %d: %s", (int)c->pids[i],
				 rc == -ESRCH ? "no such process"
					      : strerror(-rc));
		if (!rc && why[0])
			rc = -ESRCH;
		if (!rc)
			rc = add_target(e, t, true);
		else
			target_free(t);
		if (rc) {
			if (!why[0])
				snprintf(why, size, "pid %d: %s",
					 (int)c->pids[i], strerror(-rc));
			exporter_free(e);
			return rc;
		}
	}
	*out = e;
	return 0;
}

void exporter_free(struct exporter *e)
{
	size_t i;

	if (!e)
		return;
	for (i = 0; i < e->n; i++)
		target_free(e->t[i]);
	free(e->t);
	if (e->have_re)
		regfree(&e->re);
	free(e->pids);
	free(e->ex);
	free(e);
}

/* Pin @pid and make it a target if it passes, or count it dropped. */
static void consider(struct exporter *e, pid_t pid)
{
	struct target *t = target_new();

	if (!t)
		return;
	if (pin_open(pid, &t->pin, &t->st) ||
	    !select_passes(e, &t->pin, &t->st, t)) {
		target_free(t);
		return;
	}
	if (e->n >= e->c.max_targets) {
		e->dropped++;
		target_free(t);
		return;
	}
	add_target(e, t, false);
}

size_t exporter_find(struct exporter *e)
{
	pid_t *pids;
	ssize_t n, i;

	for (i = 0; i < (ssize_t)e->n; i++)
		if (!pin_alive(&e->t[i]->pin))
			end_target(e, e->t[i]);
	prune(e);
	if (!have_filters(e))
		return e->n;
	n = select_candidates(e, &pids);
	if (n < 0)
		return e->n;
	e->dropped = 0;
	for (i = 0; i < n; i++)
		consider(e, pids[i]);
	free(pids);
	return e->n;
}

/* One reading of @t (struct exporter_reader), at @now. */
static void read_target(struct exporter *e, struct target *t, uint64_t now)
{
	struct exporter_reading *r = calloc(1, sizeof(*r));

	t->due_ms = now + e->c.attach_every_ms;
	if (!r)
		return;
	if (pin_alive(&t->pin))
		e->c.reader.read(e->c.reader.ctx, &t->pin.proc,
				 !e->c.no_attach, r);
	else
		r->failed = DIAG_NO_PROCESS;
	t->stopped_us += r->stopped_us;
	t->readings++;
	/* What was read is of the process pinned only if it still is. */
	if (!pin_alive(&t->pin)) {
		end_target(e, t);
		free(r);
		return;
	}
	if (r->ok) {
		t->r = *r;
		t->r_ms = now;
		t->last_failed = -1;
	} else {
		e->failures[(unsigned int)r->failed < EXPORTER_REASONS
				    ? r->failed : DIAG_FAILED]++;
		if (t->last_failed != (int)r->failed)
			note(e, "pid %d (%s): %s", (int)t->pin.proc.pid,
			     t->st.comm, r->why[0] ? r->why : "reading failed");
		t->last_failed = (int)r->failed;
		if (!t->read)
			t->r.allocator = r->allocator;
	}
	if (!t->read) {
		t->read = true;
		render_labels(t);
	}
	free(r);
}

/* The live target whose reading is due first, or NULL. */
static struct target *first_due(struct exporter *e)
{
	struct target *best = NULL;
	size_t i;

	for (i = 0; i < e->n; i++) {
		struct target *t = e->t[i];

		if (!t->ended && (!best || t->due_ms < best->due_ms))
			best = t;
	}
	return best;
}

uint64_t exporter_work(struct exporter *e, uint64_t budget_ms)
{
	uint64_t start = exporter_now_ms(), now = start;
	struct target *t;

	while ((t = first_due(e))) {
		if (t->due_ms > now)
			return t->due_ms - now;
		if (budget_ms && now - start >= budget_ms)
			return 0;
		read_target(e, t, now);
		now = exporter_now_ms();
	}
	prune(e);
	return UINT64_MAX;
}

/* The allocator's numbers of @t, if they are recent enough to use. */
static const struct exporter_reading *usable(const struct exporter *e,
					     const struct target *t,
					     uint64_t now)
{
	if (!t->r_ms || !t->r.ok)
		return NULL;
	if (now - t->r_ms > EXPORTER_STALE_READINGS * e->c.attach_every_ms)
		return NULL;
	return &t->r;
}

/* This scrape's /proc part of @t and the parts of RSS computed. */
static void measure(struct exporter *e, struct target *t, uint64_t now)
{
	const struct exporter_reading *r = usable(e, t, now);
	struct target_now *m = &t->now;
	struct proc_memory pm = { 0 };
	struct explain_input in;
	long ncpus;
	size_t i;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = pin_stat_read(&t->pin, &t->st);
	if (!rc)
		rc = proc_memory_read_at(t->pin.dir, &pm);
	if (!pin_alive(&t->pin) || rc == -ESRCH) {
		end_target(e, t);
		goto out;
	}
	if (rc) {
		e->proc_failures++;
		goto out;
	}
	m->have_limit = !proc_memory_limit_at(t->pin.dir, &m->limit) &&
			m->limit && pin_alive(&t->pin);
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	/* what the last reading found stays true between readings: the
	 * runtime, the sampler's memory, whether there is a malloc */
	in = (struct explain_input){
		.pid = t->pin.proc.pid,
		.pm = &pm,
		.acc = r && r->attached ? &r->acc : NULL,
		.not_read = r && r->attached ? NULL
			    : e->c.no_attach ? "--no-attach"
					     : "not read yet",
		.allocator = t->r.allocator ? t->r.allocator : "the allocator",
		.can_prof = r && r->can_prof,
		.claims = t->r.claims,
		.nclaims = t->r_ms ? t->r.nclaims : 0,
		.rt = t->r_ms ? &t->r.rt : NULL,
		.no_malloc = t->r.no_malloc,
		.comm = t->st.comm,
		.ncpus = ncpus > 0 ? (unsigned int)ncpus : 1,
	};
	explain_compute(&in, e->ex);
	m->ok = true;
	m->rss = e->ex->rss;
	m->swap = e->ex->swap;
	m->vm_hwm = e->ex->vm_hwm;
	m->heap_parts = e->ex->heap_parts;
	memcpy(m->part, e->ex->part, sizeof(m->part));
	m->heap = e->ex->heap;
	for (i = 0; i < e->ex->nf && i < EXPLAIN_MAX_FINDINGS; i++) {
		m->fid[i] = e->ex->f[i].id;
		m->fbytes[i] = e->ex->f[i].bytes;
	}
	m->nf = i;
	m->have_reading = r && r->attached;
	m->reading_age_ms = r ? now - t->r_ms : 0;
out:
	proc_memory_free(&pm);
}

int exporter_scrape(struct exporter *e, struct expo *x)
{
	uint64_t start = exporter_now_ms();
	size_t i;

	exporter_find(e);
	for (i = 0; i < e->n; i++)
		if (e->t[i]->read)
			measure(e, e->t[i], start);
	prune(e);
	e->scrapes++;
	e->last_scrape_s = (double)(exporter_now_ms() - start) / 1000.0;
	return render_scrape(e, x, start);
}

size_t exporter_targets(const struct exporter *e, pid_t *pids, size_t max)
{
	size_t i;

	for (i = 0; i < e->n && i < max; i++)
		pids[i] = e->t[i]->pin.proc.pid;
	return e->n;
}
