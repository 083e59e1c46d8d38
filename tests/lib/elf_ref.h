/*
 * An independent view of an ELF file's symbols and notes, from binutils'
 * readelf run at test time, to check symbols/ against.  Header-only
 * (static inline) so that the unit and integration tests can both use it
 * without another object file in tests/lib.
 *
 *   readelf -sW FILE   "Symbol table '.symtab' contains 70 entries:"
 *                      "    42: 0000000000001300    11 FUNC    GLOBAL DEFAULT   14 elf_fixture_global"
 */
#ifndef MEMSNAP_TESTS_ELF_REF_H
#define MEMSNAP_TESTS_ELF_REF_H

#include "fixture.h"

#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ref_sym {
	char *name;	   /* without @VERSION */
	uint64_t value, size;
	size_t index;	   /* in its table */
	char type[16];	   /* FUNC, OBJECT, IFUNC, NOTYPE, TLS, ... */
	char bind[16];	   /* GLOBAL, WEAK, LOCAL, ... */
	char ndx[16];	   /* UND, ABS, or a section number */
	bool hidden_ver;   /* name@VER rather than name@@VER */
};

struct ref_tab {
	struct ref_sym *v;
	size_t n, cap;
};

static inline void ref_tab_free(struct ref_tab *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* Run @cmd, return its stdout (cr_assert on failure). */
static inline char *ref_shell(const char *cmd)
{
	struct run r;
	char *out;

	cr_assert_eq(run_shell(&r, cmd), 0, "cannot run %s", cmd);
	cr_assert_eq(r.status, 0, "%s: exit %d: %s", cmd, r.status, r.err);
	out = r.out;
	r.out = NULL;
	run_free(&r);
	return out;
}

/* The symbols of table @table (".dynsym" or ".symtab") of @path. */
static inline void ref_symbols(const char *path, const char *table,
			struct ref_tab *t)
{
	char cmd[4200], *out, *line, *save = NULL;
	bool in_table = false;

	memset(t, 0, sizeof(*t));
	snprintf(cmd, sizeof(cmd), "readelf -sW '%s'", path);
	out = ref_shell(cmd);
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct ref_sym s = { 0 };
		char size[32], *name, *at;
		unsigned long idx;
		int pos = 0;

		if (!strncmp(line, "Symbol table '", 14)) {
			in_table = !strncmp(line + 14, table, strlen(table)) &&
				   line[14 + strlen(table)] == '\'';
			continue;
		}
		if (!in_table ||
		    sscanf(line, " %lu: %" SCNx64 " %31s %15s %15s %*s %15s %n",
			   &idx, &s.value, size, s.type, s.bind, s.ndx,
			   &pos) != 6)
			continue;
		s.index = idx;
		s.size = strtoull(size, NULL, 0);
		name = line + pos;
		if ((at = strstr(name, " (")))
			*at = '\0';
		if ((at = strchr(name, '@'))) {
			s.hidden_ver = at[1] != '@';
			*at = '\0';
		}
		s.name = strdup(name);
		cr_assert_not_null(s.name);
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 256;
			t->v = realloc(t->v, t->cap * sizeof(*t->v));
			cr_assert_not_null(t->v);
		}
		t->v[t->n++] = s;
	}
	free(out);
}

/* Defined as symbols/elf.c means it: a real section, a code/data type. */
static inline bool ref_defined(const struct ref_sym *s)
{
	return strcmp(s->ndx, "UND") && strcmp(s->ndx, "ABS") && s->name[0] &&
	       (!strcmp(s->type, "FUNC") || !strcmp(s->type, "OBJECT") ||
		!strcmp(s->type, "IFUNC") || !strcmp(s->type, "NOTYPE"));
}

static inline int ref_rank(const struct ref_sym *s)
{
	return (!strcmp(s->bind, "LOCAL") ? 4 : 0) + (s->hidden_ver ? 2 : 0);
}

/*
 * The definition of @name the dynamic linker would pick from @t: global
 * before local, default version before hidden.  NULL if none; *@ambiguous
 * when two equally good ones disagree on the address.
 */
static inline const struct ref_sym *ref_best(const struct ref_tab *t,
				      const char *name, bool *ambiguous)
{
	const struct ref_sym *best = NULL;
	size_t i;

	*ambiguous = false;
	for (i = 0; i < t->n; i++) {
		const struct ref_sym *s = &t->v[i];

		if (!ref_defined(s) || strcmp(s->name, name))
			continue;
		if (!best || ref_rank(s) < ref_rank(best)) {
			best = s;
			*ambiguous = false;
		} else if (ref_rank(s) == ref_rank(best) &&
			   s->value != best->value) {
			*ambiguous = true;
		}
	}
	return best;
}

