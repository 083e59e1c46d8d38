#ifndef MEMSNAP_ALLOCATORS_ALLOCATOR_INTERNAL_H
#define MEMSNAP_ALLOCATORS_ALLOCATOR_INTERNAL_H

#include "allocators/allocator.h"

#include <stdarg.h>

/*
 * Between allocator.c (the session, the dispatch) and the backends.  A
 * backend implements the operations its caps promise; allocator.c checks
 * the caps first, so a NULL op is never called.
 */

struct alloc_session {
	pid_t pid;
	struct objects *os;
	const struct detection *det;
	struct inject_session *inj;
	struct alloc_fence fence;
	int alloc_errno;	/* the allocator's own error, or 0 */
	/* what the failure @err_rc means, named where it happened
	 * (alloc_fail()); alloc_diag() gives it for that rc alone */
	int err_rc;
	struct diag err;
	/* memsnap's descriptor for the memfd a capture goes to, or -1
	 * (capture_begin()) */
	int capture_here;
};

struct alloc_backend {
	unsigned int caps;
	/* the caps @st shows this allocator lacks now (NULL: none) */
	unsigned int (*caps_lacking)(const struct alloc_state *st);
	int (*dump)(struct alloc_session *s, const struct allocator *a,
		    struct dumpdir *dir, int fd, bool *to_fd);
	int (*prof)(struct alloc_session *s, const struct allocator *a,
		    enum alloc_prof_op op, uint64_t arg, struct dumpdir *dir,
		    struct alloc_prof_result *res);
	int (*state)(struct alloc_session *s, const struct allocator *a,
		     struct alloc_state *st);
	int (*stats)(struct alloc_session *s, const struct allocator *a,
		     struct dumpdir *dir, enum alloc_stats_form form,
		     struct alloc_stats *st);
	int (*trim)(struct alloc_session *s, const struct allocator *a,
		    struct alloc_trim_result *res);
};

extern const struct alloc_backend jemalloc_backend;
extern const struct alloc_backend glibc_backend;
extern const struct alloc_backend tcmalloc_backend;
extern const struct alloc_backend tcmalloc_minimal_backend;
extern const struct alloc_backend mimalloc_backend;

/* ---- calls (allocators/backend.c) ------------------------------------------ */

/*
 * A function of the target: @name (with @a's prefix when @prefixed) in
 * @a's object, else through the target's symbol search order (libc's
 * fdopen for glibc's malloc_info).  0 if not found.
 */
uint64_t alloc_symbol(struct alloc_session *s, const struct allocator *a,
		      const char *name, bool prefixed);

/* The definition of @name the dynamic linker binds to: the first in the
 * process's search order (0), or -ENOENT. */
int alloc_bound(struct alloc_session *s, const char *name, struct symbol *out);

/* @a's function @role as found by detection (0: not found). */
uint64_t alloc_func_addr(const struct allocator *a, const char *role);

/* A NUL-ended string of the target at @addr, at most @max bytes, into a
 * malloc'ed buffer (*@out, length *@len).  -EFBIG if longer. */
int alloc_read_string(struct alloc_session *s, uint64_t addr, size_t max,
		      char **out, size_t *len);

/*
 * Capturing what the allocator prints.  The target makes a memfd, which
 * memsnap takes a descriptor for (pidfd_getfd()); where it cannot (its
 * seccomp filters, a kernel before 5.6), it opens @dir's file (named
 * @name) with O_CREAT|O_EXCL|O_NOFOLLOW inside memsnap's private
 * directory, the agent started now if it was deferred.  *@fd is the
 * target's descriptor, to hand to the allocator (as the opaque argument
 * of INJECT_HELPER_WRITE_CB, or to fdopen).  capture_end() closes it in
 * the target (unless @closed: fclose did) and reads what was written
 * into a malloc'ed, NUL-ended buffer.
 */
int capture_begin(struct alloc_session *s, struct dumpdir *dir,
		  const char *name, int *fd);

/* @dir's agent started, if it was deferred, for @what ("the profile")
 * when no memfd would do: 0, or the session's error (no @dir either). */
int capture_dir_start(struct alloc_session *s, struct dumpdir *dir,
		      const char *what);
int capture_end(struct alloc_session *s, struct dumpdir *dir, int fd,
		bool closed, char **out, size_t *len);

