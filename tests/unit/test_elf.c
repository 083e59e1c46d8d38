/*
 * symbols/elf and symbols/objects on the fixture objects built by
 * tests/fixtures/elf.mk and on Debian's libc and libjemalloc.  Every
 * expected value comes from readelf at test time (tests/lib/elf_ref.h).
 */
#include "symbols/elf.h"
#include "proc/maps.h"
#include "symbols/objects.h"
#include "tests/lib/elf_ref.h"
#include "tests/lib/fixture.h"

#include <criterion/criterion.h>

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIBC LIBDIR "libc.so.6"
#define LIBJEMALLOC LIBDIR "libjemalloc.so.2"

#define BIT(src) (1u << (src))

static struct fixture fx[2] = { { .pid = -1 }, { .pid = -1 } };

static void stop_fixtures(void)
{
	fixture_stop(&fx[0]);
	fixture_stop(&fx[1]);
}

static struct elfobj *open_obj(const char *path)
{
	struct elfobj *o = NULL;
	int rc = elfobj_open_path(path, &o);

	cr_assert_eq(rc, 0, "elfobj_open_path(%s): %s", path, strerror(-rc));
	return o;
}

/* @name in @o must be the symbol readelf shows in @tab, from @src. */
static void expect_lookup(struct elfobj *o, const struct ref_tab *tab,
			  const char *name, unsigned int flags,
			  enum sym_source src)
{
	const struct ref_sym *r = ref_find(tab, name);
	struct elfsym s;
	int rc;

	cr_assert_not_null(r, "readelf does not show %s", name);
	rc = elfobj_lookup(o, name, flags, &s);
	cr_assert_eq(rc, 0, "%s: %s", name, strerror(-rc));
	cr_assert_str_eq(s.name, name);
	cr_assert_eq(s.value, r->value, "%s: 0x%" PRIx64 " != 0x%" PRIx64,
		     name, s.value, r->value);
	cr_assert_eq(s.size, r->size, "%s size", name);
	cr_assert_eq(s.source, src, "%s from table %d, not %d", name,
		     (int)s.source, (int)src);
}

static void expect_missing(struct elfobj *o, const char *name,
			   unsigned int flags)
{
	struct elfsym s;

	cr_assert_eq(elfobj_lookup(o, name, flags, &s), -ENOENT,
		     "%s found (flags %u)", name, flags);
}

/* ---- name -> symbol, per kind of object -------------------------------- */

Test(elf, pie_exported_through_hash)
{
	char path[PATH_MAX];
	struct ref_tab dyn, sym;
	struct elfobj *o;
	uint64_t a, sz;

	ref_fixture("elf-pie", path, sizeof(path));
	ref_symbols(path, ".dynsym", &dyn);
	ref_symbols(path, ".symtab", &sym);
	cr_assert(ref_section(path, ".gnu.hash", &a, &sz),
		  "fixture has no .gnu.hash");
	o = open_obj(path);
	cr_assert_eq(elfobj_type(o), ET_DYN);
	expect_lookup(o, &dyn, "elf_fixture_global", ELFSYM_DYNAMIC_ONLY,
		      SYMSRC_DYNSYM);
	expect_lookup(o, &dyn, "elf_fixture_global", 0, SYMSRC_DYNSYM);
	expect_lookup(o, &dyn, "elf_fixture_table", 0, SYMSRC_DYNSYM);
	cr_assert_eq(ref_find(&dyn, "elf_fixture_table")->size, 256);
	/* static: only in .symtab */
	cr_assert_null(ref_find(&dyn, "elf_fixture_local"));
	expect_missing(o, "elf_fixture_local", ELFSYM_DYNAMIC_ONLY);
	expect_lookup(o, &sym, "elf_fixture_local", 0, SYMSRC_SYMTAB);
	/* Prefixes and extensions of real names are other names. */
	expect_missing(o, "elf_fixture_glob", 0);
	expect_missing(o, "elf_fixture_global2", 0);
	expect_missing(o, "", 0);
	/* Imports are in .dynsym but not defined here. */
	expect_missing(o, "snprintf", ELFSYM_DYNAMIC_ONLY);
	cr_assert_eq(elfobj_sources(o),
		     BIT(SYMSRC_DYNSYM) | BIT(SYMSRC_SYMTAB));
	elfobj_close(o);
	ref_tab_free(&dyn);
	ref_tab_free(&sym);
}