static inline const struct ref_sym *ref_find(const struct ref_tab *t,
				      const char *name)
{
	bool amb;

	return ref_best(t, name, &amb);
}

/* Does any defined symbol of @t cover @addr (as elfobj_addr_lookup
 * counts covering: inside its size, or at its address)? */
static inline bool ref_covers(const struct ref_tab *t, uint64_t addr)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		const struct ref_sym *s = &t->v[i];

		if (!ref_defined(s))
			continue;
		if (addr == s->value && (s->size || strcmp(s->type, "NOTYPE")))
			return true;
		if (addr >= s->value && addr - s->value < s->size)
			return true;
	}
	return false;
}

/* Is there a symbol called @name at @value of @size in @t? */
static inline bool ref_has(const struct ref_tab *t, const char *name,
		    uint64_t value, uint64_t size)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (ref_defined(&t->v[i]) && t->v[i].value == value &&
		    t->v[i].size == size && !strcmp(t->v[i].name, name))
			return true;
	return false;
}

/* The GNU build-id as readelf -n prints it, or "" if none. */
static inline void ref_build_id(const char *path, char *hex, size_t size)
{
	char cmd[4200], *out, *p;

	snprintf(cmd, sizeof(cmd), "readelf -nW '%s'", path);
	out = ref_shell(cmd);
	hex[0] = '\0';
	p = strstr(out, "Build ID: ");
	if (p) {
		p += strlen("Build ID: ");
		snprintf(hex, size, "%.*s", (int)strspn(p, "0123456789abcdef"),
			 p);
	}
	free(out);
}

/* Address of section @name in @path, from readelf -SW; false if none. */
static inline bool ref_section(const char *path, const char *name,
			       uint64_t *addr, uint64_t *size)
{
	char cmd[4200], *out, *line, *save = NULL;
	bool found = false;

	snprintf(cmd, sizeof(cmd), "readelf -SW '%s'", path);
	out = ref_shell(cmd);
	for (line = strtok_r(out, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		char sname[128], stype[32];
		uint64_t off;
		const char *b = strchr(line, ']');

		if (!strchr(line, '[') || !b)
			continue;
		if (sscanf(b + 1, " %127s %31s %" SCNx64 " %" SCNx64 " %" SCNx64,
			   sname, stype, addr, &off, size) == 5 &&
		    !strcmp(sname, name))
			found = true;
	}
	free(out);
	return found;
}

/*
 * The PT_LOAD segments of @path from readelf -lW: offsets and vaddrs.
 * Returns how many (at most @max).
 */
static inline size_t ref_loads(const char *path, uint64_t *offset,
			       uint64_t *vaddr, size_t max)
{
	char cmd[4200], *out, *line, *save = NULL;
	size_t n = 0;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	out = ref_shell(cmd);
	for (line = strtok_r(out, "\n", &save); line && n < max;
	     line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, " LOAD %" SCNx64 " %" SCNx64, &offset[n],
			   &vaddr[n]) == 2)
			n++;
	free(out);
	return n;
}

/* Unpack @path's .gnu_debugdata into a new temp file named in @out, with
 * binutils and xz, without touching @path. */
static inline void ref_debugdata(const char *path, char *out, size_t size)
{
	char dir[] = "/tmp/memsnap-elf.XXXXXX", cmd[16384];
	char *o;
	int n;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(out, size, "%s/debugdata.elf", dir);
	n = snprintf(cmd, sizeof(cmd),
		     "objcopy --dump-section .gnu_debugdata='%s/dd.xz' '%s' '%s/discard' && xz -dc '%s/dd.xz' > '%s' && rm -f '%s/dd.xz' '%s/discard'",
		     dir, path, dir, dir, out, dir, dir);
	cr_assert_lt(n, (int)sizeof(cmd), "path too long: %s", path);
	o = ref_shell(cmd);
	free(o);
}

/* Remove what ref_debugdata() made. */
static inline void ref_debugdata_remove(const char *out)
{
	char dir[4096], *slash;

	snprintf(dir, sizeof(dir), "%s", out);
	unlink(out);
	slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		rmdir(dir);
	}
}

/* Skip the test (with the reason) when fixture @name was not built. */
static inline const char *ref_fixture(const char *name, char *buf,
				      size_t size)
{
	fixture_path(name, buf, size);
	if (access(buf, R_OK))
		cr_skip_test("fixture %s not built (make fixtures)", buf);
	return buf;
}

#endif
