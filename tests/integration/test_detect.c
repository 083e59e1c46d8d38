/*
 * Allocator detection on live fixtures (tests/fixtures/elf.mk): the
 * library call detect_allocators() and `memsnap --pid N info --json`
 * must agree with an independent reading -- /proc/PID/maps parsed here,
 * the load bias from readelf -l, symbol values from readelf -s -- on the
 * kind, prefix, object, table and address of every function, and on who
 * serves malloc.  Then the hard cases: a library deleted or replaced on
 * disk after it was mapped, and a process in another mount namespace.
 * Every fixture is proven healthy afterwards.
 */
#include "symbols/detect.h"
#include "proc/maps.h"
#include "symbols/objects.h"
#include "tests/lib/elf_ref.h"
#include "tests/lib/fixture.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIBC LIBDIR "libc.so.6"
#define LIBJEMALLOC LIBDIR "libjemalloc.so.2"
#define EXE "@exe" /* the fixture itself */
#define NOCAPS "/usr/bin/setpriv", "--bounding-set=-all", "--inh-caps=-all"

static struct fixture fx = { .pid = -1 };
static char tmpdir[64];

static void cleanup(void)
{
	fixture_stop(&fx);
	scratch_cleanup(tmpdir);
}

/* In /tmp itself, whatever $TMPDIR, and 0755: open to a target and a
 * memsnap without capabilities. */
static void make_tmpdir(void)
{
	int rc = scratch_make("/tmp/memsnap-detect", tmpdir, sizeof(tmpdir));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(tmpdir, 0755), 0);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[3 * PATH_MAX];
	char *out;

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	out = ref_shell(cmd);
	free(out);
}

/* ---- a small JSON reader (what info --json prints) ---------------------- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype t;
	char *key;
	char *s;	/* J_STR, J_NUM text */
	bool b;
	struct jv *kids;
	size_t n;
};

static const char *jws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *jstr(const char *p, char **out)
{
	size_t cap = 64, n = 0;
	char *s = malloc(cap);

	cr_assert_not_null(s);
	if (*p++ != '"')
		return NULL;
	while (*p && *p != '"') {
		char c = *p++;

		if (c == '\\') {
			c = *p++;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'u') {
				/* Only ASCII escapes are expected here. */
				c = (char)strtol((char[5]){ p[0], p[1], p[2],
							    p[3], 0 },
						 NULL, 16);
				p += 4;
			}
		}
		if (n + 2 > cap) {
			cap *= 2;
			s = realloc(s, cap);
			cr_assert_not_null(s);
		}
		s[n++] = c;
	}
	if (*p != '"') {
		free(s);
		return NULL;
	}
	s[n] = '\0';
	*out = s;
	return p + 1;
}

static const char *jparse(const char *p, struct jv *v)
{
	p = jws(p);
	memset(v, 0, sizeof(*v));
	if (*p == '{' || *p == '[') {
		bool obj = *p == '{';
		char close = obj ? '}' : ']';

		v->t = obj ? J_OBJ : J_ARR;
		p = jws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			struct jv kid;
			char *key = NULL;

			p = jws(p);
			if (obj) {
				p = jstr(p, &key);
				if (!p)
					return NULL;
				p = jws(p);
				if (*p++ != ':')
					return NULL;
			}
			p = jparse(p, &kid);
			if (!p)
				return NULL;
			kid.key = key;
			v->kids = realloc(v->kids, (v->n + 1) * sizeof(kid));
			cr_assert_not_null(v->kids);
			v->kids[v->n++] = kid;
			p = jws(p);
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p != close)
				return NULL;
			return p + 1;
		}
	}
	if (*p == '"') {
		v->t = J_STR;
		return jstr(p, &v->s);
	}
	if (!strncmp(p, "null", 4)) {
		v->t = J_NULL;
		return p + 4;
	}
	if (!strncmp(p, "true", 4) || !strncmp(p, "false", 5)) {
		v->t = J_BOOL;
		v->b = *p == 't';
		return p + (v->b ? 4 : 5);
	}
	if (*p == '-' || (*p >= '0' && *p <= '9')) {
		size_t n = strspn(p, "-+0123456789.eE");

		v->t = J_NUM;
		v->s = strndup(p, n);
		return p + n;
	}
	return NULL;
}

