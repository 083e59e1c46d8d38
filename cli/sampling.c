/*
 * The sampler's side of prof, dump and info (sampler/sampler.h):
 *
 *   memsnap --pid N prof on --sampler [--sample-bytes SIZE]
 *   memsnap --pid N prof off            (the sampler, when it is on)
 *   memsnap --pid N dump [-o FILE]      (from the sampler, when it is on)
 */
#include "cli/sampling.h"

#include "sampler/sampler.h"
#include "timeline/timeline.h"
#include "cli/progress.h"
#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

/* After the call on a borrowed thread that returned @rc: its error
 * line, then the thread given back.  The exit code. */
static int given_back(const struct options *opt, struct target *t, int rc)
{
	int ret = EXIT_OK;

	if (rc)
		ret = target_error(t, "prof",
				   target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, "prof", t);
	return ret ? ret : rc;
}

/* A mean below this samples nearly every allocation: said. */
#define SAMPLE_BYTES_LOW 4096

/* What `prof on` says it did, on standard output. */
static void print_on(const struct options *opt, const struct target *t,
		     const struct sampler_start *r)
{
	if (opt->json) {
		struct json j;

		target_json_begin(t, &j);
		json_string(&j, "action", "sampling");
		json_bool(&j, "sampler", true);
		json_bool(&j, "now", true);
		json_u64(&j, "mean", r->mean);
		json_u64(&j, "stack_bytes", r->stack_bytes);
		json_bool(&j, "loaded", r->loaded);
		json_bool(&j, "stacks", r->stacks);
		json_bool(&j, "cxx", r->cxx);
		json_u64(&j, "slots", r->swapped + r->known);
		json_u64(&j, "slots_swapped", r->swapped);
		json_u64(&j, "slots_left", r->other + r->readonly);
		json_u64(&j, "objects", r->objects);
		if (r->linked) {
			json_string(&j, "linked_allocator", r->linked);
			json_u64(&j, "entries", r->entries);
			json_u64(&j, "entries_written", r->entries_written);
			if (!r->entries)
				json_string(&j, "unsampled_allocator",
					    r->linked);
			if (r->unpatched[0])
				json_string(&j, "unpatched", r->unpatched);
		}
		json_object_end(&j);
		json_finish(&j);
		return;
	}
	printf("pid %d: sampler on, one sample every %" PRIu64
	       " bytes on average; %u GOT slot%s in %u object%s",
	       (int)t->pi.pid, r->mean, r->swapped + r->known,
	       plural(r->swapped + r->known), r->objects, plural(r->objects));
	if (r->entries)
		printf(", %u entry point%s of %s in the program", r->entries,
		       plural(r->entries), r->linked);
	printf("%s\n", r->loaded ? " (loaded now)" : "");
}

int sampler_switch_on(const struct options *opt, struct target *t,
		      uint64_t mean, uint64_t stack_bytes, uint64_t lease,
		      struct sampler_start *res)
{
	struct sampler_start r = { .mean = mean, .rss = t->pi.rss_bytes,
				   .stack_bytes = stack_bytes,
				   .lease = lease };
	/* every symbol and GOT slot looked up before the thread stops */
	struct sampler_prep *p = sampler_prepare(t->pi.pid, t->os, t->maps,
						 &t->det);
	int ret;

	if (!p) {
		error("prof %d: out of memory", (int)t->pi.pid);
		return diag_exit(DIAG_FAILED);
	}
	ret = target_attach(opt, "prof", t);
	if (!ret)
		ret = given_back(opt, t, sampler_start(t->s, t->maps,
						       &t->sampler, p, &r));
	sampler_prep_free(p);
	if (ret)
		return ret;
	if (!r.swapped && !r.known && !r.entries) {
		if (r.linked)
			error("prof %d: no GOT slot reaches malloc, and the "
			      "entry points of the %s linked into the program "
			      "are not patched (%s): nothing to sample",
			      (int)t->pi.pid, r.linked,
			      r.unpatched[0] ? r.unpatched : "?");
		else
			error("prof %d: no GOT slot reaches malloc: nothing to "
			      "sample (%u bound elsewhere)", (int)t->pi.pid,
			      r.other);
		return diag_exit(DIAG_UNSUPPORTED);
	}
	if (res)
		*res = r;
	if (r.mean < SAMPLE_BYTES_LOW)
		warning(opt, "pid %d: one sample every %" PRIu64 " byte%s: "
			"nearly every allocation is sampled and copies its "
			"stack, which slows the program down, and the table "
			"fills (samples past it are dropped, and counted); "
			"the default is 512K", (int)t->pi.pid, r.mean,
			plural((unsigned int)r.mean));
	if (stack_bytes && stack_bytes != r.stack_bytes)
		warning(opt, "pid %d: the sampler's table, made by an earlier "
			"prof on, keeps its %" PRIu64 " KiB of stack per "
			"sample; it lasts as long as the process",
			(int)t->pi.pid, r.stack_bytes >> 10);
	if (!r.stacks)
		warning(opt, "pid %d: its seccomp filter forbids "
			"process_vm_readv: samples carry their caller only, "
			"no stack", (int)t->pi.pid);
	if (r.linked && !r.entries)
		warning(opt, "pid %d: %s is linked into the program itself "
			"and its entry points are not patched (%s): the "
			"program's own calls to it are not sampled (calls "
			"from shared libraries are)", (int)t->pi.pid,
			r.linked, r.unpatched[0] ? r.unpatched : "?");
	else if (r.linked && r.unpatched[0])
		warning(opt, "pid %d: not patched in %s, so not sampled "
			"where the program calls them: %s", (int)t->pi.pid,
			r.linked, r.unpatched);
	if (r.readonly)
		warning(opt, "pid %d: %u read-only GOT slot%s left alone: "
			"its seccomp filter forbids mprotect", (int)t->pi.pid,
			r.readonly, plural(r.readonly));
	return EXIT_OK;
}