static void check_symtab_exe(const char *fixture, unsigned int type)
{
	char path[PATH_MAX];
	struct ref_tab dyn, sym;
	struct elfobj *o;

	ref_fixture(fixture, path, sizeof(path));
	ref_symbols(path, ".dynsym", &dyn);
	ref_symbols(path, ".symtab", &sym);
	o = open_obj(path);
	cr_assert_eq(elfobj_type(o), type);
	cr_assert_null(ref_find(&dyn, "elf_fixture_global"),
		       "%s exports its functions", fixture);
	expect_missing(o, "elf_fixture_global", ELFSYM_DYNAMIC_ONLY);
	expect_lookup(o, &sym, "elf_fixture_global", 0, SYMSRC_SYMTAB);
	expect_lookup(o, &sym, "elf_fixture_local", 0, SYMSRC_SYMTAB);
	expect_lookup(o, &sym, "elf_fixture_table", 0, SYMSRC_SYMTAB);
	expect_lookup(o, &sym, "main", 0, SYMSRC_SYMTAB);
	cr_assert(elfobj_sources(o) & BIT(SYMSRC_SYMTAB));
	cr_assert_not(elfobj_sources(o) & BIT(SYMSRC_DEBUGDATA));
	elfobj_close(o);
	ref_tab_free(&dyn);
	ref_tab_free(&sym);
}

Test(elf, symtab_only_pie)
{
	check_symtab_exe("elf-symtab", ET_DYN);
}

Test(elf, non_pie)
{
	check_symtab_exe("elf-nopie", ET_EXEC);
}

Test(elf, multi_segment)
{
	check_symtab_exe("elf-multiseg", ET_EXEC);
}

Test(elf, static_exe)
{
	static const char *const names[] = {
		"malloc", "__libc_malloc", "malloc_info", "malloc_trim",
		"mallinfo2", "free", "elf_fixture_global",
	};
	char path[PATH_MAX];
	struct ref_tab sym;
	struct elfobj *o;
	size_t i;

	ref_fixture("elf-static", path, sizeof(path));
	ref_symbols(path, ".symtab", &sym);
	o = open_obj(path);
	cr_assert_eq(elfobj_type(o), ET_EXEC);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		expect_lookup(o, &sym, names[i], 0, SYMSRC_SYMTAB);
	expect_missing(o, "malloc", ELFSYM_DYNAMIC_ONLY);
	cr_assert_eq(elfobj_sources(o), BIT(SYMSRC_SYMTAB));
	elfobj_close(o);
	ref_tab_free(&sym);
}

Test(elf, stripped_library_dynsym_only)
{
	char path[PATH_MAX], full[PATH_MAX];
	struct ref_tab dyn, fullsym;
	struct elfobj *o;

	ref_fixture("libelf-dynonly.so", path, sizeof(path));
	ref_fixture("elf-work/libelf-dynonly.full.so", full, sizeof(full));
	ref_symbols(path, ".dynsym", &dyn);
	ref_symbols(full, ".symtab", &fullsym);
	/* The hidden function exists, but only in the unstripped copy. */
	cr_assert_not_null(ref_find(&fullsym, "elf_dynonly_hidden"));
	o = open_obj(path);
	cr_assert_eq(elfobj_sources(o), BIT(SYMSRC_DYNSYM));
	expect_lookup(o, &dyn, "elf_dynonly_visible", 0, SYMSRC_DYNSYM);
	expect_lookup(o, &dyn, "elf_dynonly_counter", 0, SYMSRC_DYNSYM);
	expect_missing(o, "elf_dynonly_hidden", 0);
	elfobj_close(o);
	ref_tab_free(&dyn);
	ref_tab_free(&fullsym);
}

Test(elf, minidebuginfo)
{
	char path[PATH_MAX], dd[PATH_MAX];
	struct ref_tab sym, mini;
	struct elfobj *o;
	struct elfsym s;
	const struct ref_sym *r;

	ref_fixture("elf-minidebug", path, sizeof(path));
	ref_symbols(path, ".symtab", &sym);
	cr_assert_eq(sym.n, 0, "elf-minidebug is not stripped");
	ref_debugdata(path, dd, sizeof(dd));
	ref_symbols(dd, ".symtab", &mini);
	o = open_obj(path);
	cr_assert_eq(elfobj_sources(o) & (BIT(SYMSRC_SYMTAB) |
					  BIT(SYMSRC_DEBUGDATA)),
		     BIT(SYMSRC_DEBUGDATA));
	expect_missing(o, "elf_fixture_global", ELFSYM_DYNAMIC_ONLY);
	expect_lookup(o, &mini, "elf_fixture_global", 0, SYMSRC_DEBUGDATA);
	expect_lookup(o, &mini, "elf_fixture_local", 0, SYMSRC_DEBUGDATA);
	expect_lookup(o, &mini, "main", 0, SYMSRC_DEBUGDATA);
	/* And back: an address inside the local function. */
	r = ref_find(&mini, "elf_fixture_local");
	cr_assert_eq(elfobj_addr_lookup(o, r->value + 1, &s), 0);
	cr_assert_str_eq(s.name, "elf_fixture_local");
	cr_assert_eq(s.source, SYMSRC_DEBUGDATA);
	elfobj_close(o);
	ref_debugdata_remove(dd);
	ref_tab_free(&sym);
	ref_tab_free(&mini);
}

