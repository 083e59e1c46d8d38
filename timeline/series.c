/*
 * A watch's series file, written and read back (timeline/series.h).
 */
#include "timeline/series.h"

#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "# memsnap watch series 1"

static const char *const col_names[SERIES_COLS] = {
	[COL_RSS] = "rss",
	[COL_HEAP_IN_USE] = "heap_in_use",
	[COL_HEAP_FREE] = "heap_free",
	[COL_METADATA] = "metadata",
	[COL_HEAP] = "heap",
	[COL_RUNTIME] = "runtime",
	[COL_STACKS] = "thread_stacks",
	[COL_ANON_OTHER] = "anon_other",
	[COL_SAMPLER] = "memsnap_sampler",
	[COL_FILE] = "file",
	[COL_SHMEM] = "shmem",
	[COL_UNACCOUNTED] = "unaccounted",
	[COL_SWAP] = "swap",
	[COL_THREADS] = "threads",
};

const char *series_col_name(enum series_col c)
{
	return (size_t)c < SERIES_COLS ? col_names[c] : "?";
}

/* The command name as one field: no tab, no control character. */
static void clean_field(const char *in, char *out, size_t size)
{
	size_t i;

	for (i = 0; in[i] && i + 1 < size; i++)
		out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f
				 ? '?' : in[i];
	out[i] = '\0';
}

void series_write_header(FILE *f, const struct series *s)
{
	char command[sizeof(s->command)], allocator[sizeof(s->allocator)];
	size_t c;

	clean_field(s->command, command, sizeof(command));
	clean_field(s->allocator, allocator, sizeof(allocator));
	fprintf(f, "%s\n# pid\t%d\n# command\t%s\n# started\t%" PRIu64
		"\n# interval_ms\t%" PRIu64 "\n", MAGIC, s->pid, command,
		s->started_ms, s->interval_ms);
	if (s->limit)
		fprintf(f, "# limit\t%" PRIu64 "\n", s->limit);
	else
		fprintf(f, "# limit\tnone\n");
	fprintf(f, "# allocator\t%s\n", allocator[0] ? allocator : "-");
	if (s->sampler_on || s->sampler_found)
		fprintf(f, "# sampler\t%s\n", s->sampler_on ? "on" : "found");
	fprintf(f, "t_ms");
	for (c = 0; c < SERIES_COLS; c++)
		fprintf(f, "\t%s", col_names[c]);
	fprintf(f, "\tdump\n");
}

size_t series_format_tick(const struct series_tick *t, char *buf,
			  size_t size)
{
	size_t len, c;
	int n;

	n = snprintf(buf, size, "%" PRIu64, t->t_ms);
	if (n < 0 || (size_t)n >= size)
		return 0;
	len = (size_t)n;
	for (c = 0; c < SERIES_COLS; c++) {
		if (t->known & (1u << c))
			n = snprintf(buf + len, size - len, "\t%" PRId64,
				     t->v[c]);
		else
			n = snprintf(buf + len, size - len, "\t-");
		if (n < 0 || (size_t)n >= size - len)
			return 0;
		len += (size_t)n;
	}
	n = snprintf(buf + len, size - len, "\t%s\n",
		     t->dump[0] ? t->dump : "-");
	if (n < 0 || (size_t)n >= size - len)
		return 0;
	return len + (size_t)n;
}

bool series_dump_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (n < 6 || n >= SERIES_NAME_MAX || strncmp(name, "dump-", 5) ||
	    !str_ends_with(name, ".heap"))
		return false;
	for (i = 0; i < n; i++)
		if (!(name[i] >= '0' && name[i] <= '9') &&
		    !(name[i] >= 'a' && name[i] <= 'z') && name[i] != '-' &&
		    name[i] != '.')
			return false;
	return true;
}