static void jfree(struct jv *v)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		jfree(&v->kids[i]);
	free(v->kids);
	free(v->key);
	free(v->s);
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	size_t i;

	if (!o || o->t != J_OBJ)
		return NULL;
	for (i = 0; i < o->n; i++)
		if (!strcmp(o->kids[i].key, key))
			return &o->kids[i];
	return NULL;
}

static const char *jgets(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->t == J_STR ? v->s : NULL;
}

/* ---- the independent view ----------------------------------------------- */

/*
 * The lowest offset-0 mapping of @path in /proc/@pid/maps (a " (deleted)"
 * suffix ignored), and from it and readelf -l of @elf (the same contents)
 * the load bias.
 */
static uint64_t ref_bias(pid_t pid, const char *path, const char *elf)
{
	char mpath[64], line[8192];
	uint64_t best = 0, off[16], va[16];
	FILE *f;

	snprintf(mpath, sizeof(mpath), "/proc/%d/maps", (int)pid);
	f = fopen(mpath, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, offset;
		size_t len;
		char *p;

		line[strcspn(line, "\n")] = '\0';
		p = strchr(line, '/');
		if (!p)
			continue;
		len = strlen(p);
		if (len > 10 && !strcmp(p + len - 10, " (deleted)"))
			p[len - 10] = '\0';
		if (strcmp(p, path) ||
		    sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64,
			   &start, &end, &offset) != 3 || offset)
			continue;
		if (!best || start < best)
			best = start;
	}
	fclose(f);
	cr_assert_neq(best, 0, "%s not mapped in %d", path, (int)pid);
	cr_assert_geq(ref_loads(elf, off, va, 16), 1);
	return best - (va[0] & ~0xfffull);
}

/* st_value of @name in table @table of @elf (".gnu_debugdata": the
 * .symtab inside it). */
static uint64_t ref_value(const char *elf, const char *name,
			  const char *table)
{
	char dd[PATH_MAX];
	const struct ref_sym *s;
	struct ref_tab t;
	uint64_t v;
	bool mini = !strcmp(table, ".gnu_debugdata");

	if (mini) {
		ref_debugdata(elf, dd, sizeof(dd));
		ref_symbols(dd, ".symtab", &t);
	} else {
		ref_symbols(elf, table, &t);
	}
	s = ref_find(&t, name);
	cr_assert_not_null(s, "readelf: no %s in %s of %s", name, table, elf);
	v = s->value;
	ref_tab_free(&t);
	if (mini)
		ref_debugdata_remove(dd);
	return v;
}

/* ---- expectations ------------------------------------------------------- */

struct want_alloc {
	const char *kind, *prefix;
	const char *object; /* EXE or a path */
	const char *table;  /* where its functions are */
	bool serves;
	const char *elf;    /* read symbols here (default: object) */
};

struct want {
	const char *malloc_object; /* EXE, a path, or NULL: unknown */
	const char *malloc_table;
	const char *malloc_elf;
	struct want_alloc a[3];
	size_t n;
};

static const char *const source_name[] = {
	[SYMSRC_DYNSYM] = ".dynsym",
	[SYMSRC_SYMTAB] = ".symtab",
	[SYMSRC_DEBUGDATA] = ".gnu_debugdata",
};

static const char *resolve(const char *object, const char *exe)
{
	return !strcmp(object, EXE) ? exe : object;
}