Test(elf, prefixed_jemalloc_in_debugdata)
{
	static const char *const names[] = {
		"_rjem_mallctl", "_rjem_mallctlnametomib",
		"_rjem_malloc_stats_print", "_rjem_malloc",
	};
	char path[PATH_MAX], orig[PATH_MAX], dd[PATH_MAX];
	struct ref_tab mini, unstripped;
	struct elfobj *o;
	size_t i;

	ref_fixture("elf-rjem-mini", path, sizeof(path));
	ref_fixture("elf-rjem", orig, sizeof(orig));
	ref_debugdata(path, dd, sizeof(dd));
	ref_symbols(dd, ".symtab", &mini);
	ref_symbols(orig, ".symtab", &unstripped);
	o = open_obj(path);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		expect_lookup(o, &mini, names[i], 0, SYMSRC_DEBUGDATA);
		expect_lookup(o, &unstripped, names[i], 0, SYMSRC_DEBUGDATA);
	}
	elfobj_close(o);
	ref_debugdata_remove(dd);
	ref_tab_free(&mini);
	ref_tab_free(&unstripped);
}

/*
 * Every defined .dynsym name of @path, looked up through the hash table,
 * must give the definition readelf shows (default version first).
 * Returns how many names were checked.
 */
static size_t check_all_dynsym(const char *path)
{
	struct ref_tab dyn;
	struct elfobj *o = open_obj(path);
	size_t i, checked = 0;

	ref_symbols(path, ".dynsym", &dyn);
	for (i = 0; i < dyn.n; i++) {
		const struct ref_sym *best;
		struct elfsym s;
		bool amb;
		int rc;

		best = ref_best(&dyn, dyn.v[i].name, &amb);
		if (!dyn.v[i].name[0])
			continue;
		if (!best) {
			/* Only imported or absolute here. */
			rc = elfobj_lookup(o, dyn.v[i].name,
					   ELFSYM_DYNAMIC_ONLY, &s);
			cr_expect_eq(rc, -ENOENT, "%s: undefined %s found",
				     path, dyn.v[i].name);
			continue;
		}
		if (best != &dyn.v[i] || amb)
			continue;
		rc = elfobj_lookup(o, best->name, ELFSYM_DYNAMIC_ONLY, &s);
		cr_assert_eq(rc, 0, "%s: %s not found", path, best->name);
		cr_assert_eq(s.value, best->value,
			     "%s: %s at 0x%" PRIx64 ", readelf 0x%" PRIx64,
			     path, best->name, s.value, best->value);
		cr_assert_eq(s.source, SYMSRC_DYNSYM);
		checked++;
	}
	elfobj_close(o);
	ref_tab_free(&dyn);
	return checked;
}

Test(elf, every_exported_symbol, .timeout = 120)
{
	char path[PATH_MAX];

	/* libc: versioned names, several versions of one name. */
	cr_assert_gt(check_all_dynsym(LIBC), 2500);
	if (access(LIBJEMALLOC, R_OK) == 0)
		cr_assert_gt(check_all_dynsym(LIBJEMALLOC), 20);
	ref_fixture("elf-je", path, sizeof(path));
	/* -rdynamic: jemalloc's public API (its internals are hidden). */
	cr_assert_gt(check_all_dynsym(path), 20);
	ref_fixture("libelf-dynonly.so", path, sizeof(path));
	cr_assert_eq(check_all_dynsym(path), 2);
}

/* A sample of .symtab-only names (locals included) of a static jemalloc. */
Test(elf, symtab_names_of_static_jemalloc, .timeout = 120)
{
	char path[PATH_MAX];
	struct ref_tab sym, dyn;
	struct elfobj *o;
	size_t i, checked = 0;

	ref_fixture("elf-rjem", path, sizeof(path));
	ref_symbols(path, ".symtab", &sym);
	ref_symbols(path, ".dynsym", &dyn);
	o = open_obj(path);
	for (i = 0; i < sym.n; i += 5) {
		const struct ref_sym *best;
		struct elfsym s;
		bool amb;

		best = ref_best(&sym, sym.v[i].name, &amb);
		if (!best || amb || ref_find(&dyn, sym.v[i].name))
			continue;
		cr_assert_eq(elfobj_lookup(o, best->name, 0, &s), 0, "%s",
			     best->name);
		cr_assert_eq(s.value, best->value, "%s", best->name);
		cr_assert_eq(s.source, SYMSRC_SYMTAB);
		checked++;
	}
	/* a jemalloc without profiling (arm64) has fewer */
	cr_assert_gt(checked, 150);
	elfobj_close(o);
	ref_tab_free(&sym);
	ref_tab_free(&dyn);
}

/* ---- names by suffix --------------------------------------------------- */

struct names {
	char *v[64];
	size_t n;
	int stop_after; /* return 7 after this many calls, if > 0 */
	int calls;
};

