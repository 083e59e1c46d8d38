#ifndef MEMSNAP_SAMPLER_INTERNAL_H
#define MEMSNAP_SAMPLER_INTERNAL_H

/*
 * Between the host side's files of sampler/: find.c (finding), sampler.c
 * (loading, switching), got.c (the GOT slots chosen in the stop),
 * prepare.c (what is resolved before the stop),
 * direct.c (entry points of an allocator linked into the program),
 * remote.c, hook_table.c and dump.c.
 */
#include "sampler/sampler.h"
#include "sampler/layout.h"
#include "sampler-offsets.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct alloc_session;
struct allocator;
struct detection;
struct maps;
struct object;
struct objects;
struct patch_plan;

#define CODE_LEN SAMPLER_OFF_sampler_code_end
/* The whole mapping: code, the gap, the control block. */
#define SAMPLER_IMAGE_LEN SAMPLER_OFF_sampler_image_end

/* Records per table: at least, at most (sampler_read_ctl() refuses
 * any other geometry). */
#define NRECS_MIN (1u << 14)
#define NRECS_MAX (1u << 21)

/* The control block's head: everything before the slot log. */
#define CTL_HEAD offsetof(struct sampler_ctl, log)

/* A hooked function: its name (as a GOT slot's symbol, and unprefixed
 * as an allocator defines it), its index, its hooks' offsets in the
 * image (GOT family, direct family, guarded direct: 0 for none). */
struct sampler_hook {
	const char *name;
	enum sampler_fn fn;
	uint64_t off, direct_off, guarded_off;
	bool cxx;		/* hooked only where the allocator defines it */
};

extern const struct sampler_hook sampler_hooks[];
extern const size_t sampler_nhooks;

/* mmap() in the target through its libc, near @hint (0: anywhere);
 * @flags added to MAP_PRIVATE | MAP_ANONYMOUS, read-write (remote.c). */
int sampler_mmap(struct alloc_session *s, uint64_t hint, uint64_t len,
		 uint64_t flags, uint64_t *out);
/* mprotect() in the target (a raw system call). */
int sampler_mprotect(struct alloc_session *s, uint64_t addr, uint64_t len,
		     uint64_t prot);
/* madvise() in the target (a raw system call). */
int sampler_madvise(struct alloc_session *s, uint64_t addr, uint64_t len,
		    uint64_t advice);

/* A function of an allocator linked into the program, found (and its
 * body read) before any thread is stopped, to be patched in the stop. */
struct sampler_entry {
	const struct sampler_hook *h;
	uint64_t addr, size;
	char name[ALLOC_MAX_PREFIX + SAMPLER_NAME_MAX];
	unsigned char *code;	/* its body, read */
	int err;		/* why not */
	bool related;		/* calls another, or is called by one */
};

/* A GOT slot that may reach a hooked function: read and swapped in the
 * stop if it does. */
struct sampler_got {
	uint64_t slot;
	struct object *obj;
	const struct sampler_hook *h;
	bool plt;		/* a PLT slot: lazy binding may point it
				 * into its own object */
};

/* What sampler_prepare() resolves before any thread is stopped. */
struct sampler_prep {
	uint64_t bound[SAMPLER_NFN];	/* each hooked function as bound */
	bool cxx;			/* operator new and delete hooked */
	const struct allocator *linked;	/* in the program, or NULL */
	struct sampler_entry entries[SAMPLER_MAXPATCH];
	size_t nentries;
	struct sampler_got *got;
	size_t ngot, cap;
	/* stacks a sample copies in place (sampler/stack_bounds.c) */
	uint64_t main_lo, main_hi, block_off;
};

/* The main thread's stack and the offset of a thread's stack mapping
 * in its control block, learned from process @pid, into @p. */
void sampler_stack_bounds(pid_t pid, struct objects *os,
			  const struct maps *maps, struct sampler_prep *p);

/*
 * The offsets at which @w (@n words read at @at, the top of a thread
 * stack mapping [@block, @block + @size)) holds @block and @size, from
 * a control block (two words, the first and the third, that hold its
 * address): at most @max into @offs; their number.
 */
uint64_t sampler_block_offsets(const uint64_t *w, size_t n, uint64_t at,
			       uint64_t block, uint64_t size, uint64_t *offs,
			       size_t max);

/*
 * The same where the thread pointer is the end of a control block of
 * @pthread_size bytes that holds a tid of @tids (@ntids, sorted) at
 * @tid_off (AArch64's glibc): the offsets, from the thread pointer
 * (below it: negative), at which @block and @size are.
 */
uint64_t sampler_block_offsets_tid(const uint64_t *w, size_t n,
				   uint64_t block, uint64_t size,
				   uint32_t pthread_size, uint32_t tid_off,
				   const pid_t *tids, size_t ntids,
				   uint64_t *offs, size_t max);

/* The allocator the program in @os has linked into itself (found in
 * @det), or NULL. */
const struct allocator *sampler_linked_allocator(struct objects *os,
						 const struct detection *det);

/* The malloc family as the linked allocator @a defines it, found in
 * @os and read from process @pid, into p->entries. */
void sampler_direct_find(struct objects *os, pid_t pid,
			 const struct allocator *a, struct sampler_prep *p);

/*
 * An allocator linked into the program (sampler/direct.c): its entry
 * points planned, to be patched to the direct hooks.  @kind: the
 * allocator in the program (NULL: none); @why: why none or not all of
 * its functions are patched.
 */