/* detect_allocators() on @pid against @w. */
static void check_library(pid_t pid, const char *exe, const struct want *w,
			  const char *via)
{
	struct object_source src = { .pid = pid };
	struct objects *os;
	struct detection d;
	struct maps *m;
	size_t i, j;

	cr_assert_eq(maps_load(pid, &m), 0);
	cr_assert_eq(objects_new(m, &src, &os), 0);
	cr_assert_eq(detect_allocators(os, &d), 0);
	cr_assert_eq(d.n, w->n, "%zu allocators found, want %zu", d.n, w->n);
	for (i = 0; i < w->n; i++) {
		const struct want_alloc *wa = &w->a[i];
		const char *path = resolve(wa->object, exe);
		const char *elf = wa->elf ? wa->elf : path;
		const struct allocator *a = NULL;
		uint64_t bias = ref_bias(pid, path, elf);

		for (j = 0; j < d.n; j++)
			if (!strcmp(alloc_kind_name(d.v[j].kind), wa->kind) &&
			    !strcmp(d.v[j].prefix, wa->prefix))
				a = &d.v[j];
		cr_assert_not_null(a, "no %s with prefix '%s'", wa->kind,
				   wa->prefix);
		cr_assert_str_eq(a->obj->path, path);
		cr_assert_eq(a->serves_malloc, wa->serves, "%s serves: %d",
			     wa->kind, a->serves_malloc);
		cr_assert_eq(a->obj->bias, bias);
		if (via)
			cr_assert_str_eq(a->obj->via, via);
		if (!strcmp(wa->kind, "jemalloc")) {
			cr_assert_not_null(allocator_func(a, "mallctl"));
			cr_assert_not_null(allocator_func(a, "mallctlnametomib"));
			cr_assert_not_null(allocator_func(a,
							  "malloc_stats_print"));
		}
		for (j = 0; j < a->nfuncs; j++) {
			const struct alloc_func *f = &a->funcs[j];
			char name[128];
			uint64_t want;

			snprintf(name, sizeof(name), "%s%s", wa->prefix,
				 f->role);
			cr_assert(f->found, "%s not found", name);
			want = bias + ref_value(elf, name, wa->table);
			cr_assert_eq(f->addr, want,
				     "%s at 0x%" PRIx64 ", want 0x%" PRIx64,
				     name, f->addr, want);
			cr_assert_str_eq(source_name[f->source], wa->table,
					 "%s", name);
		}
	}
	if (w->malloc_object) {
		const char *path = resolve(w->malloc_object, exe);
		const char *elf = w->malloc_elf ? w->malloc_elf : path;

		cr_assert(d.have_malloc);
		cr_assert_str_eq(d.malloc_sym.obj->path, path);
		cr_assert_eq(d.malloc_sym.addr,
			     ref_bias(pid, path, elf) +
				     ref_value(elf, "malloc", w->malloc_table));
	} else {
		cr_assert_not(d.have_malloc, "malloc claimed in %s",
			      d.malloc_sym.obj->path);
	}
	detection_free(&d);
	objects_free(os);
	maps_free(m);
}

/* memsnap --pid N info --json (through @wrap, e.g. setpriv, if given). */
static void check_cli(pid_t pid, const char *exe, const struct want *w,
		      const char *via, const char *wrap)
{
	char pidstr[16], cmd[PATH_MAX * 2];
	const char *args[] = { "--pid", pidstr, "info", "--json", NULL };
	const struct jv *allocs, *mal;
	struct jv root;
	struct run r;
	size_t i, j;

	snprintf(pidstr, sizeof(pidstr), "%d", (int)pid);
	if (wrap) {
		const char *bin = getenv("MEMSNAP_BIN");

		snprintf(cmd, sizeof(cmd), "%s '%s' --pid %d info --json",
			 wrap, bin ? bin : "./memsnap", (int)pid);
		cr_assert_eq(run_shell(&r, cmd), 0);
	} else {
		cr_assert_eq(run_memsnap(&r, args), 0);
	}
	cr_assert_eq(r.status, w->n ? 0 : 5, "exit %d: %s", r.status, r.err);
	cr_assert_not_null(jparse(r.out, &root), "bad JSON: %s", r.out);
	allocs = jget(&root, "allocators");
	cr_assert(allocs && allocs->t == J_ARR);
	cr_assert_eq(allocs->n, w->n, "%s", r.out);
	for (i = 0; i < w->n; i++) {
		const struct want_alloc *wa = &w->a[i];
		const char *path = resolve(wa->object, exe);
		const char *elf = wa->elf ? wa->elf : path;
		const struct jv *a = NULL, *obj, *fns, *sv;
		uint64_t bias = ref_bias(pid, path, elf);

		for (j = 0; j < allocs->n; j++)
			if (!strcmp(jgets(&allocs->kids[j], "kind"),
				    wa->kind) &&
			    !strcmp(jgets(&allocs->kids[j], "prefix"),
				    wa->prefix))
				a = &allocs->kids[j];
		cr_assert_not_null(a, "no %s '%s' in %s", wa->kind,
				   wa->prefix, r.out);
		sv = jget(a, "serves_malloc");
		cr_assert(sv && sv->t == J_BOOL && sv->b == wa->serves);
		obj = jget(a, "object");
		cr_assert_str_eq(jgets(obj, "path"), path);
		if (via)
			cr_assert_str_eq(jgets(obj, "opened_via"), via);
		fns = jget(a, "functions");
		cr_assert(fns && fns->t == J_OBJ && fns->n >= 3);
		for (j = 0; j < fns->n; j++) {
			const struct jv *f = &fns->kids[j];
			char name[128], hex[32];

			snprintf(name, sizeof(name), "%s%s", wa->prefix,
				 f->key);
			cr_assert_eq(f->t, J_OBJ, "%s missing", name);
			cr_assert_str_eq(jgets(f, "symbol"), name);
			cr_assert_str_eq(jgets(f, "table"), wa->table);
			snprintf(hex, sizeof(hex), "0x%" PRIx64,
				 bias + ref_value(elf, name, wa->table));
			cr_assert_str_eq(jgets(f, "address"), hex, "%s", name);
		}
	}
	mal = jget(&root, "malloc");
	cr_assert_not_null(mal);
	if (w->malloc_object) {
		const struct want_alloc *srv = NULL;

		for (i = 0; i < w->n; i++)
			if (w->a[i].serves)
				srv = &w->a[i];
		cr_assert_eq(mal->t, J_OBJ);
		cr_assert_str_eq(jgets(mal, "object"),
				 resolve(w->malloc_object, exe));
		if (srv)
			cr_assert_str_eq(jgets(mal, "allocator"), srv->kind);
	} else {
		cr_assert_eq(mal->t, J_NULL, "%s", r.out);
	}
	/* Decoys never show up, in any form. */
	cr_assert_null(strstr(r.out, "mallctl_int"));
	cr_assert_null(strstr(r.out, "foo_"));
	jfree(&root);
	run_free(&r);
}