static int collect(void *arg, const char *name)
{
	struct names *ns = arg;
	size_t i;

	ns->calls++;
	for (i = 0; i < ns->n; i++)
		if (!strcmp(ns->v[i], name))
			goto out;
	cr_assert_lt(ns->n, 64);
	ns->v[ns->n++] = strdup(name);
out:
	return ns->stop_after && ns->calls >= ns->stop_after ? 7 : 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* The names elfobj_each_suffix reports must be exactly the defined names
 * readelf shows in .dynsym and .symtab ending in @suffix. */
static void check_suffix(const char *path, const char *suffix,
			 const char *must, const char *must_not)
{
	struct ref_tab tabs[2];
	struct names got = { 0 };
	struct elfobj *o = open_obj(path);
	size_t i, t, expected = 0;
	bool seen_must = false;

	ref_symbols(path, ".dynsym", &tabs[0]);
	ref_symbols(path, ".symtab", &tabs[1]);
	cr_assert_eq(elfobj_each_suffix(o, suffix, collect, &got), 0);
	for (i = 0; i < got.n; i++) {
		cr_assert(ends_with(got.v[i], suffix), "%s", got.v[i]);
		cr_assert(ref_find(&tabs[0], got.v[i]) ||
				  ref_find(&tabs[1], got.v[i]),
			  "%s: reported %s, which readelf does not define",
			  path, got.v[i]);
		if (must && !strcmp(got.v[i], must))
			seen_must = true;
		if (must_not)
			cr_assert_str_neq(got.v[i], must_not);
	}
	/* ... and none is missing. */
	for (t = 0; t < 2; t++)
		for (i = 0; i < tabs[t].n; i++) {
			const struct ref_sym *s = &tabs[t].v[i];
			size_t k;
			bool found = false;

			if (!ref_defined(s) || !ends_with(s->name, suffix))
				continue;
			for (k = 0; k < got.n && !found; k++)
				found = !strcmp(got.v[k], s->name);
			cr_assert(found, "%s: %s not reported", path,
				  s->name);
			expected++;
		}
	cr_assert_gt(expected, 0);
	if (must)
		cr_assert(seen_must, "%s: %s not reported", path, must);
	for (i = 0; i < got.n; i++)
		free(got.v[i]);
	elfobj_close(o);
	ref_tab_free(&tabs[0]);
	ref_tab_free(&tabs[1]);
}

Test(elf, each_suffix)
{
	char path[PATH_MAX];

	ref_fixture("elf-je", path, sizeof(path));
	check_suffix(path, "mallctl", "je_mallctl", "mallctl_int");
	check_suffix(path, "mallctl", "foo_mallctl", "mallctl_string");
	check_suffix(path, "malloc_stats_print", "je_malloc_stats_print",
		     NULL);
	ref_fixture("elf-rjem", path, sizeof(path));
	check_suffix(path, "mallctl", "_rjem_mallctl", NULL);
	ref_fixture("elf-myapp", path, sizeof(path));
	check_suffix(path, "mallctl", "myapp_mallctl", NULL);
	if (access(LIBJEMALLOC, R_OK) == 0)
		check_suffix(LIBJEMALLOC, "mallctl", "mallctl", NULL);
}

Test(elf, each_suffix_stops_early)
{
	char path[PATH_MAX];
	struct names got = { .stop_after = 1 };
	struct elfobj *o;
	size_t i;

	ref_fixture("elf-je", path, sizeof(path));
	o = open_obj(path);
	cr_assert_eq(elfobj_each_suffix(o, "mallctl", collect, &got), 7);
	cr_assert_eq(got.calls, 1);
	for (i = 0; i < got.n; i++)
		free(got.v[i]);
	elfobj_close(o);
}

/* ---- address -> symbol ------------------------------------------------- */

Test(elf, addr_inside_and_in_padding)
{
	static const char *const fns[] = { "elf_fixture_global",
					   "elf_fixture_local" };
	char path[PATH_MAX];
	struct ref_tab dyn, sym;
	struct elfobj *o;
	struct elfsym s;
	uint64_t a, sz;
	size_t i, gaps = 0;

	ref_fixture("elf-symtab", path, sizeof(path));
	ref_symbols(path, ".dynsym", &dyn);
	ref_symbols(path, ".symtab", &sym);
	o = open_obj(path);
	for (i = 0; i < 2; i++) {
		const struct ref_sym *r = ref_find(&sym, fns[i]);
		uint64_t end;

		cr_assert_not_null(r);
		cr_assert_gt(r->size, 1);
		end = r->value + r->size;
		cr_assert_eq(elfobj_addr_lookup(o, r->value, &s), 0);
		cr_assert_str_eq(s.name, fns[i]);
		cr_assert_eq(s.value, r->value);
		cr_assert_eq(s.size, r->size);
		cr_assert_eq(elfobj_addr_lookup(o, end - 1, &s), 0);
		cr_assert_str_eq(s.name, fns[i]);
		/* Functions are 64-byte aligned: before them, padding that
		 * no symbol covers; the answer is "none", never the
		 * function before it. */
		if (!ref_covers(&sym, end) && !ref_covers(&dyn, end)) {
			gaps++;
			cr_assert_eq(elfobj_addr_lookup(o, end, &s), -ENOENT,
				     "0x%" PRIx64 " (end of %s) named %s",
				     end, fns[i], s.name);
		}
		if (!ref_covers(&sym, r->value - 1) &&
		    !ref_covers(&dyn, r->value - 1)) {
			gaps++;
			cr_assert_eq(elfobj_addr_lookup(o, r->value - 1, &s),
				     -ENOENT, "0x%" PRIx64 " (before %s) named %s",
				     r->value - 1, fns[i], s.name);
		}
	}
	cr_assert_gt(gaps, 0, "no padding after the fixture functions");
	/* A section with no symbols at all. */
	cr_assert(ref_section(path, ".dynstr", &a, &sz));
	cr_assert_not(ref_covers(&sym, a + 1));
	cr_assert_eq(elfobj_addr_lookup(o, a + 1, &s), -ENOENT);
	cr_assert_eq(elfobj_addr_lookup(o, 0, &s), -ENOENT);
	cr_assert_eq(elfobj_addr_lookup(o, UINT64_MAX, &s), -ENOENT);
	elfobj_close(o);
	ref_tab_free(&dyn);
	ref_tab_free(&sym);
}

/* The middle of every sized function resolves to a symbol that covers it
 * (the function or an alias of it). */
static void check_all_functions(const char *path)
{
	struct ref_tab dyn, sym;
	struct elfobj *o = open_obj(path);
	size_t t, i, checked = 0;

	ref_symbols(path, ".dynsym", &dyn);
	ref_symbols(path, ".symtab", &sym);
	for (t = 0; t < 2; t++) {
		const struct ref_tab *tab = t ? &sym : &dyn;

		for (i = 0; i < tab->n; i++) {
			const struct ref_sym *r = &tab->v[i];
			uint64_t a = r->value + r->size / 2;
			struct elfsym s;
			int rc;

			if (!ref_defined(r) || strcmp(r->type, "FUNC") ||
			    !r->size)
				continue;
			rc = elfobj_addr_lookup(o, a, &s);
			cr_assert_eq(rc, 0, "%s: 0x%" PRIx64 " in %s: %s",
				     path, a, r->name, strerror(-rc));
			cr_assert(ref_has(&dyn, s.name, s.value, s.size) ||
					  ref_has(&sym, s.name, s.value,
						  s.size),
				  "%s: %s is not a symbol", path, s.name);
			cr_assert(a == s.value || a - s.value < s.size,
				  "%s: 0x%" PRIx64 " named %s+0x%" PRIx64
				  " (size 0x%" PRIx64 ")",
				  path, a, s.name, a - s.value, s.size);
			checked++;
		}
	}
	cr_assert_gt(checked, 0);
	elfobj_close(o);
	ref_tab_free(&dyn);
	ref_tab_free(&sym);
}

Test(elf, addr_every_function, .timeout = 120)
{
	char path[PATH_MAX];

	check_all_functions(LIBC);
	ref_fixture("elf-je", path, sizeof(path));
	check_all_functions(path);
	ref_fixture("elf-static", path, sizeof(path));
	check_all_functions(path);
}

/* ---- build-id, bias ---------------------------------------------------- */

Test(elf, build_id_matches_readelf)
{
	static const char *const fixtures[] = {
		"elf-pie", "elf-nopie", "elf-static", "elf-minidebug",
		"elf-multiseg", "libelf-dynonly.so", "elf-je",
	};
	char path[PATH_MAX], want[160], got[160];
	size_t i;

	for (i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]) + 1; i++) {
		const unsigned char *id;
		struct elfobj *o;
		uint64_t vaddr, naddr, nsize;
		size_t len, k;

		if (i < sizeof(fixtures) / sizeof(fixtures[0]))
			ref_fixture(fixtures[i], path, sizeof(path));
		else
			snprintf(path, sizeof(path), "%s", LIBC);
		ref_build_id(path, want, sizeof(want));
		cr_assert_neq(want[0], '\0', "%s has no build-id", path);
		o = open_obj(path);
		cr_assert_eq(elfobj_build_id(o, &id, &len), 0);
		for (k = 0; k < len; k++)
			sprintf(got + 2 * k, "%02x", id[k]);
		got[2 * len] = '\0';
		cr_assert_str_eq(got, want, "%s", path);
		/* In memory: the note's descriptor, after the 12-byte
		 * header and "GNU\0". */
		cr_assert(ref_section(path, ".note.gnu.build-id", &naddr,
				      &nsize));
		cr_assert_eq(elfobj_build_id_vaddr(o, &vaddr), 0);
		cr_assert_eq(vaddr, naddr + 16, "%s", path);
		elfobj_close(o);
	}
}