/* A signed decimal field, all of it. */
static bool parse_i64(const char *s, int64_t *out)
{
	uint64_t u;
	bool neg = *s == '-';

	if (parse_u64(s + neg, 10, &u) || u > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? -(int64_t)u : (int64_t)u;
	return true;
}

/* Split @line at tabs into at most @max fields (the line is changed):
 * how many. */
static size_t split(char *line, char **f, size_t max)
{
	size_t n = 0;

	while (n < max) {
		f[n++] = line;
		line = strchr(line, '\t');
		if (!line)
			break;
		*line++ = '\0';
	}
	return line ? max + 1 : n;
}

static void header_line(struct series *s, char *line)
{
	char *f[4];
	size_t n = split(line, f, 3);
	uint64_t u;

	if (n < 2)
		return;
	if (!strcmp(f[0], "# note") && n == 3) {
		s->notes++;
		clean_field(f[2], s->last_note, sizeof(s->last_note));
		return;
	}
	if (!strcmp(f[0], "# end") && n == 3 && !parse_u64(f[1], 10, &u)) {
		s->end_ms = u;
		clean_field(f[2], s->end, sizeof(s->end));
		return;
	}
	if (n != 2)
		return;
	if (!strcmp(f[0], "# pid") && !parse_u64(f[1], 10, &u) &&
	    u <= INT32_MAX)
		s->pid = (int)u;
	else if (!strcmp(f[0], "# command"))
		clean_field(f[1], s->command, sizeof(s->command));
	else if (!strcmp(f[0], "# allocator"))
		clean_field(f[1], s->allocator, sizeof(s->allocator));
	else if (!strcmp(f[0], "# started") && !parse_u64(f[1], 10, &u))
		s->started_ms = u;
	else if (!strcmp(f[0], "# interval_ms") && !parse_u64(f[1], 10, &u))
		s->interval_ms = u;
	else if (!strcmp(f[0], "# limit") && !parse_u64(f[1], 10, &u))
		s->limit = u;
	else if (!strcmp(f[0], "# sampler") && !strcmp(f[1], "on"))
		s->sampler_on = true;
	else if (!strcmp(f[0], "# sampler") && !strcmp(f[1], "off"))
		s->sampler_off = true;
	else if (!strcmp(f[0], "# sampler") && !strcmp(f[1], "found"))
		s->sampler_found = true;
}

#define FIELDS_MAX (SERIES_COLS + 8)

/*
 * "t_ms\trss\t...\tdump": the column of each field between, by name
 * (one not known is skipped when read; one named twice, or a line with
 * no dump at its end, leaves the line as this memsnap writes it).
 */
static void columns_line(struct series *s, char *line)
{
	char *f[FIELDS_MAX + 3];
	uint32_t seen = 0;
	size_t n = split(line, f, FIELDS_MAX + 2), i, c;

	if (n < 3 || n > FIELDS_MAX + 2 || strcmp(f[n - 1], "dump"))
		return;
	for (i = 1; i + 1 < n; i++) {
		s->field_col[i - 1] = -1;
		for (c = 0; c < SERIES_COLS; c++)
			if (!strcmp(f[i], col_names[c]))
				break;
		if (c == SERIES_COLS)
			continue;
		if (seen & (1u << c))
			return;
		seen |= 1u << c;
		s->field_col[i - 1] = (signed char)c;
	}
	s->nfields = n - 2;
}

/* A tick's line: true when it is one, in order after the last. */
static bool tick_line(struct series *s, char *line, struct series_tick *t)
{
	char *f[FIELDS_MAX + 3];
	size_t fields = s->nfields ? s->nfields : SERIES_COLS;
	size_t n = split(line, f, fields + 2), i;
	uint64_t u;

	if (n != fields + 2 || parse_u64(f[0], 10, &u))
		return false;
	memset(t, 0, sizeof(*t));
	t->t_ms = u;
	if (s->n && t->t_ms <= s->v[s->n - 1].t_ms)
		return false;
	for (i = 0; i < fields; i++) {
		int c = s->nfields ? s->field_col[i] : (int)i;
		int64_t v;

		if (!strcmp(f[i + 1], "-"))
			continue;
		if (!parse_i64(f[i + 1], &v) ||
		    (v < 0 && c != COL_UNACCOUNTED))
			return false;
		if (c < 0)
			continue;
		t->v[c] = v;
		t->known |= 1u << c;
	}
	if (strcmp(f[fields + 1], "-")) {
		if (!series_dump_name_ok(f[fields + 1]))
			return false;
		snprintf(t->dump, sizeof(t->dump), "%s", f[fields + 1]);
	}
	return true;
}

int series_parse(const char *buf, size_t len, struct series *s, char *why,
		 size_t why_size)
{
	char line[SERIES_LINE_MAX + 1];
	size_t off = 0, lineno = 0;

	memset(s, 0, sizeof(*s));
	why[0] = '\0';
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t n;
		struct series_tick t;

		if (!nl)
			break;		/* cut short by a kill: left out */
		n = (size_t)(nl - (buf + off));
		lineno++;
		if (n > SERIES_LINE_MAX || memchr(buf + off, '\0', n)) {
			if (lineno == 1)
				break;
			s->bad++;
			off += n + 1;
			continue;
		}
		memcpy(line, buf + off, n);
		line[n] = '\0';
		off += n + 1;
		if (lineno == 1) {
			if (strcmp(line, MAGIC))
				break;
			s->version = 1;
		} else if (line[0] == '#') {
			header_line(s, line);
		} else if (!strncmp(line, "t_ms\t", 5)) {
			columns_line(s, line);
		} else if (s->n >= SERIES_MAX_TICKS || !tick_line(s, line, &t)) {
			s->bad++;
		} else {
			if (array_grow((void **)&s->v, &s->cap, s->n + 1,
				       sizeof(*s->v))) {
				series_free(s);
				return -ENOMEM;
			}
			s->v[s->n++] = t;
			s->dumps += t.dump[0] != '\0';
		}
	}
	if (!s->version) {
		snprintf(why, why_size, "its first line is not '%s'", MAGIC);
		series_free(s);
		return -EINVAL;
	}
	return 0;
}

void series_free(struct series *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}