static void check_fixture(const char *name, const char *preload,
			  const struct want *w)
{
	char path[PATH_MAX], exe[PATH_MAX], env0[PATH_MAX + 16], why[256];
	char *argv[] = { path, NULL };
	char *env[] = { env0, NULL };
	int rc;

	ref_fixture(name, path, sizeof(path));
	cr_assert_not_null(realpath(path, exe));
	snprintf(env0, sizeof(env0), "LD_PRELOAD=%s", preload ? preload : "");
	rc = fixture_start(&fx, argv, preload ? env : NULL, 10000);
	cr_assert_eq(rc, 0, "%s: %s", name, strerror(-rc));
	check_library(fx.pid, exe, w, "map_files");
	check_cli(fx.pid, exe, w, "map_files", NULL);
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

#define GLIBC_LIB(srv)                                                     \
	{ .kind = "glibc", .prefix = "", .object = LIBC, .table = ".dynsym", \
	  .serves = (srv) }

Test(detect, glibc_alone, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { GLIBC_LIB(true) }, .n = 1,
	};

	check_fixture("elf-glibc", NULL, &w);
}

Test(detect, glibc_minidebuginfo_exe, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { GLIBC_LIB(true) }, .n = 1,
	};

	check_fixture("elf-minidebug", NULL, &w);
}

static const struct want jemalloc_lib = {
	.malloc_object = LIBJEMALLOC, .malloc_table = ".dynsym",
	.a = { { .kind = "jemalloc", .prefix = "", .object = LIBJEMALLOC,
		 .table = ".dynsym", .serves = true },
	       GLIBC_LIB(false) },
	.n = 2,
};

Test(detect, jemalloc_linked, .fini = cleanup)
{
	if (access(LIBJEMALLOC, R_OK))
		cr_skip_test("%s is not installed", LIBJEMALLOC);
	check_fixture("elf-jemalloc", NULL, &jemalloc_lib);
}

Test(detect, jemalloc_preloaded, .fini = cleanup)
{
	if (access(LIBJEMALLOC, R_OK))
		cr_skip_test("%s is not installed", LIBJEMALLOC);
	check_fixture("elf-glibc", LIBJEMALLOC, &jemalloc_lib);
}

Test(detect, static_glibc, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = EXE, .malloc_table = ".symtab",
		.a = { { .kind = "glibc", .prefix = "", .object = EXE,
			 .table = ".symtab", .serves = true } },
		.n = 1,
	};

	check_fixture("elf-static", NULL, &w);
}

#define STATIC_JE(pfx, tab)                                                \
	{ .kind = "jemalloc", .prefix = (pfx), .object = EXE,               \
	  .table = (tab), .serves = false }

/* Redis-like: je_ exported, with mallctl_int, mallctl_string and
 * foo_mallctl beside it; glibc still serves malloc. */
Test(detect, je_prefix_exported_with_decoys, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { STATIC_JE("je_", ".dynsym"), GLIBC_LIB(true) }, .n = 2,
	};

	check_fixture("elf-je", NULL, &w);
}