Test(elf, no_build_id)
{
	char path[PATH_MAX], cmd[PATH_MAX * 2 + 128], tmp[] =
		"/tmp/memsnap-noid.XXXXXX";
	const unsigned char *id;
	struct elfobj *o;
	uint64_t vaddr;
	size_t len;
	char *out;
	int fd;

	ref_fixture("elf-pie", path, sizeof(path));
	fd = mkstemp(tmp);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --remove-section .note.gnu.build-id '%s' '%s'",
		 path, tmp);
	out = ref_shell(cmd);
	free(out);
	o = open_obj(tmp);
	cr_assert_eq(elfobj_build_id(o, &id, &len), -ENOENT);
	cr_assert_eq(elfobj_build_id_vaddr(o, &vaddr), -ENOENT);
	elfobj_close(o);
	unlink(tmp);
}

Test(elf, bias_of_every_segment)
{
	static const struct {
		const char *name;
		uint64_t base;
	} cases[] = {
		{ "elf-multiseg", 0 },
		{ "elf-nopie", 0 },
		{ "elf-pie", 0x555555554000ull },
		{ "libelf-dynonly.so", 0x7f0012340000ull },
	};
	char path[PATH_MAX];
	size_t c, i;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t off[16], va[16], bias;
		struct elfobj *o;
		size_t n;

		ref_fixture(cases[c].name, path, sizeof(path));
		n = ref_loads(path, off, va, 16);
		cr_assert_geq(n, 2, "%s: %zu PT_LOAD", path, n);
		if (!strcmp(cases[c].name, "elf-multiseg")) {
			cr_assert_eq(va[0], 0x800000);
			cr_assert_geq(n, 4);
		}
		o = open_obj(path);
		for (i = 0; i < n; i++) {
			/* Where the kernel maps segment i. */
			uint64_t start = cases[c].base + (va[i] & ~0xfffull);
			size_t k;
			bool shared = false;

			/* A file page two segments share (rodata's last
			 * page is often data's first) names both: the
			 * offset alone cannot tell them apart, and callers
			 * ask with the first mapping of the object. */
			for (k = 0; k < i; k++)
				shared |= (off[k] & ~0xfffull) ==
					  (off[i] & ~0xfffull);
			if (shared)
				continue;

			cr_assert_eq(elfobj_bias(o, start, off[i] & ~0xfffull,
						 4096, &bias),
				     0, "%s segment %zu", path, i);
			cr_assert_eq(bias, cases[c].base, "%s segment %zu",
				     path, i);
		}
		cr_assert_eq(elfobj_bias(o, 0x10000000, 0x7fff0000, 4096,
					 &bias),
			     -ENOENT);
		elfobj_close(o);
	}
}

