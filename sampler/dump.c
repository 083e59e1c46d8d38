/*
 * Reading memsnap's sampler back (sampler/sampler.h): its live
 * records, each stack unwound here, written as a jemalloc heap_v2
 * profile.  Nothing in the target is stopped or written.
 *
 * The table is in the target's memory and the target can write all of
 * it: its geometry, every record, every register and stack word.  So
 * what a dump costs is bounded by memsnap, not by the table:
 *   - the geometry must be one memsnap makes (sampler_read_ctl(): the
 *     stack slice memsnap sets, at most NRECS_MAX records), the table in
 *     one anonymous mapping;
 *   - a record is read from the chunks its head names, each chunk
 *     index checked against the pool, its stack no longer than the
 *     slice memsnap set, and read again after its stack: one that
 *     changed meanwhile is passed over;
 *   - stacks are kept once each (interned): memory follows the distinct
 *     stacks and (stack, size) pairs, not the records;
 *   - a record alike the one before (the same registers over the same
 *     stack copy) is not unwound again but given its frames: a table of
 *     one stack, which only a forger writes, costs one unwind.  Its
 *     frames count towards the budget all the same, since what follows
 *     the unwind (interning, the profile) costs as much;
 *   - a dump unwinds at most DUMP_FRAMES frames, keeps at most DUMP_KEPT
 *     distinct frames, reads at most DUMP_STACK_READ bytes of stack
 *     copies and has the unwinder served at most DUMP_PAGES pages: once
 *     one is spent, the records left keep their caller alone (no
 *     unwind, no stack read), and d->spent names it;
 *   - (stack, size) pairs are at most the records, NRECS_MAX;
 *   - the profile stops at @max_bytes as it is written (-EFBIG).
 */
#include "sampler/dump_read.h"
#include "sampler/dump_table.h"

#include "common/util.h"
#include "injector/unwind.h"
#include "proc/maps.h"
#include "proc/procfs.h"
#include "symbols/symbolizer.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One dump's budgets: a dump of 128 Ki live samples (a 64 GiB heap at
 * the default mean) with stacks of 32 frames stays within them, and a
 * table written to spend them costs seconds (bench/forged.sh). */
#define DUMP_FRAMES (4u << 20)
#define DUMP_PAGES (1u << 16)
/* 128 Ki samples of 32 KiB of stack each: what the largest copies
 * (--stack-bytes 64K) of a forged table may make a dump read. */
#define DUMP_STACK_READ (4ull << 30)

/* Records read at a time: memsnap's memory follows the live records,
 * not the table's size (which a hostile target chooses). */
#define CHUNK 4096u

/*
 * The frames of a record as the profile gives them, from its unwind
 * @raw (@n frames, or -errno): the sampler's own dropped; its caller
 * alone when nothing unwinds.  All are return addresses, and readers of
 * heap_v2 take frame 0 as it is (jemalloc's is its own code) and every
 * other as a return address: frame 0 is given as the byte before,
 * inside the call, so that it names the line of the call and not what
 * follows it (an inlined function, the next function after a call that
 * does not return).
 */
static uint32_t frames_of(const uint64_t *raw, int n, uint64_t caller,
			  uint64_t image, uint64_t *pcs, bool *unwound)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		if (raw[i] >= image && raw[i] < image + CODE_LEN && !k)
			continue;
		pcs[k++] = raw[i];
	}
	*unwound = k > 1;
	if (!k && caller)
		pcs[k++] = caller;
	if (k && pcs[0])
		pcs[0]--;
	return (uint32_t)k;
}

/* Does the unwind @sv start where @regs and @stack (@len bytes) do? */
static bool same_start(const struct unwind_saved *sv, const uint64_t *regs,
		       const unsigned char *stack, size_t len)
{
	return sv->stack_len == len &&
	       !memcmp(sv->regs, regs, sizeof(*regs) * SAMPLER_REGS_SAVED) &&
	       !memcmp(sv->stack, stack, len);
}

/* @b's records unwound, each run of records alike once (and not at all
 * when the first is alike the batch before's last). */
