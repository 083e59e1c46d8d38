/*
 * The allocator's account for `explain` (allocators/account.h) read in
 * a borrowed thread's session: the tables of `stats`, but for jemalloc
 * mallctl calls of its own, each only where it can matter.
 */
#include "allocators/account.h"

#include "allocators/allocator_internal.h"
#include "allocators/jemalloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* A jemalloc string setting into @buf; "" when unknown. */
static int je_string(struct jemalloc *je, const char *name, char *buf,
		     size_t size)
{
	int rc = jemalloc_read_string(je, name, buf, size);

	if (rc)
		buf[0] = '\0';
	return rc == -EREMOTEIO || rc == -EFAULT ? 0 : rc;
}

/* A read that mallctl refused (not in this version) leaves the value
 * unknown and is no error; the engine's errors end the account. */
static int known(int rc, bool *have)
{
	*have = !rc;
	return rc == -EREMOTEIO ? 0 : rc;
}

/*
 * The numbers the parts need after an epoch, in the same snapshot:
 * allocated, metadata, resident (not mapped, retained nor narenas,
 * which `stats` shows and no part uses: a call each); internal, which
 * is at most metadata, only where metadata could be a hundredth of
 * allocated; metadata_thp only where the pool's huge pages could hold
 * more metadata than stats.metadata (which counts bytes, not the huge
 * pages they sit on); active, which splits what it holds free into
 * dirty pages and unused space in active ones, only where that is 10
 * MiB or could be the largest part.
 */
static int je_numbers(struct alloc_session *s, struct jemalloc *je,
		      const struct alloc_account_want *w,
		      struct alloc_account *acc)
{
	const char *const names[] = { "stats.allocated", "stats.metadata",
				      "stats.resident" };
	uint64_t *const to[] = { &acc->allocated, &acc->metadata,
				 &acc->resident };
	bool have[3] = { false };
	char name[48];
	size_t i;
	int rc;

	rc = jemalloc_epoch(je);
	for (i = 0; !rc && i < 3; i++) {
		rc = jemalloc_read_size(je, names[i], to[i]);
		have[i] = !rc;
		if (rc == -EREMOTEIO && i)
			rc = 0;	/* not in this version */
	}
	if (rc == -EREMOTEIO) {
		s->alloc_errno = je->err;
		alloc_fail(s, rc, DIAG_REFUSED, "mallctl(\"%s\"): %s",
			   i ? names[i - 1] : "epoch",
			   jemalloc_strerror(je->err, "stats"));
	}
	if (rc)
		return rc;
	acc->have_metadata = have[1];
	acc->have_resident = have[2];
	if (acc->have_metadata && acc->metadata &&
	    acc->metadata >= acc->allocated / 100) {
		snprintf(name, sizeof(name), "stats.arenas.%d.internal",
			 JEMALLOC_ARENAS_ALL);
		rc = known(jemalloc_read_size(je, name, &acc->internal),
			   &acc->have_internal);
	}
	/* Blocks in the threads' caches are in allocated: about a
	 * thread's worth of its size classes each, tens of MiB with many
	 * threads; a call only where they could be a part worth naming. */
	if (!rc && acc->allocated >= w->min_bytes) {
		snprintf(name, sizeof(name), "stats.arenas.%d.tcache_bytes",
			 JEMALLOC_ARENAS_ALL);
		rc = known(jemalloc_read_size(je, name, &acc->tcache_bytes),
			   &acc->have_tcache_bytes);
	}
	if (!rc && w->anon_huge > acc->metadata)
		rc = known(jemalloc_read_size(je, "stats.metadata_thp",
					      &acc->metadata_thp_pages),
			   &acc->have_metadata_thp_pages);
	alloc_account_jemalloc_derive(acc);
	if (!rc && acc->have_free &&
	    (acc->free >= w->min_bytes || acc->free > w->rss / 8)) {
		rc = known(jemalloc_read_size(je, "stats.active", &acc->active),
			   &acc->have_active);
		alloc_account_jemalloc_derive(acc);
	}
	return rc;
}