/* ---- live: objects over a running fixture ------------------------------ */

/* The first mapping of @path in /proc/@pid/maps, read independently. */
static bool first_mapping(pid_t pid, const char *path, uint64_t *start,
			  uint64_t *offset)
{
	char mpath[64], line[8192];
	bool found = false;
	FILE *f;

	snprintf(mpath, sizeof(mpath), "/proc/%d/maps", (int)pid);
	f = fopen(mpath, "re");
	cr_assert_not_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		uint64_t end;
		char *p;

		line[strcspn(line, "\n")] = '\0';
		p = strchr(line, '/');
		if (!p || strcmp(p, path))
			continue;
		found = sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64,
			       start, &end, offset) == 3;
	}
	fclose(f);
	return found;
}

static void check_live(struct fixture *f, const char *name)
{
	char path[PATH_MAX], real[PATH_MAX], why[256];
	char *argv[] = { path, NULL };
	struct object_source src = { 0 };
	struct objects *os;
	struct object *obj;
	struct maps *m;
	struct ref_tab sym;
	struct symbol s;
	const struct ref_sym *g;
	uint64_t off[16], va[16], start, offset, bias, pad;
	size_t i;
	int rc;

	ref_fixture(name, path, sizeof(path));
	cr_assert_not_null(realpath(path, real));
	snprintf(path, sizeof(path), "%s", real);
	ref_symbols(path, ".symtab", &sym);
	cr_assert_geq(ref_loads(path, off, va, 16), 1);
	rc = fixture_start(f, argv, NULL, 10000);
	cr_assert_eq(rc, 0, "%s: %s", name, strerror(-rc));
	cr_assert(first_mapping(f->pid, path, &start, &offset));
	cr_assert_eq(offset, 0);
	bias = start - (va[0] & ~0xfffull);

	src.pid = f->pid;
	cr_assert_eq(maps_load(f->pid, &m), 0);
	cr_assert_eq(objects_new(m, &src, &os), 0);
	obj = NULL;
	for (i = 0; i < os->n; i++)
		if (!strcmp(os->v[i].path, path))
			obj = &os->v[i];
	cr_assert_not_null(obj, "%s not among the objects", path);
	cr_assert_eq(objects_find(os, start), obj);
	cr_assert_eq(object_open(os, obj), 0);
	cr_assert_str_eq(obj->via, "map_files");
	cr_assert_eq(obj->bias, bias, "bias 0x%" PRIx64 ", want 0x%" PRIx64,
		     obj->bias, bias);

	g = ref_find(&sym, "elf_fixture_global");
	cr_assert_not_null(g);
	cr_assert_eq(object_lookup(os, obj, "elf_fixture_global", 0, &s), 0);
	cr_assert_eq(s.addr, bias + g->value);
	cr_assert_eq(s.obj, obj);

	cr_assert_eq(objects_symbolize(os, bias + g->value + 3, &s), 0);
	cr_assert_str_eq(s.name, "elf_fixture_global");
	cr_assert_eq(s.offset, 3);
	cr_assert_eq(s.obj, obj);

	pad = g->value + g->size;
	if (!ref_covers(&sym, pad)) {
		cr_assert_eq(objects_symbolize(os, bias + pad, &s), 0);
		cr_assert_null(s.name, "padding named %s", s.name);
		cr_assert_eq(s.obj, obj);
		cr_assert_eq(s.offset, pad);
	}
	cr_assert_eq(objects_symbolize(os, 0x1000, &s), -ENOENT);

	objects_free(os);
	maps_free(m);
	ref_tab_free(&sym);
	cr_assert(fixture_healthy(f, why, sizeof(why)), "%s", why);
}

