/*
 * symbols/opener.h: the symbolizer gets every file of a dump through
 * its opener, and only through it: the objects of the maps (objects.c),
 * the copies libdwfl maps (symbolizer.c) and the debuginfo candidates
 * (debuginfo.c).  In report's sandbox that opener asks memsnap; here a
 * recording one wraps memsnap's own (opener_local_new()), and a
 * refusing one shows that nothing is read any other way.
 *
 * The dump is tests/data/profiles/chain-3.heap, its program at
 * root/prof/prof-chain (with DWARF), its system libraries missing.
 */
#include "symbols/opener.h"

#include "common/fsio.h"
#include "profile/profile.h"
#include "symbols/symbolizer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATHS_MAX 64

struct record {
	struct opener pub;
	struct opener *inner;	/* NULL: refuse every file */
	char *paths[PATHS_MAX];
	unsigned int hows[PATHS_MAX];
	size_t npaths, steadies, asks;
};

static int rec_open(struct opener *op, const char *path, unsigned int how,
		    struct stat *st)
{
	struct record *r = op->arg;

	if (r->npaths < PATHS_MAX) {
		r->hows[r->npaths] = how;
		r->paths[r->npaths++] = strdup(path);
	}
	return r->inner ? r->inner->open(r->inner, path, how, st) : -EACCES;
}

static int rec_steady(struct opener *op, int fd, uint64_t max)
{
	struct record *r = op->arg;

	r->steadies++;
	return r->inner->steady(r->inner, fd, max);
}

static int rec_debuginfod(struct opener *op, const unsigned char *id,
			  size_t len)
{
	struct record *r = op->arg;

	(void)id;
	(void)len;
	r->asks++;
	return -ENOENT;
}

static void record_init(struct record *r, bool refuse)
{
	const char *td = getenv("MEMSNAP_TESTDATA");
	char root[PATH_MAX];

	cr_assert_not_null(td, "MEMSNAP_TESTDATA is not set");
	memset(r, 0, sizeof(*r));
	r->pub = (struct opener){ .open = rec_open, .steady = rec_steady,
				  .debuginfod = rec_debuginfod, .arg = r };
	if (refuse)
		return;
	snprintf(root, sizeof(root), "%s/profiles/root", td);
	cr_assert_eq(opener_local_new(root, &r->inner), 0);
}

static void record_free(struct record *r)
{
	size_t i;

	for (i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	opener_local_free(r->inner);
}

static bool opened(const struct record *r, const char *path,
		   unsigned int how)
{
	size_t i;

	for (i = 0; i < r->npaths; i++)
		if (!strcmp(r->paths[i], path) && r->hows[i] == how)
			return true;
	return false;
}

static struct profile *chain(void)
{
	const char *td = getenv("MEMSNAP_TESTDATA");
	char path[PATH_MAX], why[256];
	struct profile *p;

	cr_assert_not_null(td, "MEMSNAP_TESTDATA is not set");
	snprintf(path, sizeof(path), "%s/profiles/chain-3.heap", td);
	cr_assert_eq(profile_load(path, &p, why, sizeof(why)), 0, "%s", why);
	return p;
}

/* The module of @path in @s. */
static const struct dwsym_module *module(struct symbolizer *s,
					 const char *path)
{
	const struct dwsym_module *m;
	size_t n = symbolizer_modules(s, &m), i;

	for (i = 0; i < n; i++)
		if (!strcmp(m[i].path, path))
			return &m[i];
	cr_assert_fail("no module %s", path);
	return NULL;
}

/* malloc's return address into f2 (chain-3.heap's first stack). */
#define IN_F2 0x56333595132full

Test(opener, every_file_comes_through_the_opener)
{
	struct profile *p = chain();
	const struct dwsym_loc *l;
	struct symbolizer *s;
	struct record r;
	size_t i;

	record_init(&r, false);
	cr_assert_eq(symbolizer_new_with(p->maps, "/the-root", &r.pub, &s), 0);
	cr_assert_eq(symbolizer_lookup(s, IN_F2, true, &l), 0);
	cr_assert(l->frames[0].resolved, "%s", l->frames[0].name);
	cr_assert_str_eq(l->frames[0].name, "f2");
	cr_assert(module(s, "/prof/prof-chain")->debuginfo);
	/* the object, by its maps path, no symlink followed; the copy
	 * libdwfl maps; the missing libraries asked for too */
	cr_assert(opened(&r, "/prof/prof-chain", FSIO_NO_SYMLINKS));
	cr_assert(opened(&r, "/usr/lib/x86_64-linux-gnu/libc.so.6",
			 FSIO_NO_SYMLINKS));
	cr_assert_geq(r.steadies, 1);
	for (i = 0; i < r.npaths; i++)
		cr_assert_eq(r.paths[i][0], '/', "%s", r.paths[i]);
	symbolizer_free(s);
	record_free(&r);
	profile_free(p);
}

/* An opener that gives nothing: every object is the opener's error, so
 * none was read by another way; names degrade to object+0xoffset. */
Test(opener, nothing_is_read_without_it)
{
	struct profile *p = chain();
	const struct dwsym_module *m;
	const struct dwsym_loc *l;
	struct symbolizer *s;
	struct record r;
	size_t n, i;

	record_init(&r, true);
	cr_assert_eq(symbolizer_new_with(p->maps, NULL, &r.pub, &s), 0);
	cr_assert_eq(symbolizer_lookup(s, IN_F2, true, &l), 0);
	cr_assert_not(l->frames[0].resolved);
	cr_assert_str_eq(l->frames[0].name, "prof-chain+0x132e");
	n = symbolizer_modules(s, &m);
	for (i = 0; i < n; i++)
		cr_assert(m[i].err == -EACCES || m[i].err == -ENOEXEC,
			  "%s: %s", m[i].path, strerror(-m[i].err));
	cr_assert(opened(&r, "/prof/prof-chain", FSIO_NO_SYMLINKS));
	cr_assert_eq(r.steadies, 0);
	symbolizer_free(s);
	record_free(&r);
	profile_free(p);
}
