/*
 * memsnap --pid N stats [--json|--raw]: the allocator's statistics,
 * collected through one borrowed thread.  By default a summary (the
 * tables of allocators/allocator.h), --raw the allocator's own report
 * as it printed it, --json the tables (and the allocator's own JSON
 * report, where it has one, as "native").
 */
#include "cli/cli.h"

#include "allocators/allocator.h"
#include "agent/dumpdir.h"
#include "cli/session.h"
#include "common/json.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int parse_args(int argc, char **argv, bool *json, bool *raw)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			*json = true;
		} else if (!strcmp(argv[i], "--raw")) {
			*raw = true;
		} else {
			return fail(DIAG_USAGE, "stats: %s '%s' (see memsnap --help)",
				    argv[i][0] == '-' ? "unknown option"
				    : "unexpected argument",
				    argv[i]);
		}
	}
	if (*json && *raw)
		return fail(DIAG_USAGE, "stats: give --json or --raw, not both");
	return EXIT_OK;
}

/*
 * The allocator's report as it is, except that on a terminal control
 * characters (the target's bytes: escape sequences) are shown as '?'.
 */
static void print_raw(const struct alloc_stats *st)
{
	bool tty = isatty(STDOUT_FILENO);
	size_t i;

	if (!tty) {
		fwrite(st->raw, 1, st->raw_len, stdout);
		return;
	}
	for (i = 0; i < st->raw_len; i++) {
		unsigned char c = (unsigned char)st->raw[i];

		putchar(c < 0x20 && c != '\n' && c != '\t' ? '?'
			: c == 0x7f			    ? '?'
							    : c);
	}
}

static void cell(const struct alloc_stat_table *t,
		 const struct alloc_stat_row *r, size_t c, char *buf,
		 size_t size)
{
	if (!r->have[c])
		snprintf(buf, size, "-");
	else if (t->bytes[c])
		human_bytes(r->v[c], buf, size);
	else
		snprintf(buf, size, "%" PRIu64, r->v[c]);
}

/* A one-row table as "name  value" lines, a bigger one as columns. */
static void print_table(const struct alloc_stat_table *t)
{
	char buf[32];
	int namew = 4, w[ALLOC_STAT_MAX_COLS];
	size_t r, c;

	printf("%s\n", t->name);
	if (t->nrows == 1) {
		for (c = 0; c < t->ncols; c++)
			if ((int)strlen(t->cols[c]) > namew)
				namew = (int)strlen(t->cols[c]);
		for (c = 0; c < t->ncols; c++) {
			if (!t->rows[0].have[c])
				continue;
			cell(t, &t->rows[0], c, buf, sizeof(buf));
			if (t->bytes[c])
				printf("  %-*s  %10s  (%" PRIu64 ")\n", namew,
				       t->cols[c], buf, t->rows[0].v[c]);
			else
				printf("  %-*s  %10s\n", namew, t->cols[c],
				       buf);
		}
		return;
	}
	for (r = 0; r < t->nrows; r++)
		if ((int)strlen(t->rows[r].name) > namew)
			namew = (int)strlen(t->rows[r].name);
	for (c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->cols[c]);
		for (r = 0; r < t->nrows; r++) {
			cell(t, &t->rows[r], c, buf, sizeof(buf));
			if ((int)strlen(buf) > w[c])
				w[c] = (int)strlen(buf);
		}
	}
	printf("  %-*s", namew, "");
	for (c = 0; c < t->ncols; c++)
		printf("  %*s", w[c], t->cols[c]);
	putchar('\n');
	for (r = 0; r < t->nrows; r++) {
		printf("  %-*s", namew, t->rows[r].name);
		for (c = 0; c < t->ncols; c++) {
			cell(t, &t->rows[r], c, buf, sizeof(buf));
			printf("  %*s", w[c], buf);
		}
		putchar('\n');
	}
}

static void print_json(const struct target *t, const struct alloc_stats *st)
{
	struct json j;
	size_t i, r, c;

	target_json_begin(t, &j);
	json_string(&j, "source", st->source);
	json_object_begin(&j, "tables");
	for (i = 0; i < st->nt; i++) {
		const struct alloc_stat_table *tb = &st->t[i];

		json_array_begin(&j, tb->name);
		for (r = 0; r < tb->nrows; r++) {
			json_object_begin(&j, NULL);
			json_string(&j, "name", tb->rows[r].name);
			for (c = 0; c < tb->ncols; c++)
				if (tb->rows[r].have[c])
					json_u64(&j, tb->cols[c],
						 tb->rows[r].v[c]);
			json_object_end(&j);
		}
		json_array_end(&j);
	}
	json_object_end(&j);
	if (st->raw && st->raw_format && !strcmp(st->raw_format, "json")) {
		/* The target's text: passed on only when well-formed. */
		if (json_valid(st->raw, st->raw_len))
			json_raw(&j, "native", st->raw, st->raw_len);
		else
			json_null(&j, "native");
	}
	json_object_end(&j);
	json_finish(&j);
}

int cmd_stats(const struct options *opt, int argc, char **argv)
{
	bool json = opt->json, raw = false;
	struct alloc_stats st = { 0 };
	struct dumpdir *d = NULL;
	struct target t;
	size_t i;
	int ret, rc;

	ret = parse_args(argc, argv, &json, &raw);
	if (ret)
		return ret;
	ret = target_load(opt, "stats", ALLOC_CAN_STATS, &t);
	if (ret)
		goto out;
	/* What the allocator prints goes to a memfd of the target's, or,
	 * where it cannot, to a file in a private directory of the
	 * target's view: its agent is started only then. */
	ret = target_dumpdir(&t, "stats", DUMPDIR_DEFERRED, &d);
	if (ret)
		goto out;
	ret = target_attach(opt, "stats", &t);
	if (ret)
		goto out;
	rc = alloc_stats(t.s, t.a, d,
			 raw ? ALLOC_STATS_RAW
			 : json ? ALLOC_STATS_JSON
				: ALLOC_STATS_TABLES,
			 &st);
	if (rc)
		ret = target_error(&t, "stats",
				   target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, "stats", &t);
	if (!ret)
		ret = rc;
	if (!ret && target_interrupted())
		ret = target_error(&t, "stats", -EINTR);
	if (ret)
		goto out;
	if (st.truncated)
		warning(opt, "stats %d: the allocator's report was cut at %zu bytes",
			(int)t.pi.pid, st.raw_len);
	if (raw) {
		print_raw(&st);
	} else if (json) {
		print_json(&t, &st);
	} else {
		printf("pid %d: %s statistics (%s, through tid %d)\n",
		       (int)t.pi.pid, alloc_kind_title(t.a->kind), st.source,
		       (int)t.tid);
		for (i = 0; i < st.nt; i++) {
			putchar('\n');
			print_table(&st.t[i]);
		}
	}
out:
	alloc_stats_free(&st);
	if (d && (rc = dumpdir_remove(d)) && !ret) {
		ret = fail_errno(DIAG_FAILED, rc, "stats %d: removing the temporary directory",
				 (int)t.pi.pid);
	}
	target_free(&t);
	return ret;
}