Test(elf, live_multi_segment, .fini = stop_fixtures)
{
	check_live(&fx[0], "elf-multiseg");
}

Test(elf, live_pie, .fini = stop_fixtures)
{
	check_live(&fx[1], "elf-symtab");
}

/* A stripped library loaded with dlopen and deleted: found through
 * map_files, bias as the dynamic linker reports it (l_addr). */
Test(elf, live_deleted_dlopened_library, .fini = stop_fixtures)
{
	char path[PATH_MAX], lib[PATH_MAX], copy[64], why[256];
	char *argv[] = { path, copy, (char *)"elf_dynonly_visible", NULL };
	struct object_source src = { 0 };
	struct ref_tab dyn, full;
	const struct ref_sym *r, *h;
	struct objects *os;
	struct object *obj = NULL;
	struct maps *m;
	struct symbol s;
	uint64_t l_addr;
	char *out, cmd[PATH_MAX + 128];
	size_t i;
	int fd, rc;

	ref_fixture("elf-dlopen", path, sizeof(path));
	ref_fixture("libelf-dynonly.so", lib, sizeof(lib));
	snprintf(copy, sizeof(copy), "/tmp/memsnap-dyn.XXXXXX");
	fd = mkstemp(copy);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", lib, copy);
	out = ref_shell(cmd);
	free(out);
	ref_symbols(copy, ".dynsym", &dyn);
	r = ref_find(&dyn, "elf_dynonly_visible");
	cr_assert_not_null(r);
	rc = fixture_start(&fx[0], argv, NULL, 10000);
	unlink(copy);
	cr_assert_eq(rc, 0, "elf-dlopen: %s", strerror(-rc));
	cr_assert_eq(sscanf(fx[0].ready, "0x%" SCNx64, &l_addr), 1);

	src.pid = fx[0].pid;
	cr_assert_eq(maps_load(fx[0].pid, &m), 0);
	cr_assert_eq(objects_new(m, &src, &os), 0);
	for (i = 0; i < os->n; i++)
		if (!strcmp(os->v[i].path, copy))
			obj = &os->v[i];
	cr_assert_not_null(obj, "%s not mapped", copy);
	cr_assert(obj->deleted);
	cr_assert_eq(object_open(os, obj), 0);
	cr_assert_str_eq(obj->via, "map_files");
	cr_assert_eq(obj->bias, l_addr);
	cr_assert_eq(object_lookup(os, obj, "elf_dynonly_visible", 0, &s), 0);
	cr_assert_eq(s.addr, l_addr + r->value);
	cr_assert_eq(s.source, SYMSRC_DYNSYM);
	cr_assert_eq(objects_symbolize(os, l_addr + r->value + 1, &s), 0);
	cr_assert_str_eq(s.name, "elf_dynonly_visible");
	cr_assert_eq(s.offset, 1);
	/* The hidden function is stripped: its address has no name, only
	 * the object and offset. */
	cr_assert_eq(object_lookup(os, obj, "elf_dynonly_hidden", 0, &s),
		     -ENOENT);
	ref_fixture("elf-work/libelf-dynonly.full.so", lib, sizeof(lib));
	ref_symbols(lib, ".symtab", &full);
	h = ref_find(&full, "elf_dynonly_hidden");
	cr_assert_not_null(h);
	if (!ref_covers(&dyn, h->value + 1)) {
		cr_assert_eq(objects_symbolize(os, l_addr + h->value + 1, &s),
			     0);
		cr_assert_null(s.name, "stripped function named %s", s.name);
		cr_assert_eq(s.obj, obj);
		cr_assert_eq(s.offset, h->value + 1);
	}
	ref_tab_free(&full);
	objects_free(os);
	maps_free(m);
	ref_tab_free(&dyn);
	cr_assert(fixture_healthy(&fx[0], why, sizeof(why)), "%s", why);
}

