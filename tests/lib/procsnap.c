/*
 * Snapshots of a live process for the sampler tests (procsnap.h), read
 * with /proc and readelf, never with memsnap's code.
 */
#include "procsnap.h"
#include "fault.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void maps_take(pid_t pid, struct maps_snap *m)
{
	char name[64], line[4096];
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "re");
	cr_assert_not_null(f, "%s: %s", name, strerror(errno));
	m->n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8], *path = strchr(line, '/');

		if (!path || sscanf(line, "%llx-%llx %7s %llx", &start, &end,
				    perms, &off) != 4)
			continue;
		cr_assert_lt(m->n, MAX_MAPPINGS, "%s: too many mappings", name);
		path[strcspn(path, "\n")] = '\0';
		m->v[m->n].start = start;
		m->v[m->n].end = end;
		m->v[m->n].off = off;
		snprintf(m->v[m->n].perms, sizeof(m->v[m->n].perms), "%s",
			 perms);
		snprintf(m->v[m->n].path, sizeof(m->v[m->n].path), "%s", path);
		m->n++;
	}
	fclose(f);
}

void assert_same_perms(const struct maps_snap *before,
		       const struct maps_snap *after, const char *when)
{
	size_t i, j;

	for (i = 0; i < before->n; i++) {
		uint64_t covered = 0;

		for (j = 0; j < after->n; j++) {
			uint64_t lo, hi;

			if (after->v[j].end <= before->v[i].start ||
			    after->v[j].start >= before->v[i].end)
				continue;
			lo = after->v[j].start > before->v[i].start
				     ? after->v[j].start
				     : before->v[i].start;
			hi = after->v[j].end < before->v[i].end
				     ? after->v[j].end
				     : before->v[i].end;
			cr_assert(!strcmp(after->v[j].path, before->v[i].path) &&
					  !strcmp(after->v[j].perms,
						  before->v[i].perms),
				  "%s: %" PRIx64 "-%" PRIx64 " was %s %s, is "
				  "now %s %s",
				  when, lo, hi, before->v[i].perms,
				  before->v[i].path, after->v[j].perms,
				  after->v[j].path);
			covered += hi - lo;
		}
		cr_assert_eq(covered, before->v[i].end - before->v[i].start,
			     "%s: %s at %" PRIx64 "-%" PRIx64 " (%s) is no "
			     "longer all mapped",
			     when, before->v[i].path, before->v[i].start,
			     before->v[i].end, before->v[i].perms);
	}
}

void text_take(pid_t pid, struct text_snap *t)
{
	struct maps_snap *m = calloc(1, sizeof(*m));
	char exe[PATH_MAX], link[64], mem[64];
	ssize_t n;
	size_t i;
	int fd;

	cr_assert_not_null(m);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0, "readlink %s: %s", link, strerror(errno));
	exe[n] = '\0';
	maps_take(pid, m);
	for (i = 0; i < m->n; i++)
		if (!strcmp(m->v[i].path, exe) &&
		    !strcmp(m->v[i].perms, "r-xp"))
			break;
	cr_assert_lt(i, m->n, "no r-xp mapping of %s", exe);
	t->start = m->v[i].start;
	t->len = (size_t)(m->v[i].end - m->v[i].start);
	free(m);
	t->bytes = malloc(t->len);
	cr_assert_not_null(t->bytes);
	snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)pid);
	fd = open(mem, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", mem, strerror(errno));
	cr_assert_eq(pread(fd, t->bytes, t->len, (off_t)t->start),
		     (ssize_t)t->len, "reading the text: %s", strerror(errno));
	close(fd);
}

void text_free(struct text_snap *t)
{
	free(t->bytes);
	t->bytes = NULL;
}

void assert_same_text(const struct text_snap *a, const struct text_snap *b,
		      const char *when)
{
	size_t i;

	cr_assert(a->start == b->start && a->len == b->len,
		  "%s: the text mapping moved", when);
	for (i = 0; i < a->len && a->bytes[i] == b->bytes[i]; i++)
		;
	cr_assert_eq(i, a->len, "%s: the program's code differs at +%#zx "
		     "(%#x, was %#x): an entry point left patched?", when, i,
		     b->bytes[i], a->bytes[i]);
}

/* @name is one of the functions the sampler hooks. */
static bool hooked(const char *name)
{
	static const char *const fns[] = {
		"malloc", "free", "calloc", "realloc", "posix_memalign",
		"aligned_alloc", "memalign", "valloc", "pvalloc",
		"reallocarray",
	};
	size_t i;

	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(name, fns[i]))
			return true;
	/* C++ operator new, new[], delete, delete[], every overload */
	return !strncmp(name, "_Znw", 4) || !strncmp(name, "_Zna", 4) ||
	       !strncmp(name, "_Zdl", 4) || !strncmp(name, "_Zda", 4);
}

/* The first hex number @cmd prints; false if it prints none. */
static bool shell_hex(const char *cmd, uint64_t *v)
{
	struct run r;
	bool ok;

	cr_assert_eq(run_shell(&r, cmd), 0, "%s", cmd);
	ok = !r.status && sscanf(r.out, "%" SCNx64, v) == 1;
	run_free(&r);
	return ok;
}

/* Add @path's hooked slots, loaded at @start (its offset-0 mapping),
 * its mappings spanning [@lo, @hi). */
static void got_add_object(pid_t pid, int mem, const char *path,
			   uint64_t start, uint64_t lo, uint64_t hi,
			   struct got_snap *g)
{
	char cmd[PATH_MAX + 128], q[PATH_MAX + 16], line[1024];
	uint64_t vaddr, bias, plt_lo, plt_hi;
	FILE *p;