struct sampler_direct {
	const char *kind;
	struct patch_plan *plans;
	unsigned int *fns;	/* each plan's enum sampler_fn */
	size_t n;
	uint64_t page, page_len; /* the stubs and trampolines */
	bool logged;		/* from the control block's log */
	char why[512];
};

/* Where @len bytes would lie within a jump of the linked allocator
 * @linked (so that its entry points jump to the hooks directly); 0:
 * anywhere (@linked NULL too). */
uint64_t sampler_near(const struct allocator *linked, const struct maps *maps,
		      uint64_t len);

/*
 * Plan the patches of the program's allocator (@p: found before the
 * stop) into @d, against the sampler at @image: from the log of @c when
 * it holds one (a prof on after prof off), else planned and their stubs
 * and trampolines written near the program.  0 with d->n == 0 and
 * d->why when nothing can be patched; an engine error otherwise.
 */
int sampler_direct_plan(struct alloc_session *s, const struct maps *maps,
			uint64_t image, const struct sampler_ctl *c,
			const struct sampler_prep *p, struct sampler_direct *d);

/* Log @d's plans in the sampler's control block (unless they came from
 * there) and write them, every thread stopped.  *@changed: written. */
int sampler_direct_apply(struct alloc_session *s, uint64_t image,
			 const struct sampler_direct *d,
			 unsigned int *changed);

/* Put back every entry point @c's log says is patched. */
int sampler_direct_undo(struct alloc_session *s, const struct sampler_ctl *c,
			unsigned int *restored);

/* How many of @c's logged entry points hold their jump now. */
unsigned int sampler_direct_count(pid_t pid, const struct sampler_ctl *c);

void sampler_direct_free(struct sampler_direct *d);

/*
 * The hooks' mirrors (mirror.c): for hooked function f, a jump to its
 * hook at at[f], one byte away from of[f], the function its slots hold
 * (0: none).
 */
struct sampler_mirrors {
	uint64_t at[SAMPLER_NFN], of[SAMPLER_NFN];
};

/* The index of the one byte in which @a and @b differ, or -1. */
int sampler_one_byte(uint64_t a, uint64_t b);

/* The @skip-th free place (nearest first) for a copy of [@lo, @hi) in
 * @m that differs from it in byte 4 of every address; 0: none. */
uint64_t sampler_mirror_place(const struct maps *m, uint64_t lo, uint64_t hi,
			      unsigned int skip);

/* Mirrors, mapped and written into the target, for each function
 * @from[f] hooked by @hook[f] that @m has none for yet.  0, or why not
 * all (those made are in @m). */
int sampler_mirrors_make(struct alloc_session *s, const struct maps *maps,
			 const uint64_t *from, const uint64_t *hook,
			 struct sampler_mirrors *m);

/* Forget each mirror of @m (read from a control block) that is not a
 * jump to @hook[f] in @pid's memory. */
void sampler_mirrors_check(pid_t pid, const uint64_t *hook,
			   struct sampler_mirrors *m);

/* A slot of function @fn holding @cur can be swapped to its mirror. */
bool sampler_mirror_of(const struct sampler_mirrors *m, unsigned int fn,
		       uint64_t cur);

/* Slot @slot from @from to @to (one byte apart), by writing that byte:
 * 0; -EAGAIN when it held something else, or does not hold @to after. */
int sampler_poke(struct alloc_session *s, uint64_t slot, uint64_t from,
		 uint64_t to);

/* Every slot of @c's log (at @image) left to memsnap and holding its
 * mirror, back to its function, its entry cleared. */
int sampler_unpoke(struct alloc_session *s, uint64_t image,
		   const struct sampler_ctl *c, unsigned int *restored);

/* GOT slots read on the stopped thread and chosen for a switch-on
 * (got.c), and the mirrors they may be swapped to. */
struct slot_scan {
	struct alloc_session *s;
	const struct maps *maps;
	const struct sampler_prep *p;
	uint64_t image;
	bool can_mprotect;
	struct sampler_slot *v;		/* chosen */
	size_t n, cap;
	struct sampler_start *r;	/* counted there */
	const struct object *counted;	/* the last object counted */
	struct sampler_mirrors m;
};

/* GOT slot @g, read now: chosen (into sc->v) if it reaches the function
 * the process binds (or its object's own lazy-binding stub), counted
 * in sc->r as known, bound elsewhere or read-only otherwise.  0 or
 * -ENOMEM. */
int sampler_scan_slot(struct slot_scan *sc, const struct sampler_got *g);

/*
 * The mirrors of @sc: those an earlier round made, checked, and, where
 * a read-only slot may need one, the missing ones made; into @head for
 * the control block.  Without them the slots go the image's way: an
 * engine error is the only failure.
 */
int sampler_scan_mirrors(struct alloc_session *s, const struct maps *maps,
			 const struct sampler_prep *p,
			 struct sampler_on_args *head, struct slot_scan *sc);

/* The sampler whose code starts at @image (sampler_find() found it; 0:
 * none, -ENOENT), its control block's head read again into @c and @st;
 * -ENODATA (never switched on) is kept; st->entries not counted (a read
 * per entry point, for info alone). */
int sampler_read_at(pid_t pid, uint64_t image, struct sampler_status *st,
		    struct sampler_ctl *c);

/* Read the head of the control block at @ctl of @pid and check it.
 * 0, -ENODATA (all zero: never switched on), -EPROTO, or a read error. */
int sampler_read_ctl(pid_t pid, uint64_t ctl, struct sampler_ctl *c);

#endif