static void unwind_batch(struct batch *b, struct unwinder *uw)
{
	struct unwind_saved sv[BATCH];
	struct unwind_out out[BATCH];
	struct last_unwind *last = &b->last;
	int from[BATCH];	/* whose unwind: itself, one before, -1 last */
	size_t i, k = 0;

	for (i = 0; i < b->n; i++) {
		if (i && same_start(&b->sv[i], b->sv[i - 1].regs,
				    b->sv[i - 1].stack,
				    b->sv[i - 1].stack_len)) {
			from[i] = from[i - 1];
		} else if (!i && last->valid &&
			   same_start(&b->sv[0], last->regs, last->stack,
				      last->stack_len)) {
			from[i] = -1;
		} else {
			from[i] = (int)i;
			sv[k] = b->sv[i];
			out[k++] = b->out[i];
		}
	}
	if (k)
		unwind_saved(uw, sv, k, FRAMES_MAX, out);
	for (i = 0, k = 0; i < b->n; i++) {
		int j = from[i];

		if (j == (int)i) {
			b->out[i].n = out[k].n;
			b->out[i].whole = out[k++].whole;
		} else if (j >= 0) {
			b->out[i].n = b->out[j].n;
			b->out[i].whole = b->out[j].whole;
			if (b->out[j].n > 0)
				memcpy(b->raw[i], b->raw[j], (size_t)b->out[j].n *
				       sizeof(b->raw[j][0]));
		} else {
			b->out[i].n = last->n;
			b->out[i].whole = last->whole;
			if (last->n > 0)
				memcpy(b->raw[i], last->raw,
				       (size_t)last->n * sizeof(last->raw[0]));
		}
	}
	/* the last record, for the batch after */
	i = b->n - 1;
	memcpy(last->regs, b->sv[i].regs, sizeof(last->regs));
	memcpy(last->stack, b->sv[i].stack, b->sv[i].stack_len);
	last->stack_len = b->sv[i].stack_len;
	if (b->out[i].n > 0)
		memcpy(last->raw, b->raw[i], (size_t)b->out[i].n *
		       sizeof(*last->raw));
	last->n = b->out[i].n;
	last->whole = b->out[i].whole;
	last->valid = true;
}

/* The budget spent, if one is: the records left are not unwound. */
static void check_budgets(const struct table *t, const struct unwinder *uw,
			  struct sampler_dump *d)
{
	if (d->spent)
		return;
	if (t->frames >= DUMP_FRAMES)
		d->spent = "frames unwound";
	else if (t->used >= DUMP_KEPT)
		d->spent = "distinct stack frames kept";
	else if (t->stack_read >= DUMP_STACK_READ)
		d->spent = "bytes of stack read";
	else if (unwinder_pages(uw) >= DUMP_PAGES)
		d->spent = "pages of code and unwind tables read";
}

/* Count a record of @depth frames @pcs (or its caller alone, once the
 * distinct frames are spent) into @t. */
static int count_record(struct table *t, uint64_t *pcs, uint32_t depth,
			uint64_t caller, uint64_t size, int part,
			struct sampler_dump *d)
{
	uint32_t id;
	int rc = table_intern(t, pcs, depth, &id);

	if (rc == -E2BIG) {
		/* once a budget is spent, flush() counts each record cut */
		if (!d->spent) {
			d->spent = "distinct stack frames kept";
			d->cut++;
		}
		pcs[0] = caller ? caller - 1 : pcs[0];
		rc = table_intern(t, pcs, 1, &id);
	}
	return rc ? rc : table_count(t, id, size, part);
}

/* Unwind the records of @b (unless a budget is spent), count them into
 * @t. */
static int flush(struct batch *b, struct unwinder *uw, uint64_t image,
		 struct table *t, struct sampler_dump *d)
{
	uint64_t pcs[FRAMES_MAX];
	size_t i;
	int rc = 0;

	if (!b->n)
		return 0;
	check_budgets(t, uw, d);
	if (!d->spent)
		unwind_batch(b, uw);
	for (i = 0; i < b->n && !rc; i++) {
		const struct sampler_rec *r = &b->rec[i];
		int n = b->out[i].n;
		uint32_t depth;
		bool unwound;

		if (d->spent) {
			n = 0;
			d->cut++;
		} else if (n < 0 && unwinder_why(uw)) {
			/* the unwinder failed on it: its caller only */
			d->lost++;
			snprintf(d->why, sizeof(d->why), "%s",
				 unwinder_why(uw));
		}
		depth = frames_of(b->raw[i], n, r->caller, image, pcs,
				  &unwound);
		if (!depth)
			continue;
		/* a stack cut before the thread's start says so, outermost;
		 * counted apart from those a budget or the unwinder left
		 * with their caller (d->cut, d->lost) */
		if (d->spent || n <= 0 || !b->out[i].whole) {
			if (depth == FRAMES_MAX)
				depth--;
			pcs[depth++] = SYM_PC_TRUNCATED;
			if (b->part[i] < 0)
				d->truncated += !d->spent && n > 0;
			else
				d->truncated_kept += !d->spent && n > 0;
		}
		t->frames += (uint64_t)(n > 0 ? n : 0);
		d->unwound += unwound;
		if (b->part[i] >= 0)
			d->freed_kept[b->part[i]]++;
		else
			d->live++;
		rc = count_record(t, pcs, depth, r->caller, r->size,
				  b->part[i], d);
	}
	b->n = 0;
	return rc;
}

/* Every live record of the table of @c, unwound, into @t: the keys and
 * heads read CHUNK at a time, each record whose ptr is its key's. */
static int read_records(pid_t pid, const struct sampler_ctl *c,
			struct unwinder *uw, uint64_t image,
			struct table *t, struct sampler_dump *d)
{
	struct where w = where_of(c);
	uint64_t *keys = malloc(CHUNK * sizeof(*keys));
	uint32_t *heads = malloc(CHUNK * sizeof(*heads));
	struct batch *b = batch_new(c);
	uint64_t base;
	int rc = 0;

