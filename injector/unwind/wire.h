#ifndef MEMSNAP_INJECTOR_UNWIND_WIRE_H
#define MEMSNAP_INJECTOR_UNWIND_WIRE_H

/*
 * Between memsnap's side of the sandboxed unwinder (unwind.c) and the
 * child (unwind_child.c): the messages of the wire described at the
 * top of unwind.c, their bounds, and the child's state.
 */
#include "injector/arch.h"
#include "injector/mapline.h"
#include "injector/unwind.h"
#include "injector/unwind/core.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FRAMES_MAX 256
#define STACK_MAX (64u << 10)
/* unwinds a JOBS message holds, and their stacks' bytes at most (a
 * message must fit the socket's buffer, 208 KiB by default) */
#define JOBS_MAX 16
#define JOBS_BYTES (128u << 10)
#define MAPS_CHUNK 1024u
#define MAPS_MAX (1u << 20)

enum uw_type { UW_MAPS = 1, UW_JOBS, UW_PAGE, UW_WANT, UW_DONE };

/* MAPS: each chunk with the extra range and the objects whose
 * .eh_frame has no header (neh of eh[]), which the last chunk sets */
struct uw_maps {
	uint32_t type, first, count, total;
	struct unwind_code extra;
	uint32_t neh, pad;
	struct unwind_ehframe eh[UNWIND_EHFRAMES];
	struct mapline v[];
};

/* JOBS: a uw_head, then each job followed by its stack_len bytes */
struct uw_head {
	uint32_t type, count;
};

struct uw_job {
	uint32_t max;
	uint16_t saved, flags;	/* flags: UW_JOB_* */
	uint64_t stack_lo, stack_len, budget;
	struct arch_unw_regs regs;
};

struct uw_page {
	uint32_t type;
	int32_t ok;
	uint64_t addr;
	unsigned char data[UNWIND_PAGE];
};

/* WANT: index 1, a page of an .eh_frame for its table (the first
 * unwind that needs it pays no budget of its own for it) */
struct uw_want {
	uint32_t type, index;
	uint64_t addr;
};

/* A saved stack's frames judged for CFI as a live thread's are. */
#define UW_JOB_CFI 1
/* The words of the stack copy the unwind read, a bitmap of
 * TOUCHED_BYTES after the result's frames. */
#define UW_JOB_TOUCHED 2
#define TOUCHED_BYTES (STACK_MAX / 64)

/* DONE: a uw_head, then each result followed by its frames (and, for
 * a job with UW_JOB_TOUCHED, its bitmap) */
struct uw_result {
	int32_t rc;		/* frames, or -errno */
	uint32_t whole;
	uint64_t reads;
};

#define MSG_MAX (sizeof(struct uw_head) + \
		 JOBS_MAX * sizeof(struct uw_job) + JOBS_BYTES)
#define DONE_MAX (sizeof(struct uw_head) + \
		  JOBS_MAX * (sizeof(struct uw_result) + \
			      FRAMES_MAX * sizeof(uint64_t) + TOUCHED_BYTES))

/* The child's state: what memsnap sent it, and its unwinder. */
struct uw_child {
	int fd;
	struct unwind_core *core;
	struct mapline *maps;
	uint32_t nmaps;
	unsigned char *out;	/* DONE_MAX */
	uint64_t touched[TOUCHED_BYTES / 8];
};

/* One message out: 0, or -EPIPE when it did not go whole. */
int uw_send(int fd, const void *buf, size_t len);
/* One message in: its length, 0 at the end, or -1. */
ssize_t uw_recv(int fd, void *buf, size_t len);

/* The child's start-up, before its filter (sandbox_start()'s prepare),
 * and its loop until memsnap is done (its serve). */
int uw_child_prepare(void *arg);
int uw_child_serve(int fd, void *arg);

#endif
