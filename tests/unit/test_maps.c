/*
 * proc/maps: /proc/PID/maps lines as the kernel writes them (committed
 * snippets under tests/data/maps/, captured from live processes), odd and
 * hostile lines, huge inputs, and a live process with >60000 mappings.
 *
 * Every expectation is computed here independently (sscanf over the same
 * text, or the numbers the fixture reports), never copied from memsnap.
 */
#include "proc/maps.h"
#include "tests/lib/fixture.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fixture many_fx = { .pid = -1 };

static void stop_fixtures(void)
{
	fixture_stop(&many_fx);
}

/* ---- helpers ------------------------------------------------------------ */

static int parse(const char *line, struct map_entry *e, char *path,
		 size_t size)
{
	const char *p;
	size_t plen;
	int rc = maps_parse_line(line, strlen(line), e, &p, &plen);

	path[0] = '\0';
	if (!rc && plen)
		snprintf(path, size, "%.*s", (int)plen, p);
	return rc;
}

static char *read_data(const char *name, size_t *len)
{
	const char *dir = getenv("MEMSNAP_TESTDATA");
	char path[4096];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/maps/%s", dir ? dir : "tests/data",
		 name);
	f = fopen(path, "re");
	cr_assert_not_null(f, "cannot open %s: %s", path, strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert_gt(n, 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* An independent reading of one kernel maps line. */
struct ref_line {
	uint64_t start, end, offset, inode;
	unsigned int major, minor;
	char perms[5];
	char path[4096];
	bool deleted;
};

static bool ref_parse(const char *line, struct ref_line *r)
{
	int pos = 0;
	size_t len;
	char *p;

	memset(r, 0, sizeof(*r));
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 "%n",
		   &r->start, &r->end, r->perms, &r->offset, &r->major,
		   &r->minor, &r->inode, &pos) != 7)
		return false;
	p = (char *)line + pos;
	while (*p == ' ')
		p++;
	snprintf(r->path, sizeof(r->path), "%s", p);
	len = strcspn(r->path, "\n");
	r->path[len] = '\0';
	if (len > 10 && !strcmp(r->path + len - 10, " (deleted)")) {
		r->path[len - 10] = '\0';
		r->deleted = true;
	}
	return true;
}

static void check_against_ref(const char *buf)
{
	struct maps *m;
	const char *line = buf;
	size_t i = 0, lines = 0;

	cr_assert_eq(maps_parse_buf(buf, strlen(buf), &m), 0);
	cr_assert_eq(m->malformed, 0);
	while (*line) {
		const char *nl = strchr(line, '\n');
		struct ref_line r;
		const struct map_entry *e;
		char one[8192];

		snprintf(one, sizeof(one), "%.*s",
			 (int)(nl ? (size_t)(nl - line) : strlen(line)), line);
		cr_assert(ref_parse(one, &r), "reference parse failed: %s",
			  one);
		lines++;
		e = maps_find(m, r.start);
		cr_assert_not_null(e, "no entry for %s", one);
		cr_assert_eq(e->start, r.start);
		cr_assert_eq(e->end, r.end);
		cr_assert_eq(e->offset, r.offset);
		cr_assert_eq(e->inode, r.inode);
		cr_assert_eq(e->dev_major, r.major);
		cr_assert_eq(e->dev_minor, r.minor);
		cr_assert_eq(!!(e->prot & MAP_PROT_READ), r.perms[0] == 'r');
		cr_assert_eq(!!(e->prot & MAP_PROT_WRITE), r.perms[1] == 'w');
		cr_assert_eq(!!(e->prot & MAP_PROT_EXEC), r.perms[2] == 'x');
		cr_assert_eq(e->shared, r.perms[3] == 's');
		cr_assert_eq(e->deleted, r.deleted, "%s", one);
		if (r.path[0])
			cr_assert_str_eq(e->path, r.path);
		else
			cr_assert_null(e->path, "%s", one);
		cr_assert_eq(map_is_pseudo(e), r.path[0] == '[');
		line = nl ? nl + 1 : line + strlen(line);
		i++;
	}
	cr_assert_eq(m->n, lines);
	for (i = 1; i < m->n; i++)
		cr_assert_lt(m->v[i - 1].start, m->v[i].start);
	maps_free(m);
}