/*
 * With want.all (the exporter, whose dashboards show them whatever the
 * findings): active, retained, the muzzy pages, narenas and the page
 * size, in the snapshot of je_numbers()'s epoch.  A name this version
 * lacks is left unknown.
 */
static int je_all(struct jemalloc *je, struct alloc_account *acc,
		  uint64_t *page, bool *have_page, uint64_t *narenas)
{
	uint64_t pmuzzy = 0;
	unsigned int n = 0;
	bool have = false;
	char name[48];
	int rc = 0;

	if (!acc->have_active)
		rc = known(jemalloc_read_size(je, "stats.active", &acc->active),
			   &acc->have_active);
	if (!rc)
		rc = known(jemalloc_read_size(je, "stats.retained",
					      &acc->retained),
			   &acc->have_retained);
	if (!rc)
		rc = known(jemalloc_read_size(je, "arenas.page", page),
			   have_page);
	snprintf(name, sizeof(name), "stats.arenas.%d.pmuzzy",
		 JEMALLOC_ARENAS_ALL);
	if (!rc && *have_page)
		rc = known(jemalloc_read_size(je, name, &pmuzzy), &have);
	if (have && pmuzzy <= UINT64_MAX / *page) {
		acc->muzzy = pmuzzy * *page;
		acc->have_muzzy = true;
	}
	if (!rc)
		rc = known(jemalloc_read_unsigned(je, "arenas.narenas", &n),
			   &have);
	if (!rc)
		*narenas = n;
	alloc_account_jemalloc_derive(acc);
	return rc;
}

/*
 * jemalloc's account, in calls of its own rather than the tables of
 * `stats`, so that the thread is stopped no longer than for `stats`
 * when no finding needs a setting: je_numbers(), then each setting
 * only where the finding that quotes it can fire (a finding's
 * threshold, as explain/findings.c), on the numbers before they are
 * bounded by the pool, which can only lower them.
 */
static int je_account(struct alloc_session *s, const struct allocator *a,
		      const struct alloc_account_want *w,
		      struct alloc_account *acc)
{
	uint64_t page = 0, ddecay = 0, mdecay = 0, md, narenas = 0;
	uint64_t min_bytes = w->min_bytes;
	struct jemalloc je;
	bool have_page = false, have, b = false;
	unsigned int n = 0;
	int rc;

	alloc_clear_error(s);
	if (jemalloc_init(&je, s->inj, s->pid, a))
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%smallctl not found", a->prefix);
	jemalloc_conf_var(a->prefix, acc->conf_var, sizeof(acc->conf_var));
	rc = je_numbers(s, &je, w, acc);
	if (!rc && w->all)
		rc = je_all(&je, acc, &page, &have_page, &narenas);
	md = alloc_account_metadata_resident(acc, w->anon_huge, w->huge_page);
	if (!rc && acc->free >= min_bytes && acc->free * 10 > acc->in_use) {
		rc = known(jemalloc_read_size(&je, "opt.dirty_decay_ms", &ddecay),
			   &acc->have_dirty_decay);
		if (!rc)
			rc = known(jemalloc_read_size(&je, "opt.muzzy_decay_ms",
						      &mdecay),
				   &acc->have_muzzy_decay);
		/* the switch as it is now, which may differ from the
		 * option */
		if (!rc)
			rc = known(jemalloc_read_bool(&je, "background_thread",
						      &b),
				   &acc->have_background_thread);
	}
	if (!rc && !have_page && acc->free + md >= min_bytes)
		rc = known(jemalloc_read_size(&je, "arenas.page", &page),
			   &have_page);
	if (!rc && md >= min_bytes && md * 10 > acc->in_use) {
		if (!narenas) {
			rc = known(jemalloc_read_unsigned(&je, "arenas.narenas",
							  &n),
				   &have);
			narenas = n;
		}
		if (!rc)
			rc = je_string(&je, "opt.metadata_thp", acc->metadata_thp,
				       sizeof(acc->metadata_thp));
	}
	acc->prof = true;	/* unknown: say prof on, which says why not */
	/* the next step the heap in use calls for, where it is the largest
	 * part (a verdict's) or half of RSS (a finding's) */
	if (!rc && acc->in_use >= min_bytes &&
	    acc->in_use > (w->rss ? w->rss / 8 : 0)) {
		rc = known(jemalloc_read_bool(&je, "opt.prof", &acc->prof),
			   &have);
		/* mallctl knows opt.prof only in a jemalloc built with
		 * profiling (config.prof): ENOENT is one built without, as
		 * Debian's on arm64, where prof on refuses */
		if (!rc && !have && jemalloc_error(&je) == ENOENT)
			acc->prof = false;
	}
	if (rc)
		return rc;
	acc->narenas = narenas > 1u << 20 ? 1u << 20 : (unsigned int)narenas;
	acc->page = have_page ? page : 0;
	acc->dirty_decay_ms = (int64_t)ddecay;
	acc->muzzy_decay_ms = (int64_t)mdecay;
	acc->background_thread = b;
	return 0;
}