int sampler_cmd_on(const struct options *opt, struct target *t, uint64_t mean,
		   uint64_t stack_bytes)
{
	struct sampler_start r;
	int ret = sampler_switch_on(opt, t, mean, stack_bytes, 0, &r);

	if (!ret)
		print_on(opt, t, &r);
	return ret;
}

int sampler_switch_off(const struct options *opt, struct target *t,
		       unsigned int *slots, unsigned int *entries)
{
	int ret = target_attach(opt, "prof", t);

	*slots = *entries = 0;
	if (ret)
		return ret;
	return given_back(opt, t, sampler_stop(t->s, &t->sampler, slots,
					       entries));
}

int sampler_cmd_off(const struct options *opt, struct target *t)
{
	struct {
		unsigned int slots, entries;
	} x;
	int ret = sampler_switch_off(opt, t, &x.slots, &x.entries);

	if (ret)
		return ret;
	if (opt->json) {
		struct json j;

		target_json_begin(t, &j);
		json_string(&j, "action", "sampling");
		json_bool(&j, "sampler", true);
		json_bool(&j, "now", false);
		json_u64(&j, "slots_restored", x.slots);
		json_u64(&j, "entries_restored", x.entries);
		json_object_end(&j);
		json_finish(&j);
	} else {
		printf("pid %d: sampler off; %u GOT slot%s restored",
		       (int)t->pi.pid, x.slots, plural(x.slots));
		if (x.entries)
			printf(", %u entry point%s", x.entries,
			       plural(x.entries));
		printf("\n");
	}
	return EXIT_OK;
}

int sampler_cmd_dump(const struct options *opt, struct target *t,
		     struct sampler_dump *d, int *memfd)
{
	uint64_t read;
	FILE *f;
	int fd, rc;

	fd = memfd_create("memsnap-sampler", MFD_CLOEXEC);
	if (fd < 0)
		return fail_errno(DIAG_FAILED, errno, "dump %d: memfd_create", (int)t->pi.pid);
	f = fdopen(dup(fd), "w");
	if (!f) {
		error_errno(errno, "dump %d", (int)t->pi.pid);
		close(fd);
		return diag_exit(DIAG_FAILED);
	}
	progress_set("reading the sampler's records in pid %d",
		     (int)t->pi.pid);
	rc = sampler_dump(t->pi.pid, t->maps, &t->sampler, f, opt->max_size,
			  d);
	progress_clear();
	if (fclose(f) && !rc)
		rc = -EIO;
	/* read by its pid: the records are the process's if it is still
	 * there */
	if (!rc && proc_pin_check(&t->pin))
		rc = -ESRCH;
	if (rc) {
		close(fd);
		if (rc == -ESRCH || rc == -ENOENT)
			return report_proc_error(t->pi.pid, "mem", -ESRCH);
		if (rc == -EFBIG) {
			dump_size_error(t->pi.pid, opt->max_size);
			return diag_exit(DIAG_FAILED);
		}
		error("dump %d: reading the sampler: %s", (int)t->pi.pid,
		      rc == -EPROTO ? "its control block or table is not "
				      "one this memsnap made"
				    : strerror(-rc));
		return diag_exit(rc == -EPERM || rc == -EACCES ? DIAG_PERMISSION
							       : DIAG_FAILED);
	}
	/* the records read: live, and freed ones of the reservoir */
	read = d->live + d->freed_kept[0] + d->freed_kept[1];
	if (d->spent)
		warning(opt, "pid %d: the dump's budget of %s was spent: %"
			PRIu64 " of %" PRIu64 " samples keep only their "
			"caller (a real table stays far below it: prof off, "
			"then prof on --sampler with a larger --sample-bytes; "
			"or the table was written over)", (int)t->pi.pid,
			d->spent, d->cut, read);
	if (d->lost)
		warning(opt, "pid %d: %" PRIu64 " sample%s kept only their "
			"caller: %s", (int)t->pi.pid, d->lost,
			plural(d->lost), d->why);
	if (d->truncated && !d->spent)	/* else the line above says it */
		warning(opt, "pid %d: %" PRIu64 " of %" PRIu64 " live "
			"sampled stacks stop short of their thread's start "
			"(the sampler keeps %" PRIu64 " KiB of each, or the "
			"unwinder stopped): their outermost frame is "
			"[truncated]", (int)t->pi.pid, d->truncated, d->live,
			d->st.stack_bytes >> 10);
	*memfd = fd;
	return EXIT_OK;
}