	if (!keys || !heads || !b) {
		rc = -ENOMEM;
		goto out;
	}
	for (base = 0; base < c->nrecs && !rc; base += CHUNK) {
		uint64_t n = c->nrecs - base < CHUNK ? c->nrecs - base : CHUNK;
		uint64_t i;

		rc = proc_read_mem(pid, w.keys + base * sizeof(*keys), keys,
				   n * sizeof(*keys));
		if (!rc)
			rc = proc_read_mem(pid, w.heads + base * sizeof(*heads),
					   heads, n * sizeof(*heads));
		for (i = 0; i <= n && !rc; i++) {
			if (i < n && keys[i] && heads[i])
				b->cand[b->ncand++] = (struct cand){
					.head = heads[i], .want = keys[i],
					.part = -1 };
			if (b->ncand == BATCH || (i == n && b->ncand)) {
				read_batch(pid, c, &w, b, t, d);
				rc = flush(b, uw, image, t, d);
			}
		}
	}
out:
	batch_free(b);
	free(heads);
	free(keys);
	return rc;
}

/*
 * The records of the reservoir of freed samples, unwound, into @t, and
 * the offers each part had once they were read into @seen (from the
 * control block at @ctl; @c's if that cannot be read).  A record is
 * taken whole or not at all: its slot's sequence is even (written
 * whole) when read, and the same once the record has been read.
 */
static int read_kept(pid_t pid, const struct sampler_ctl *c, uint64_t ctl,
		     struct unwinder *uw, uint64_t image, struct table *t,
		     uint64_t seen[2], struct sampler_dump *d)
{
	struct where w = where_of(c);
	struct sampler_kept *slots = malloc(SAMPLER_KEPT * sizeof(*slots));
	struct batch *b = batch_new(c);
	uint64_t i;
	int rc = 0;

	if (!slots || !b) {
		rc = -ENOMEM;
		goto out;
	}
	rc = proc_read_mem(pid, w.kept, slots, SAMPLER_KEPT * sizeof(*slots));
	/* the offers that the records read stand for: counted after */
	if (proc_read_mem(pid, ctl + offsetof(struct sampler_ctl, kept_seen),
			  seen, 2 * sizeof(*seen)))
		memcpy(seen, c->kept_seen, 2 * sizeof(*seen));
	for (i = 0; i <= SAMPLER_KEPT && !rc; i++) {
		if (i < SAMPLER_KEPT && slots[i].seq && !(slots[i].seq & 1))
			b->cand[b->ncand++] = (struct cand){
				.head = slots[i].head,
				.part = i >= SAMPLER_KEPT_SMALL,
				.slot = i, .seen = slots[i] };
		if (b->ncand == BATCH || (i == SAMPLER_KEPT && b->ncand)) {
			read_batch(pid, c, &w, b, t, d);
			rc = flush(b, uw, image, t, d);
		}
	}
out:
	batch_free(b);
	free(slots);
	return rc;
}

/* Does the table lie in one anonymous, private mapping, as memsnap
 * mapped it?  (The kernel may have merged it with a neighbour.) */
static bool table_mapped(const struct maps *maps, const struct sampler_ctl *c)
{
	size_t i;

	for (i = 0; i < maps->n; i++) {
		const struct map_entry *e = &maps->v[i];

		if (c->table < e->start || c->table >= e->end)
			continue;
		return !e->path && !e->shared && !e->inode &&
		       c->table_len <= e->end - c->table;
	}
	return false;
}

int sampler_dump(pid_t pid, const struct maps *maps,
		 const struct sampler_status *st, FILE *out,
		 uint64_t max_bytes, struct sampler_dump *d)
{
	struct sampler_ctl *c = NULL;
	struct table t = { 0 };
	struct unwinder *uw = NULL;
	struct unwind_code code;
	uint64_t seen[2] = { 0, 0 };
	int rc;

	memset(d, 0, sizeof(*d));
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = sampler_read_at(pid, st->image, &d->st, c);
	if (rc == -ENODATA)
		rc = -ENOENT;	/* never switched on: no records */
	if (rc)
		goto out;
	if (!c->table) {
		rc = -ENOENT;
		goto out;
	}
	if (!table_mapped(maps, c)) {
		rc = -EPROTO;
		goto out;
	}
	code = (struct unwind_code){
		.lo = d->st.image, .hi = d->st.image + CODE_LEN,
		.eh_frame_hdr = d->st.image + SAMPLER_OFF_sampler_eh_frame_hdr,
	};
	uw = unwinder_new(pid, maps, &code);
	if (!uw) {
		rc = -ENOMEM;
		goto out;
	}
	/* the freed first: a block freed between the two reads is then
	 * counted in neither, not in both */
	rc = read_kept(pid, c, d->st.ctl, uw, d->st.image, &t, seen, d);
	if (!rc)
		rc = read_records(pid, c, uw, d->st.image, &t, d);
	if (!rc)
		rc = table_write_profile(out, c, maps, &t, max_bytes, seen, d);
	d->frames = t.frames;
	d->kept = t.used;
out:
	unwinder_free(uw);
	table_free(&t);
	free(c);
	return rc;
}