int alloc_account(struct alloc_session *s, const struct allocator *a,
		  struct dumpdir *dir, const struct alloc_account_want *w,
		  struct alloc_account *acc)
{
	struct alloc_stats st;
	int rc;

	memset(acc, 0, sizeof(*acc));
	acc->kind = a->kind;
	if (a->kind == ALLOC_JEMALLOC)
		return je_account(s, a, w, acc);
	rc = alloc_stats(s, a, dir, ALLOC_STATS_TABLES, &st);
	if (!rc && alloc_account_from_stats(a->kind, &st, acc)) {
		rc = alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				"its statistics hold none of the numbers explain needs");
	}
	alloc_stats_free(&st);
	acc->kind = a->kind;
	return rc;
}

/* Item @key of @st: true and *@v when known. */
static bool item(const struct alloc_state *st, const char *key, uint64_t *v)
{
	size_t i;

	for (i = 0; i < st->n; i++)
		if (!strcmp(st->v[i].key, key) && !st->v[i].err) {
			*v = st->v[i].u;
			return true;
		}
	return false;
}

int alloc_account_state(struct alloc_session *s, const struct allocator *a,
			struct alloc_account *acc)
{
	struct alloc_state st = { .n = 0 };
	uint64_t f = 0;
	int rc;

	memset(acc, 0, sizeof(*acc));
	acc->kind = a->kind;
	if (a->kind == ALLOC_GLIBC) {
		/* one call: not its version, nor malloc_info() */
		rc = glibc_mallinfo2_used(s, a, &acc->in_use, &acc->free);
		acc->have_in_use = acc->have_free = !rc;
		return rc == -EOPNOTSUPP ? 0 : rc;
	}
	rc = alloc_state(s, a, &st);
	if (rc == -EOPNOTSUPP || rc == -EREMOTEIO)
		return 0;
	if (rc)
		return rc;
	switch (a->kind) {
	case ALLOC_JEMALLOC:
		acc->have_in_use = item(&st, "stats.allocated", &acc->in_use);
		acc->have_metadata = item(&st, "stats.metadata", &acc->metadata);
		acc->have_resident = item(&st, "stats.resident", &acc->resident);
		if (acc->have_in_use && acc->have_resident) {
			acc->free = sub0(sub0(acc->resident, acc->in_use),
					 acc->metadata);
			acc->have_free = true;
		}
		break;
	case ALLOC_TCMALLOC:
	case ALLOC_TCMALLOC_MINIMAL:
		acc->have_in_use = item(&st, "generic.current_allocated_bytes",
					&acc->in_use);
		if (acc->have_in_use && item(&st, "generic.heap_size", &f)) {
			/* heap_size holds in use, free and unmapped */
			acc->free = sub0(f, acc->in_use);
			acc->have_free = true;
		}
		break;
	default:
		break;
	}
	return 0;
}
