/*
 * mimalloc: `stats` is mi_stats_print_out(out, arg) captured here, `trim`
 * is mi_collect(true), `info` shows mi_version().  mimalloc has no heap
 * profiler.
 *
 * mi_stats_print_out's callback is (msg, arg), the reverse of
 * jemalloc's; memsnap's write helper has an entry for that order
 * (INJECT_HELPER_WRITE_CB_MSG_FIRST), and arg is the target's
 * descriptor of the capture file; allocators/mimalloc_parse.c reads
 * the text into tables.
 */
#include "allocators/allocator_internal.h"

#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mi_stats(struct alloc_session *s, const struct allocator *a,
		    struct dumpdir *dir, enum alloc_stats_form form,
		    struct alloc_stats *st)
{
	uint64_t fn = alloc_func_addr(a, "mi_stats_print_out");
	int fd, rc, rc2;

	if (!fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "mi_stats_print_out not found");
	rc = capture_begin(s, dir, "mi_stats.txt", &fd);
	if (rc)
		return rc;
	rc = capture_call(s, fd, fn,
			  inject_helper(alloc_inject(s),
					INJECT_HELPER_WRITE_CB_MSG_FIRST),
			  (uint64_t)fd, NULL);
	/*
	 * The chain closed the descriptor, or will when the call ends
	 * (timeout).  Only a fault inside fn kept it from closing; any
	 * other failure: it may have closed, and the number may be the
	 * target's own again, so memsnap must not close it.
	 */
	if (rc && rc != -EFAULT)
		return rc;
	rc2 = capture_end(s, dir, fd, !rc, &st->raw, &st->raw_len);
	if (rc || rc2)
		return rc ? rc : rc2;
	st->raw_format = "text";
	st->source = "mi_stats_print_out()";
	rc = mimalloc_parse_stats(st->raw, st->raw_len, st);
	if (rc) {
		if (rc == -ENOMEM)
			return rc;
		return alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				  "mi_stats_print_out() printed nothing memsnap understands");
	}
	if (form == ALLOC_STATS_TABLES) {
		free(st->raw);
		st->raw = NULL;
		st->raw_len = 0;
	}
	return 0;
}

static int mi_trim(struct alloc_session *s, const struct allocator *a,
		   struct alloc_trim_result *res)
{
	uint64_t force = 1;

	res->how = "mi_collect(true)";
	return alloc_call(s, alloc_func_addr(a, "mi_collect"), &force, 1, NULL);
}

static int mi_state(struct alloc_session *s, const struct allocator *a,
		    struct alloc_state *st)
{
	struct alloc_item *it = alloc_state_add(st, "version", ALLOC_ITEM_STR);
	uint64_t v = 0;
	int rc;

	if (!it)
		return 0;
	rc = alloc_call(s, alloc_func_addr(a, "mi_version"), NULL, 0, &v);
	if (rc == -EOPNOTSUPP) {
		it->err = -ENOENT;
		return 0;
	}
	if (rc)
		return rc;
	/* 209 is 2.0.9 */
	v = (uint32_t)v;
	snprintf(it->s, sizeof(it->s), "%u.%u.%u", (unsigned int)(v / 100),
		 (unsigned int)(v / 10 % 10), (unsigned int)(v % 10));
	return 0;
}

const struct alloc_backend mimalloc_backend = {
	.caps = ALLOC_CAN_STATE | ALLOC_CAN_STATS | ALLOC_CAN_TRIM,
	.state = mi_state,
	.stats = mi_stats,
	.trim = mi_trim,
};