	sh_quote(path, q, sizeof(q));
	snprintf(cmd, sizeof(cmd),
		 "LC_ALL=C readelf -lW %s 2>/dev/null | "
		 "awk '$1 == \"LOAD\" { print $3; exit }'", q);
	if (!shell_hex(cmd, &vaddr))
		return;		/* not an ELF file (a locale archive) */
	bias = start - (vaddr & ~(uint64_t)4095);
	snprintf(cmd, sizeof(cmd),
		 "LC_ALL=C readelf -SW %s 2>/dev/null | "
		 "awk '$2 == \".plt\" { print $4, $6; exit }'", q);
	plt_lo = plt_hi = 0;
	{
		struct run r;

		cr_assert_eq(run_shell(&r, cmd), 0, "%s", cmd);
		if (!r.status &&
		    sscanf(r.out, "%" SCNx64 " %" SCNx64, &plt_lo, &plt_hi) == 2) {
			plt_lo += bias;
			plt_hi += plt_lo;
		} else {
			plt_lo = plt_hi = 0;
		}
		run_free(&r);
	}
	snprintf(cmd, sizeof(cmd), "LC_ALL=C readelf -rW %s", q);
	p = popen(cmd, "r");
	cr_assert_not_null(p, "%s: %s", cmd, strerror(errno));
	while (fgets(line, sizeof(line), p)) {
		unsigned long long off, info, value;
		char type[64], name[240];

		/* "0000000000003fd8  0000000300000007 R_X86_64_JUMP_SLOT
		 *  0000000000000000 malloc@GLIBC_2.2.5 + 0" */
		if (sscanf(line, "%llx %llx %63s %llx %239s", &off, &info, type,
			   &value, name) != 5 ||
		    (!strstr(type, "JUMP_SLOT") && !strstr(type, "GLOB_DAT")))
			continue;
		*strchrnul(name, '@') = '\0';
		if (!hooked(name))
			continue;
		cr_assert_lt(g->n, MAX_SLOTS, "too many GOT slots");
		snprintf(g->v[g->n].obj, sizeof(g->v[g->n].obj), "%s", path);
		snprintf(g->v[g->n].name, sizeof(g->v[g->n].name), "%.95s",
			 name);
		g->v[g->n].addr = bias + off;
		g->v[g->n].lo = lo;
		g->v[g->n].hi = hi;
		g->v[g->n].plt_lo = plt_lo;
		g->v[g->n].plt_hi = plt_hi;
		cr_assert_eq(pread(mem, &g->v[g->n].value, 8,
				   (off_t)g->v[g->n].addr), 8,
			     "reading %s's %s slot at 0x%" PRIx64 " in pid %d: "
			     "%s", path, name, g->v[g->n].addr, (int)pid,
			     strerror(errno));
		g->n++;
	}
	pclose(p);
}

void got_take(pid_t pid, struct got_snap *g)
{
	struct maps_snap *m = calloc(1, sizeof(*m));
	char name[64];
	size_t i, j;
	int mem;

	cr_assert_not_null(m);
	maps_take(pid, m);
	snprintf(name, sizeof(name), "/proc/%d/mem", (int)pid);
	mem = open(name, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(mem, 0, "%s: %s", name, strerror(errno));
	g->n = 0;
	for (i = 0; i < m->n; i++) {
		bool first = m->v[i].off == 0;

		/* once per file: its lowest offset-0 mapping */
		for (j = 0; first && j < m->n; j++)
			if (j != i && m->v[j].off == 0 &&
			    !strcmp(m->v[j].path, m->v[i].path) &&
			    m->v[j].start < m->v[i].start)
				first = false;
		if (first && !strstr(m->v[i].path, " (deleted)")) {
			uint64_t lo = m->v[i].start, hi = m->v[i].end;

			for (j = 0; j < m->n; j++)
				if (!strcmp(m->v[j].path, m->v[i].path)) {
					lo = m->v[j].start < lo ? m->v[j].start
								: lo;
					hi = m->v[j].end > hi ? m->v[j].end
							      : hi;
				}
			got_add_object(pid, mem, m->v[i].path, m->v[i].start,
				       lo, hi, g);
		}
	}
	close(mem);
	free(m);
}

/* @addr is in a file-backed object of @g (a hook of the sampler, in its
 * anonymous mapping, is not). */
static bool in_an_object(const struct got_snap *g, uint64_t addr)
{
	size_t i;

	for (i = 0; i < g->n; i++)
		if (addr >= g->v[i].lo && addr < g->v[i].hi)
			return true;
	return false;
}

void assert_same_got(const struct got_snap *before,
		     const struct got_snap *after, const char *when)
{
	size_t i;

	cr_assert_eq(after->n, before->n, "%s: %zu hooked GOT slots, %zu "
		     "before", when, after->n, before->n);
	for (i = 0; i < before->n; i++) {
		cr_assert_eq(after->v[i].addr, before->v[i].addr,
			     "%s: the objects moved", when);
		if (after->v[i].value != before->v[i].value &&
		    before->v[i].value >= before->v[i].plt_lo &&
		    before->v[i].value < before->v[i].plt_hi &&
		    in_an_object(after, after->v[i].value))
			continue;	/* bound lazily meanwhile */
		cr_assert_eq(after->v[i].value, before->v[i].value,
			     "%s: %s's GOT slot for %s at 0x%" PRIx64 " holds "
			     "0x%" PRIx64 ", 0x%" PRIx64 " before prof on",
			     when, before->v[i].obj, before->v[i].name,
			     before->v[i].addr, after->v[i].value,
			     before->v[i].value);
	}
}