/* @t (CLOCK_REALTIME seconds) as local time, "2026-12-07 07:55:01". */
static const char *clock_text(uint64_t t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm) ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, size, "%" PRIu64, t);
	return buf;
}

/* Since when the sampler is on, and its lease: a watch's that still
 * holds, or one that lapsed (its watch gone: no sample taken since). */
static void lease_text(FILE *f, const struct sampler_status *st, uint64_t now)
{
	char a[32], b[32];

	if (!st->active || !st->since)
		return;
	timeline_duration(now > st->since ? (double)(now - st->since) : 0, 0,
			  b, sizeof(b));
	fprintf(f, "          on since %s (%s ago)",
		clock_text(st->since, a, sizeof(a)), b);
	if (!st->lease_until)
		fputs(", no lease: on until prof off\n", f);
	else if (now <= st->lease_until)
		fprintf(f, ", leased by a watch until %s\n",
			clock_text(st->lease_until, a, sizeof(a)));
	else
		fprintf(f, "; its watch's lease lapsed at %s: no sample taken "
			"since%s; memsnap --pid PID prof off takes its hooks "
			"out\n", clock_text(st->lease_until, a, sizeof(a)),
			st->lapsed_at ? "" : " (none asked for yet)");
}

void sampler_info_text(FILE *f, const struct sampler_status *st)
{
	fprintf(f, "sampler   %s, one sample every %" PRIu64
		" bytes on average, %" PRIu64 " live sample%s of %" PRIu64
		" taken since prof on (%" PRIu64 " freed, %" PRIu64
		" dropped), %" PRIu64 " GOT slot%s",
		st->active ? "on" : "off", st->mean,
		st->samples - st->freed, plural(st->samples - st->freed),
		st->samples, st->freed, st->dropped, st->slots,
		plural(st->slots));
	if (st->entries)
		fprintf(f, ", %u entry point%s", st->entries,
			plural(st->entries));
	if (!st->stacks)
		fputs(", no stacks", f);
	else if (st->stack_bytes)
		fprintf(f, ", %" PRIu64 " KiB of stack each (%" PRIu64
			" copied in place)", st->stack_bytes >> 10,
			st->plain);
	if (st->resident)
		fprintf(f, "; %" PRIu64 " KiB resident in the process",
			(st->resident + 1023) >> 10);
	fputc('\n', f);
	lease_text(f, st, (uint64_t)time(NULL));
}

void sampler_info_json(struct json *j, const struct sampler_status *st)
{
	json_object_begin(j, "sampler");
	json_bool(j, "active", st->active);
	json_u64(j, "mean", st->mean);
	json_u64(j, "live", st->samples - st->freed);
	json_u64(j, "samples", st->samples);
	json_u64(j, "dropped", st->dropped);
	json_u64(j, "slots", st->slots);
	json_u64(j, "slots_dlopened", st->dlopened);
	json_u64(j, "entries", st->entries);
	json_bool(j, "stacks", st->stacks);
	json_u64(j, "stack_bytes", st->stack_bytes);
	json_u64(j, "stacks_in_place", st->plain);
	json_u64(j, "resident_bytes", st->resident);
	/* seconds since the epoch; 0: not known, no lease, not lapsed */
	json_u64(j, "since", st->since);
	json_u64(j, "lease_until", st->lease_until);
	json_bool(j, "lease_lapsed", st->lease_until &&
				     (uint64_t)time(NULL) > st->lease_until);
	json_u64(j, "lapsed_at", st->lapsed_at);
	json_object_end(j);
}