Test(detect, rjem_prefix_symtab_only, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { STATIC_JE("_rjem_", ".symtab"), GLIBC_LIB(true) },
		.n = 2,
	};

	check_fixture("elf-rjem", NULL, &w);
}

Test(detect, rjem_prefix_minidebuginfo, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { STATIC_JE("_rjem_", ".gnu_debugdata"),
		       GLIBC_LIB(true) },
		.n = 2,
	};

	check_fixture("elf-rjem-mini", NULL, &w);
}

Test(detect, custom_prefix_non_pie, .fini = cleanup)
{
	const struct want w = {
		.malloc_object = LIBC, .malloc_table = ".dynsym",
		.a = { STATIC_JE("myapp_", ".dynsym"), GLIBC_LIB(true) },
		.n = 2,
	};

	check_fixture("elf-myapp", NULL, &w);
}

/* ---- deleted, replaced, another mount namespace -------------------------- */

/* elf-glibc with a private copy of libjemalloc preloaded from @copy,
 * started through @wrap (argv words before the fixture) if given. */
static void start_with_copy(const char *copy, const char *const *wrap,
			    size_t nwrap)
{
	char path[PATH_MAX], env0[PATH_MAX + 16];
	char *argv[8], *env[] = { env0, NULL };
	size_t i;
	int rc;

	if (access(LIBJEMALLOC, R_OK))
		cr_skip_test("%s is not installed", LIBJEMALLOC);
	ref_fixture("elf-glibc", path, sizeof(path));
	for (i = 0; i < nwrap; i++)
		argv[i] = (char *)wrap[i];
	argv[i++] = path;
	argv[i] = NULL;
	snprintf(env0, sizeof(env0), "LD_PRELOAD=%s", copy);
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "fixture: %s", strerror(-rc));
}

static struct want copy_want(const char *copy)
{
	struct want w = {
		.malloc_object = copy, .malloc_table = ".dynsym",
		.malloc_elf = LIBJEMALLOC,
		.a = { { .kind = "jemalloc", .prefix = "", .object = copy,
			 .table = ".dynsym", .serves = true,
			 .elf = LIBJEMALLOC },
		       GLIBC_LIB(false) },
		.n = 2,
	};

	return w;
}