/* glibc's malloc.c exports, by name, for the span test below. */
static bool malloc_c_member(const char *name, void *arg)
{
	static const char *const v[] = {
		"malloc", "free", "cfree", "calloc", "realloc", "memalign",
		"aligned_alloc", "valloc", "pvalloc", "posix_memalign",
		"malloc_trim", "malloc_usable_size", "mallinfo", "mallinfo2",
		"malloc_stats", "mallopt", "malloc_info", "reallocarray",
		"__default_morecore", "malloc_get_state", "malloc_set_state",
	};
	size_t i;

	(void)arg;
	if (!strncmp(name, "__libc_", 7))
		name += 7;
	else if (!strncmp(name, "__", 2))
		name += 2;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (!strcmp(name, v[i]))
			return true;
	return false;
}

static uint64_t value_of(struct elfobj *o, const char *name)
{
	struct elfsym s;

	cr_assert_eq(elfobj_lookup(o, name, ELFSYM_DYNAMIC_ONLY, &s), 0,
		     "no %s", name);
	return s.value;
}

/* The span of malloc() is malloc.c: its other exports are inside it,
 * another file's functions are not; too far to look gives -ERANGE. */
Test(elf, span_of_malloc_in_libc)
{
	struct elfobj *o = open_obj(LIBC);
	uint64_t m = value_of(o, "malloc"), lo, hi, rlo, rhi;
	const char *inside[] = { "free", "calloc", "realloc", "malloc_info",
				 "malloc_trim", "posix_memalign" };
	size_t i;

	cr_assert_eq(elfobj_span(o, m, malloc_c_member, NULL, 256 * 1024,
				 &lo, &hi), 0);
	cr_assert(lo <= m && m < hi);
	cr_assert_lt(hi - lo, 256 * 1024, "span of 0x%" PRIx64 " bytes",
		     hi - lo);
	for (i = 0; i < sizeof(inside) / sizeof(inside[0]); i++) {
		uint64_t v = value_of(o, inside[i]);

		cr_assert(v >= lo && v < hi, "%s at 0x%" PRIx64 " is outside "
			  "[0x%" PRIx64 ", 0x%" PRIx64 ")", inside[i], v, lo,
			  hi);
	}
	for (i = 0; i < 2; i++) {
		uint64_t v = value_of(o, i ? "read" : "fopen");

		cr_assert(v < lo || v >= hi, "0x%" PRIx64 " is inside", v);
	}
	/* Any exported function is a border without a member test. */
	cr_assert_eq(elfobj_span(o, value_of(o, "read"), NULL, NULL,
				 256 * 1024, &rlo, &rhi), 0);
	cr_assert(rlo <= value_of(o, "read") && rhi - rlo < 4096);
	cr_assert_eq(elfobj_span(o, m, malloc_c_member, NULL, 16, &lo, &hi),
		     -ERANGE);
	elfobj_close(o);
}

/*
 * arm64's layout: the vDSO (its signal trampoline) lands in the gap
 * between ld.so's text and data.  The object spans both; its text, which
 * the fences hold, is the r-x mapping alone.
 */
Test(elf, object_text_leaves_out_the_vdso_in_its_gap)
{
	static const char text[] =
		"ffff9b730000-ffff9b757000 r-xp 00000000 fe:01 1234 "
		"/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1\n"
		"ffff9b76a000-ffff9b76c000 r--p 00000000 00:00 0 [vvar]\n"
		"ffff9b76c000-ffff9b76d000 r-xp 00000000 00:00 0 [vdso]\n"
		"ffff9b76d000-ffff9b76f000 r--p 0002d000 fe:01 1234 "
		"/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1\n"
		"ffff9b76f000-ffff9b771000 rw-p 0002f000 fe:01 1234 "
		"/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1\n"
		"ffff9b780000-ffff9b781000 rw-p 00000000 fe:01 99 /data\n";
	struct object_source src = { .root_fd = -1 };
	struct objects *os;
	struct maps *m;

	cr_assert_eq(maps_parse_buf(text, sizeof(text) - 1, &m), 0);
	cr_assert_eq(objects_new(m, &src, &os), 0);
	cr_assert_eq(os->n, 2);
	cr_assert_eq(os->v[0].lo, 0xffff9b730000ull);
	cr_assert_eq(os->v[0].hi, 0xffff9b771000ull);
	cr_assert(os->v[0].exec);
	cr_assert_eq(os->v[0].text_lo, 0xffff9b730000ull);
	cr_assert_eq(os->v[0].text_hi, 0xffff9b757000ull,
		     "text ends at 0x%" PRIx64, os->v[0].text_hi);
	/* no executable mapping: no text */
	cr_assert(!os->v[1].exec);
	cr_assert_eq(os->v[1].text_hi, 0);
	objects_free(os);
	maps_free(m);
}