/*
 * A memfd of the target's for an allocator that writes a file by name
 * (jemalloc's prof.dump): 0, its name in the target's own view in
 * @path ("/proc/thread-self/fd/N", which the borrowed thread checked it
 * may write with faccessat) and its descriptor there in *@tfd; 1 when
 * that way is closed (no memfd, no /proc in the target's view), with
 * nothing left behind; or the engine's error.  capture_name_end()
 * closes it in the target and, unless @fd is -1, puts memsnap's own
 * descriptor for the memfd at @fd (what the target wrote stays there).
 */
int capture_name_begin(struct alloc_session *s, char *path, size_t size,
		       int *tfd);
int capture_name_end(struct alloc_session *s, int tfd, int fd);

/*
 * Call ch->fn(a0, a1, a2) through INJECT_HELPER_CHAIN, with the
 * follow-up @ch describes (see struct inject_chain).  @str, if not NULL,
 * is placed beside it and its address is argument @str_arg (0..2).
 * fn's result in *@ret (may be NULL).
 */
int alloc_chain(struct alloc_session *s, struct inject_chain *ch,
		const char *str, unsigned int str_arg, uint64_t *ret);

/*
 * @fn(@a0, @a1, @str) (@str: NULL for a two-argument call) through a
 * chain that closes the capture descriptor @fd in the target when fn
 * returns, also when memsnap gave up waiting: then capture_end(..,
 * closed = true).
 */
int capture_call(struct alloc_session *s, int fd, uint64_t fn, uint64_t a0,
		 uint64_t a1, const char *str);


/* glibc's mallinfo2() in one call: in use (uordblks + hblkhd) and
 * free (fordblks); -EOPNOTSUPP before glibc 2.33. */
int glibc_mallinfo2_used(struct alloc_session *s, const struct allocator *a,
			 uint64_t *in_use, uint64_t *free);

/* ---- parsers of what allocators print (the target's bytes) ------------- */

/* malloc_info()'s XML into the table "arenas".  -EINVAL if no <malloc>. */
int glibc_parse_malloc_info(const char *xml, size_t len,
			    struct alloc_stats *st);

/* mi_stats_print_out()'s text into "memory", "counts", "process". */
int mimalloc_parse_stats(const char *text, size_t len, struct alloc_stats *st);

/* Drop the buckets of a gperftools heap profile whose stack holds an
 * address in [@lo, @hi), and fix the header's totals. */
void tcmalloc_drop_own_buckets(char *text, size_t *len, uint64_t lo,
			       uint64_t hi);

/* ---- statistics tables (allocators/stats.c) ---------------------------- */

/* A new table with the columns @cols (NULL-ended; a name ending in
 * "_bytes" is not needed: @bytes_mask bit i marks column i a size). */
struct alloc_stat_table *stats_table(struct alloc_stats *st,
				     const char *name,
				     const char *const *cols,
				     unsigned int bytes_mask);

/* A new row named @fmt...; NULL when out of memory. */
struct alloc_stat_row *stats_row(struct alloc_stat_table *t,
				 const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Set column @col (by name) of @r. */
void stats_set(const struct alloc_stat_table *t, struct alloc_stat_row *r,
	       const char *col, uint64_t v);

/* A tag of what allocators print in XML: malloc_info's longest,
 * <size from=".." to=".." total=".." count=".."/>, is some 80 bytes.
 * Text without a '>' this far from its '<' is not a tag: looking
 * further, for every '<' of a text of them, would cost its square. */
#define XML_TAG_MAX 512

/* Look up an attribute @attr="..." inside the tag that starts at @tag
 * (up to its '>', at most XML_TAG_MAX bytes on), as an unsigned number;
 * -ENOENT or -EINVAL. */
int xml_attr_u64(const char *tag, const char *end, const char *attr,
		 uint64_t *out);

/* What to do about the failure (alloc_diag()'s hint); before or after
 * alloc_fail(), which keeps it. */
void alloc_set_hint(struct alloc_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append an item to @st; NULL when full. */
struct alloc_item *alloc_state_add(struct alloc_state *st, const char *key,
				   enum alloc_item_type type);

/*
 * Item "version" of @st: the string that @fn(@args) returns (a
 * pointer into the target).  A missing function leaves the item
 * unknown (-ENOENT), an unreadable string -EFAULT; 0, or the call's
 * error.
 */
int alloc_state_version(struct alloc_session *s, struct alloc_state *st,
			uint64_t fn, const uint64_t *args, unsigned int nargs);

#endif