Test(detect, deleted_library_read_through_map_files, .fini = cleanup)
{
	char copy[PATH_MAX], why[256];
	struct want w;
	struct run r;
	const char *args[] = { "--pid", NULL, "info", "--json", NULL };
	char pidstr[16];

	make_tmpdir();
	snprintf(copy, sizeof(copy), "%s/libjemalloc-copy.so.2", tmpdir);
	copy_file(LIBJEMALLOC, copy);
	start_with_copy(copy, NULL, 0);
	cr_assert_eq(unlink(copy), 0);
	w = copy_want(copy);
	check_library(fx.pid, NULL, &w, "map_files");
	check_cli(fx.pid, NULL, &w, "map_files", NULL);
	/* And the output says it is deleted. */
	snprintf(pidstr, sizeof(pidstr), "%d", (int)fx.pid);
	args[1] = pidstr;
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_not_null(strstr(r.out, "\"deleted\": true"), "%s", r.out);
	run_free(&r);
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

Test(detect, replaced_library_not_read_from_disk, .fini = cleanup)
{
	char copy[PATH_MAX], other[PATH_MAX], why[256];
	struct want w;

	make_tmpdir();
	snprintf(copy, sizeof(copy), "%s/libjemalloc.so.2", tmpdir);
	snprintf(other, sizeof(other), "%s/other.so", tmpdir);
	copy_file(LIBJEMALLOC, copy);
	start_with_copy(copy, NULL, 0);
	/* Another library now sits at the mapped path. */
	copy_file(LIBC, other);
	cr_assert_eq(rename(other, copy), 0);
	w = copy_want(copy);
	check_library(fx.pid, NULL, &w, "map_files");
	check_cli(fx.pid, NULL, &w, "map_files", NULL);
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

/*
 * Without CAP_SYS_ADMIN /proc/PID/map_files is closed, and memsnap must
 * go by the path in the target's root and check it is the mapped file.
 * Target and memsnap both run as root without capabilities.
 */
static bool map_files_closed(pid_t pid)
{
	char cmd[256];
	struct run r;
	bool closed;

	snprintf(cmd, sizeof(cmd),
		 "setpriv --bounding-set=-all --inh-caps=-all sh -c 'ls /proc/%d/map_files/ | head -1 | (read m && test -n \"$m\" && cat /proc/%d/map_files/$m > /dev/null)'",
		 (int)pid, (int)pid);
	cr_assert_eq(run_shell(&r, cmd), 0);
	closed = r.status != 0;
	run_free(&r);
	return closed;
}

Test(detect, replaced_library_without_map_files, .fini = cleanup)
{
	static const char *const nocaps[] = { NOCAPS };
	const char *wrap = "setpriv --bounding-set=-all --inh-caps=-all";
	char copy[PATH_MAX], other[PATH_MAX], why[256];
	struct want w;

	if (geteuid() != 0)
		cr_skip_test("needs root to drop capabilities selectively");
	if (access("/usr/bin/setpriv", X_OK))
		cr_skip_test("setpriv (util-linux) is not installed");
	make_tmpdir();
	snprintf(copy, sizeof(copy), "%s/libjemalloc.so.2", tmpdir);
	snprintf(other, sizeof(other), "%s/other.so", tmpdir);
	copy_file(LIBJEMALLOC, copy);
	start_with_copy(copy, nocaps, 3);
	if (!map_files_closed(fx.pid))
		cr_skip_test("map_files readable without capabilities here");
	w = copy_want(copy);

	/* The same bytes under a new inode: the build-id in the target's
	 * memory matches the file, so it is used. */
	copy_file(LIBJEMALLOC, other);
	cr_assert_eq(rename(other, copy), 0);
	check_cli(fx.pid, NULL, &w, "root", wrap);

	/* A different library at that path: never read as if mapped.  No
	 * jemalloc is reported, and malloc is not blamed on glibc. */
	copy_file(LIBC, other);
	cr_assert_eq(rename(other, copy), 0);
	w = (struct want){ .malloc_object = NULL, .a = { GLIBC_LIB(false) },
			   .n = 1 };
	check_cli(fx.pid, NULL, &w, "root", wrap);
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}

Test(detect, other_mount_namespace, .fini = cleanup)
{
	char script[4 * PATH_MAX], lib[PATH_MAX], path[PATH_MAX], why[256];
	char *argv[] = { (char *)"/usr/bin/unshare", (char *)"-m",
			 (char *)"--propagation", (char *)"private",
			 (char *)"/bin/sh", (char *)"-c", script, NULL };
	const char *wrap = "setpriv --bounding-set=-all --inh-caps=-all";
	struct want w;
	int rc;

	if (geteuid() != 0)
		cr_skip_test("needs root for unshare -m and mount");
	if (access("/usr/bin/unshare", X_OK) ||
	    access("/usr/bin/setpriv", X_OK))
		cr_skip_test("unshare/setpriv (util-linux) not installed");
	if (access(LIBJEMALLOC, R_OK))
		cr_skip_test("%s is not installed", LIBJEMALLOC);
	ref_fixture("elf-glibc", path, sizeof(path));
	make_tmpdir();
	snprintf(lib, sizeof(lib), "%s/libjemalloc.so.2", tmpdir);
	/* Here, a decoy at that path; in the target's namespace, a tmpfs
	 * over the directory with the real library. */
	copy_file(LIBC, lib);
	snprintf(script, sizeof(script),
		 "mount -t tmpfs memsnap-test '%s' && cp '%s' '%s' && LD_PRELOAD='%s' exec setpriv --bounding-set=-all --inh-caps=-all '%s'",
		 tmpdir, LIBJEMALLOC, lib, lib, path);
	rc = fixture_start(&fx, argv, NULL, 10000);
	if (rc)
		cr_skip_test("cannot start in a new mount namespace: %s",
			     strerror(-rc));
	w = copy_want(lib);
	/* As root: map_files. */
	check_library(fx.pid, NULL, &w, "map_files");
	check_cli(fx.pid, NULL, &w, "map_files", NULL);
	/* Without capabilities: the target's root, not our decoy. */
	if (map_files_closed(fx.pid))
		check_cli(fx.pid, NULL, &w, "root", wrap);
	else
		fprintf(stderr, "detect: map_files open without "
			"capabilities: the /proc/PID/root path was not "
			"exercised\n");
	cr_assert(fixture_healthy(&fx, why, sizeof(why)), "%s", why);
}