/* ---- single lines ------------------------------------------------------- */

Test(maps, file_line)
{
	struct map_entry e;
	char path[256];

	cr_assert_eq(parse("7f1c2a428000-7f1c2a59d000 r-xp 00028000 fd:00 1835123                   /usr/lib/x86_64-linux-gnu/libc.so.6\n",
			   &e, path, sizeof(path)), 0);
	cr_assert_eq(e.start, 0x7f1c2a428000ull);
	cr_assert_eq(e.end, 0x7f1c2a59d000ull);
	cr_assert_eq(e.offset, 0x28000);
	cr_assert_eq(e.dev_major, 0xfd);
	cr_assert_eq(e.dev_minor, 0);
	cr_assert_eq(e.inode, 1835123);
	cr_assert_eq(e.prot, MAP_PROT_READ | MAP_PROT_EXEC);
	cr_assert_not(e.shared);
	cr_assert_not(e.deleted);
	cr_assert_str_eq(path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

Test(maps, anonymous_and_pseudo)
{
	struct map_entry e;
	char path[256];

	cr_assert_eq(parse("7f1c29e00000-7f1c2a000000 rw-p 00000000 00:00 0 ",
			   &e, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "");
	cr_assert_eq(e.prot, MAP_PROT_READ | MAP_PROT_WRITE);
	cr_assert_eq(parse("7f1c29e00000-7f1c2a000000 rw-p 00000000 00:00 0",
			   &e, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "");
	cr_assert_eq(parse("7ffd4c1f0000-7ffd4c1f2000 r-xp 00000000 00:00 0                          [vdso]",
			   &e, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "[vdso]");
	cr_assert_eq(parse("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			   &e, path, sizeof(path)), 0);
	cr_assert_eq(e.prot, MAP_PROT_EXEC);
	cr_assert_eq(e.end, 0xffffffffff601000ull);
	cr_assert_eq(parse("7f0000000000-7f0000001000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)",
			   &e, path, sizeof(path)), 0);
	cr_assert(e.shared);
	cr_assert(e.deleted);
	cr_assert_str_eq(path, "/dev/zero");
}

Test(maps, deleted_suffix_only_at_the_end)
{
	struct map_entry e;
	char path[256];

	cr_assert_eq(parse("7f941e1e0000-7f941e1e1000 r--p 00000000 fe:00 10953260                   /tmp/x (deleted) y.so (deleted)",
			   &e, path, sizeof(path)), 0);
	cr_assert(e.deleted);
	cr_assert_str_eq(path, "/tmp/x (deleted) y.so");

	cr_assert_eq(parse("7f941e1e0000-7f941e1e1000 r--p 00000000 fe:00 10953260                   /tmp/x (deleted) y.so",
			   &e, path, sizeof(path)), 0);
	cr_assert_not(e.deleted);
	cr_assert_str_eq(path, "/tmp/x (deleted) y.so");

	/* A file literally named "(deleted)": the suffix needs its space. */
	cr_assert_eq(parse("7f941e1e0000-7f941e1e1000 r--p 00000000 fe:00 1 /tmp/(deleted)",
			   &e, path, sizeof(path)), 0);
	cr_assert_not(e.deleted);
	cr_assert_str_eq(path, "/tmp/(deleted)");
}

Test(maps, spaces_in_path_kept)
{
	struct map_entry e;
	char path[256];

	cr_assert_eq(parse("7fefb069a000-7fefb069b000 r--p 00000000 fe:00 10953259                   /tmp/dir with spaces/lib two  spaces.so\r\n",
			   &e, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "/tmp/dir with spaces/lib two  spaces.so");
	cr_assert_eq(e.inode, 10953259);
}

Test(maps, length_bounds_the_line)
{
	/* Not NUL-terminated at @len: the parser must stop there. */
	static const char text[] =
		"400000-401000 r-xp 00000000 08:01 77 /bin/trueXXXXXXXX";
	struct map_entry e;
	const char *p;
	size_t plen;

	cr_assert_eq(maps_parse_line(text, strlen(text) - 8, &e, &p, &plen),
		     0);
	cr_assert_eq(plen, strlen("/bin/true"));
	cr_assert_eq(memcmp(p, "/bin/true", plen), 0);
	/* Cut inside the inode: still a valid anonymous-looking line? No
	 * path, and the inode is what was there. */
	cr_assert_eq(maps_parse_line(text, 35, &e, &p, &plen), 0);
	cr_assert_eq(e.inode, 7);
	cr_assert_eq(plen, 0);
	/* Cut inside the device: not a line. */
	cr_assert_eq(maps_parse_line(text, 30, &e, &p, &plen), -EINVAL);
}

Test(maps, malformed_lines_rejected)
{
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"7f00-7f10",
		"zz00-7f10 r-xp 00000000 08:01 1 /x",
		"7f10-7f00 r-xp 00000000 08:01 1 /x",	/* end < start */
		"7f00-7f00 r-xp 00000000 08:01 1 /x",	/* empty */
		"7f00-7f10 rwxq 00000000 08:01 1 /x",	/* bad sharing */
		"7f00-7f10 Rwxp 00000000 08:01 1 /x",
		"7f00-7f10 r-x 00000000 08:01 1 /x",
		"7f00-7f10 r-xp 00000000 0801 1 /x",	/* no colon */
		"7f00-7f10 r-xp 00000000 08:01 /x",	/* no inode */
		"7f00-7f10 r-xp 00000000 08:01 12ab /x", /* inode not decimal */
		"7f00-7f10 r-xp 0000zz00 08:01 1 /x",
		"7f00 7f10 r-xp 00000000 08:01 1 /x",
		/* 17 hex digits: does not fit in 64 bits. */
		"10000000000000000-10000000000000001 r-xp 00000000 08:01 1 /x",
		"7f00-7f10 r-xp 100000000000000000 08:01 1 /x",
		/* Inode beyond UINT64_MAX. */
		"7f00-7f10 r-xp 00000000 08:01 18446744073709551616 /x",
		/* Device numbers beyond 32 bits. */
		"7f00-7f10 r-xp 00000000 123456789:01 1 /x",
		"7f00-7f10 r-xp 00000000 08:123456789 1 /x",
		"-7f10 r-xp 00000000 08:01 1 /x",
		" 7f00-7f10 r-xp 00000000 08:01 1 /x",
	};
	struct map_entry e;
	char path[64];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(parse(bad[i], &e, path, sizeof(path)), -EINVAL,
			     "accepted: \"%s\"", bad[i]);
}

Test(maps, extremes_accepted)
{
	struct map_entry e;
	char path[64];

	cr_assert_eq(parse("fffffffffffff000-ffffffffffffffff r--p ffffffffffffffff ffffffff:ffffffff 18446744073709551615 /x",
			   &e, path, sizeof(path)), 0);
	cr_assert_eq(e.end, UINT64_MAX);
	cr_assert_eq(e.offset, UINT64_MAX);
	cr_assert_eq(e.inode, UINT64_MAX);
	cr_assert_eq(e.dev_major, UINT32_MAX);
	cr_assert_eq(e.dev_minor, UINT32_MAX);
}

Test(maps, nul_in_path_rejected)
{
	static const char text[] = "7f00-7f10 r-xp 00000000 08:01 1 /a\0b";
	struct map_entry e;
	const char *p;
	size_t plen;

	cr_assert_eq(maps_parse_line(text, sizeof(text) - 1, &e, &p, &plen),
		     -EINVAL);
}

/* ---- buffers, files ---------------------------------------------------- */

Test(maps, committed_snippets)
{
	static const char *const files[] = {
		"spaces.maps", "deleted.maps", "deleted-middle.maps",
		"jemalloc.maps",
	};
	size_t i, len;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *buf = read_data(files[i], &len);

		check_against_ref(buf);
		free(buf);
	}
}

Test(maps, snippet_details)
{
	size_t len;
	char *buf = read_data("deleted.maps", &len);
	struct maps *m;
	size_t i, deleted = 0, vdso = 0, heap = 0, anon = 0;

	cr_assert_eq(maps_parse_buf(buf, len, &m), 0);
	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];

		if (e->deleted) {
			deleted++;
			cr_assert_str_eq(e->path, "/tmp/memsnap-maps/gone.so");
		}
		if (e->path && !strcmp(e->path, "[vdso]"))
			vdso++;
		if (e->path && !strcmp(e->path, "[heap]"))
			heap++;
		if (!e->path)
			anon++;
	}
	/* The snippet (captured with the library unlinked) has five
	 * mappings of it, one vdso, one heap and some anonymous ones. */
	cr_assert_eq(deleted, 5);
	cr_assert_eq(vdso, 1);
	cr_assert_eq(heap, 1);
	cr_assert_gt(anon, 0);
	maps_free(m);
	free(buf);
}

Test(maps, unsorted_input_sorted)
{
	size_t len, nlines = 0, i;
	char *buf = read_data("jemalloc.maps", &len);
	char *lines[256], *shuffled, *save = NULL, *tok;
	struct maps *sorted, *m;
	size_t off = 0;

	cr_assert_eq(maps_parse_buf(buf, len, &sorted), 0);
	for (tok = strtok_r(buf, "\n", &save); tok && nlines < 256;
	     tok = strtok_r(NULL, "\n", &save))
		lines[nlines++] = tok;
	/* Reverse, then interleave: nothing stays in order. */
	shuffled = malloc(len + 2);
	cr_assert_not_null(shuffled);
	for (i = 0; i < nlines; i++) {
		size_t k = (i % 2) ? i / 2 : nlines - 1 - i / 2;

		off += (size_t)sprintf(shuffled + off, "%s\n", lines[k]);
	}
	cr_assert_eq(maps_parse_buf(shuffled, off, &m), 0);
	cr_assert_eq(m->n, sorted->n);
	for (i = 0; i < m->n; i++) {
		cr_assert_eq(m->v[i].start, sorted->v[i].start);
		cr_assert_eq(m->v[i].end, sorted->v[i].end);
		if (sorted->v[i].path)
			cr_assert_str_eq(m->v[i].path, sorted->v[i].path);
	}
	cr_assert_not_null(maps_find(m, sorted->v[nlines / 2].start));
	maps_free(m);
	maps_free(sorted);
	free(shuffled);
	free(buf);
}

Test(maps, malformed_counted_not_fatal)
{
	static const char text[] =
		"400000-401000 r-xp 00000000 08:01 77 /bin/a\n"
		"this is not a maps line\n"
		"\n"
		"401000-402000 r--p 00001000 08:01 77 /bin/a\n"
		"402000-401000 r--p 00001000 08:01 77 /bin/a\n"
		"402000-403000 rw-p 00002000 08:01 77 /bin/a"; /* no newline */
	struct maps *m;

	cr_assert_eq(maps_parse_buf(text, sizeof(text) - 1, &m), 0);
	cr_assert_eq(m->n, 3);
	cr_assert_eq(m->malformed, 2);
	cr_assert_eq(m->v[2].start, 0x402000);
	/* Consecutive mappings of one file share one path copy. */
	cr_assert_eq(m->v[0].path, m->v[1].path);
	cr_assert_eq(m->v[1].path, m->v[2].path);
	maps_free(m);
}

Test(maps, overlong_line_in_file)
{
	size_t big = 10000, n;
	char *text = malloc(big + 200);
	struct maps *m;
	FILE *f;

	cr_assert_not_null(text);
	n = (size_t)sprintf(text, "400000-401000 r-xp 00000000 08:01 77 /");
	memset(text + n, 'a', big);
	n += big;
	n += (size_t)sprintf(text + n,
			     "\n500000-501000 r-xp 00000000 08:01 78 /b\n");
	f = fmemopen(text, n, "r");
	cr_assert_not_null(f);
	cr_assert_eq(maps_read_file(f, &m), 0);
	fclose(f);
	cr_assert_eq(m->n, 1);
	cr_assert_eq(m->malformed, 1);
	cr_assert_str_eq(m->v[0].path, "/b");
	maps_free(m);
	free(text);
}

Test(maps, find_boundaries)
{
	static const char text[] =
		"1000-2000 r--p 00000000 00:00 0\n"
		"2000-3000 r--p 00000000 00:00 0\n"
		"5000-6000 r--p 00000000 00:00 0\n";
	struct maps *m;

	cr_assert_eq(maps_parse_buf(text, sizeof(text) - 1, &m), 0);
	cr_assert_null(maps_find(m, 0));
	cr_assert_null(maps_find(m, 0xfff));
	cr_assert_eq(maps_find(m, 0x1000), &m->v[0]);
	cr_assert_eq(maps_find(m, 0x1fff), &m->v[0]);
	cr_assert_eq(maps_find(m, 0x2000), &m->v[1]);
	cr_assert_null(maps_find(m, 0x3000));
	cr_assert_null(maps_find(m, 0x4fff));
	cr_assert_eq(maps_find(m, 0x5fff), &m->v[2]);
	cr_assert_null(maps_find(m, 0x6000));
	cr_assert_null(maps_find(m, UINT64_MAX));
	maps_free(m);
}

Test(maps, empty_input)
{
	struct maps *m;

	cr_assert_eq(maps_parse_buf("", 0, &m), 0);
	cr_assert_eq(m->n, 0);
	cr_assert_null(maps_find(m, 0x1000));
	maps_free(m);
}

/* 100000 generated lines, every fourth page a gap, a few paths. */
Test(maps, huge_count)
{
	const size_t n = 100000;
	size_t cap = n * 96, off = 0, i;
	char *buf = malloc(cap);
	struct maps *m;

	cr_assert_not_null(buf);
	for (i = 0; i < n; i++) {
		uint64_t start = 0x10000000ull + (uint64_t)i * 0x4000;

		off += (size_t)snprintf(buf + off, cap - off,
					"%" PRIx64 "-%" PRIx64 " r-xp %08zx 08:01 %zu %s\n",
					start, start + 0x3000,
					(i % 7) * 0x1000, i / 7 + 1,
					(i % 3) ? "/usr/lib/lib with space.so" : "");
	}
	cr_assert_eq(maps_parse_buf(buf, off, &m), 0);
	cr_assert_eq(m->n, n);
	cr_assert_eq(m->malformed, 0);
	for (i = 0; i < n; i += 997) {
		uint64_t start = 0x10000000ull + (uint64_t)i * 0x4000;
		const struct map_entry *e = maps_find(m, start + 0x2fff);

		cr_assert_not_null(e);
		cr_assert_eq(e->start, start);
		cr_assert_eq(e->inode, i / 7 + 1);
		cr_assert_null(maps_find(m, start + 0x3000));
		if (i % 3)
			cr_assert_str_eq(e->path, "/usr/lib/lib with space.so");
		else
			cr_assert_null(e->path);
	}
	maps_free(m);
	free(buf);
}

/* ---- live processes ---------------------------------------------------- */

Test(maps, load_self)
{
	uint64_t fn = (uint64_t)(uintptr_t)&read_data;
	uint64_t heap = (uint64_t)(uintptr_t)malloc(16);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const struct map_entry *e;
	struct maps *m;

	cr_assert_gt(n, 0);
	exe[n] = '\0';
	cr_assert_eq(maps_load(getpid(), &m), 0);
	cr_assert_eq(m->malformed, 0);
	e = maps_find(m, fn);
	cr_assert_not_null(e);
	cr_assert(e->prot & MAP_PROT_EXEC);
	cr_assert_str_eq(e->path, exe);
	cr_assert_not_null(maps_find(m, heap));
	free((void *)(uintptr_t)heap);
	maps_free(m);
}

Test(maps, load_missing_process)
{
	struct maps *m = NULL;

	/* Above PID_MAX_LIMIT: no such process can exist. */
	cr_assert_eq(maps_load(4194305 + 7, &m), -ENOENT);
	cr_assert_null(m);
}

/* Count the lines of /proc/PID/maps and those inside [lo, hi). */
static void count_lines(pid_t pid, uint64_t lo, uint64_t hi, size_t *all,
			size_t *inside, size_t *readable)
{
	char path[64], line[8192];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	*all = *inside = *readable = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t s, e;
		char perms[5];

		(*all)++;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", &s, &e,
			   perms) != 3)
			continue;
		if (s >= lo && e <= hi) {
			(*inside)++;
			if (perms[0] == 'r')
				(*readable)++;
		}
	}
	fclose(f);
}

Test(maps, load_live_many_mappings, .fini = stop_fixtures, .timeout = 120)
{
	char path[4096], why[256];
	char *argv[] = { path, (char *)"61001", NULL };
	uint64_t lo, hi;
	size_t pages, all, inside, readable, i, got_inside = 0, got_r = 0;
	struct maps *m;
	int rc;

	fixture_path("elf-manymaps", path, sizeof(path));
	if (access(path, X_OK))
		cr_skip_test("fixture %s not built", path);
	rc = fixture_start(&many_fx, argv, NULL, 30000);
	cr_assert_eq(rc, 0, "fixture_start: %s", strerror(-rc));
	cr_assert_eq(sscanf(many_fx.ready, "%" SCNx64 "-%" SCNx64 " %zu",
			    &lo, &hi, &pages), 3);
	cr_assert_eq(maps_load(many_fx.pid, &m), 0);
	count_lines(many_fx.pid, lo, hi, &all, &inside, &readable);
	cr_assert_gt(all, 60000, "only %zu mappings", all);
	cr_assert_eq(m->n, all);
	cr_assert_eq(m->malformed, 0);
	/* 61001 pages alternating r--p / ---p: 61001 mappings there. */
	cr_assert_eq(inside, pages);
	for (i = 0; i < m->n; i++) {
		if (m->v[i].start < lo || m->v[i].end > hi)
			continue;
		got_inside++;
		if (m->v[i].prot & MAP_PROT_READ)
			got_r++;
	}
	cr_assert_eq(got_inside, inside);
	cr_assert_eq(got_r, readable);
	cr_assert_eq(got_r, (pages + 1) / 2);
	cr_assert_not_null(maps_find(m, lo));
	cr_assert(maps_find(m, lo)->prot & MAP_PROT_READ);
	cr_assert_not(maps_find(m, lo + 4096)->prot & MAP_PROT_READ);
	maps_free(m);
	cr_assert(fixture_healthy(&many_fx, why, sizeof(why)), "%s", why);
}

/* Real text with random bytes changed (fixed seed): never a crash, and
 * whatever is accepted is consistent. */
Test(maps, random_corruption, .timeout = 60)
{
	size_t len, i;
	char *orig = read_data("jemalloc.maps", &len);
	char *buf = malloc(len);
	uint64_t x = 0x243f6a8885a308d3ull;
	size_t lines = 0;
	int iter;

	cr_assert_not_null(buf);
	for (i = 0; i < len; i++)
		lines += orig[i] == '\n';
	for (iter = 0; iter < 3000; iter++) {
		struct maps *m;
		int k;

		memcpy(buf, orig, len);
		for (k = 0; k < 1 + iter % 16; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[(x >> 16) % len] = (char)(x & 0xff);
		}
		cr_assert_eq(maps_parse_buf(buf, len, &m), 0);
		/* A changed newline can split or join lines. */
		cr_assert_leq(m->n, lines + 16);
		for (i = 0; i < m->n; i++) {
			const struct map_entry *e = &m->v[i];

			cr_assert_gt(e->end, e->start);
			if (i)
				cr_assert_leq(m->v[i - 1].start, e->start);
			if (e->path)
				cr_assert_gt(strlen(e->path), 0);
			cr_assert_eq(maps_find(m, e->start)->start <= e->start,
				     true);
		}
		maps_free(m);
	}
	free(buf);
	free(orig);
}
