/*
 * Allocator wrappers (profile/wrappers.h): the built-in list, the
 * user's patterns, and what each name was found to be.
 */
#include "profile/wrappers.h"
#include "profile/report_internal.h"

#include "common/util.h"

#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Each an extended regular expression matching a whole name.  What a
 * wrapper is here: a function whose callers, not itself, say which
 * code holds the bytes.  Arena and pool allocators of a program (a
 * MEM_ROOT, a memory context) are among them: the site is the code
 * that asked the arena.
 */
const char *const wrappers_builtin[] = {
	/* Redis, KeyDB, Valkey: zmalloc.c */
	"z(try)?(malloc|calloc|realloc)[a-z_]*", "zstrdup",
	/* MariaDB, MySQL: mysys */
	"my_(malloc|realloc|strdup|strndup|memdup|once_alloc)",
	"my_multi_malloc(_large)?", "my_internal_malloc",
	"(multi_)?alloc_root",
	/* PostgreSQL: mcxt.c and the contexts behind it */
	"palloc(0|_extended|_aligned)?", "repalloc(0|_extended|_huge)?",
	"MemoryContextAlloc[A-Za-z]*", "MemoryContextStrdup",
	"AllocSet[A-Za-z]*", "(Generation|Slab|Bump)(Alloc|Realloc)[A-Za-z]*",
	"p(n)?strdup",
	/* glib */
	"g_(try_)?(malloc|realloc)0?(_n)?", "g_slice_alloc0?", "g_strn?dup",
	"g_memdup2?",
	/* gnulib, OpenSSH, git and the like */
	"x(malloc|calloc|realloc|zalloc|strdup|strndup|memdup|reallocarray)",
	"xmallocz(_gently)?",
	/* C++ */
	"operator new.*", "std::allocator<.*>::allocate.*",
	"(__gnu_cxx::new_allocator|std::__new_allocator)<.*>::allocate.*",
	"std::allocator_traits<.*>::allocate.*",
	/* Rust */
	"__(rust|rdl|rg)_(alloc|alloc_zeroed|realloc)", "alloc::alloc::.*",
	"alloc::raw_vec::.*",
	"<alloc::alloc::Global as core::alloc::Allocator>::.*",
	/* CPython */
	"_?PyMem_.*", "_?PyObject_(Malloc|Calloc|Realloc)",
	"pymalloc_(alloc|realloc)",
	NULL,
};

struct wrappers {
	regex_t *re;		/* the built-in patterns, then the user's */
	size_t n;
	struct strmap names;	/* names met so far */
	signed char *is;	/* by id: a wrapper's */
	size_t cap;
};

int wrappers_new(const char *const *extra, size_t n, struct wrappers **out,
		 char *why, size_t why_size)
{
	struct wrappers *w = calloc(1, sizeof(*w));
	size_t nb = 0, i;

	*out = NULL;
	if (why_size)
		why[0] = '\0';
	while (wrappers_builtin[nb])
		nb++;
	if (w)
		w->re = calloc(nb + n, sizeof(*w->re));
	if (!w || !w->re) {
		free(w);
		return -ENOMEM;
	}
	for (i = 0; i < nb + n; i++) {
		const char *p = i < nb ? wrappers_builtin[i] : extra[i - nb];
		struct sbuf b = { 0 };
		int err;

		/* anchored: the whole name */
		if (sbuf_addf(&b, "^(%s)$", p)) {
			wrappers_free(w);
			return -ENOMEM;
		}
		err = regcomp(&w->re[i], b.s, REG_EXTENDED | REG_NOSUB);
		free(b.s);
		if (err) {
			char msg[128];

			regerror(err, NULL, msg, sizeof(msg));
			snprintf(why, why_size, "'%s': %s", p, msg);
			wrappers_free(w);
			return err == REG_ESPACE ? -ENOMEM : -EINVAL;
		}
		w->n++;
	}
	*out = w;
	return 0;
}

void wrappers_free(struct wrappers *w)
{
	size_t i;

	if (!w)
		return;
	for (i = 0; i < w->n; i++)
		regfree(&w->re[i]);
	free(w->re);
	strmap_free(&w->names);
	free(w->is);
	free(w);
}

static bool matches(const struct wrappers *w, const char *name)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (!regexec(&w->re[i], name, 0, NULL, 0))
			return true;
	return false;
}

bool wrappers_match(struct wrappers *w, const char *name, size_t len)
{
	char buf[WRAPPER_NAME_MAX];
	size_t id, old;
	bool added;

	if (!w || !len || len >= sizeof(buf) || memchr(name, '\0', len))
		return false;
	memcpy(buf, name, len);
	buf[len] = '\0';
	if (strmap_get(&w->names, buf, &id, &added))
		return matches(w, buf);
	old = w->cap;
	if (id >= w->cap && !array_grow((void **)&w->is, &w->cap, id + 1,
					sizeof(*w->is)))
		memset(w->is + old, -1, w->cap - old);
	/* -1: not known yet (or no room to remember it: matched again) */
	if (id < w->cap && w->is[id] < 0)
		w->is[id] = (signed char)matches(w, buf);
	return id < w->cap ? w->is[id] > 0 : matches(w, buf);
}
