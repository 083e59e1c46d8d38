/*
 * glibc malloc: malloc_info() XML and mallinfo2() for `stats`,
 * malloc_trim(0) for `trim`, a few mallinfo2() numbers for `info`.
 *
 * malloc_info() writes to a FILE *, so the target makes one for the
 * capture file (fdopen) and closes it again (fclose frees it and its
 * buffer): nothing is left behind, nothing reaches its stdout/stderr.
 * malloc_stats() would print to the target's stderr: never used.
 * allocators/glibc_parse.c reads the XML into a table.
 */
#include "allocators/allocator_internal.h"

#include "proc/procfs.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

/* struct mallinfo2 (glibc 2.33+): ten size_t, returned through a hidden
 * pointer (the first argument register). */
struct mallinfo2_raw {
	uint64_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks,
		uordblks, fordblks, keepcost;
};

static const char *const mallinfo_cols[] = {
	"arena",    "ordblks",	"smblks",   "hblks",	"hblkhd",
	"usmblks", "fsmblks", "uordblks", "fordblks", "keepcost", NULL,
};
#define MALLINFO_BYTES 0x3f1u	/* all but ordblks, smblks, hblks */

static int mallinfo2(struct alloc_session *s, const struct allocator *a,
		     struct mallinfo2_raw *mi)
{
	/* struct mallinfo2 mallinfo2(void): returned in memory */
	struct inject_call c = { .nbufs = 1, .sret_buf = 1 };
	struct inject_result r;

	c.fn = alloc_func_addr(a, "mallinfo2");
	if (!c.fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "mallinfo2 not found (glibc older than 2.33)");
	memset(mi, 0, sizeof(*mi));
	c.bufs[0] = (struct inject_buf){ .out = mi, .len = sizeof(*mi) };
	return inject_call(alloc_inject(s), &c, &r);
}

int glibc_mallinfo2_used(struct alloc_session *s, const struct allocator *a,
			 uint64_t *in_use, uint64_t *free)
{
	struct mallinfo2_raw mi;
	int rc = mallinfo2(s, a, &mi);

	if (rc)
		return rc;
	*in_use = mi.uordblks + mi.hblkhd;
	*free = mi.fordblks;
	return 0;
}

static int gl_state(struct alloc_session *s, const struct allocator *a,
		    struct alloc_state *st)
{
	uint64_t fn = alloc_symbol(s, a, "gnu_get_libc_version", false);
	struct mallinfo2_raw mi;
	struct alloc_item *it;
	int rc = alloc_state_version(s, st, fn, NULL, 0);

	if (rc)
		return rc;
	rc = mallinfo2(s, a, &mi);
	if (rc == -EOPNOTSUPP)
		return 0;
	if (rc)
		return rc;
	if ((it = alloc_state_add(st, "mallinfo2.arena", ALLOC_ITEM_BYTES)))
		it->u = mi.arena;
	if ((it = alloc_state_add(st, "mallinfo2.hblkhd", ALLOC_ITEM_BYTES)))
		it->u = mi.hblkhd;
	if ((it = alloc_state_add(st, "mallinfo2.uordblks", ALLOC_ITEM_BYTES)))
		it->u = mi.uordblks;
	if ((it = alloc_state_add(st, "mallinfo2.fordblks", ALLOC_ITEM_BYTES)))
		it->u = mi.fordblks;
	if ((it = alloc_state_add(st, "mallinfo2.keepcost", ALLOC_ITEM_BYTES)))
		it->u = mi.keepcost;
	return 0;
}

/*
 * malloc_info(0, fp) into the capture file, fp = fdopen(fd, "w").  Both
 * calls go through a chain (see capture_call()), so that if memsnap
 * gives up waiting, the target still closes what it was given when the
 * call ends: fp, or the descriptor if fdopen() failed.
 */
static int malloc_info_xml(struct alloc_session *s, const struct allocator *a,
			   struct dumpdir *dir, struct alloc_stats *st)
{
	uint64_t info = alloc_func_addr(a, "malloc_info");
	uint64_t fdopen_fn = alloc_symbol(s, a, "fdopen", false);
	uint64_t fclose_fn = alloc_symbol(s, a, "fclose", false);
	uint64_t sys_fn = inject_helper(alloc_inject(s), INJECT_HELPER_SYSCALL);
	uint64_t ret = 0, fp = 0;
	int fd, rc, rc2;

	if (!info || !fdopen_fn || !fclose_fn)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "%s not found in the target",
				  !info ? "malloc_info" : "fdopen or fclose");
	rc = capture_begin(s, dir, "malloc_info.xml", &fd);
	if (rc)
		return rc;
	rc = alloc_chain(s, &(struct inject_chain){
				 .fn = fdopen_fn, .a0 = (uint64_t)fd,
				 .nz_fn = fclose_fn,
				 .z_fn = sys_fn, .z_a0 = SYS_close,
				 .t_a1 = (uint64_t)fd,
				 .flags = INJECT_CHAIN_NZ_GETS_RET,
			 }, "w", 1, &fp);
	if (rc && rc != -EFAULT)
		return rc; /* given up on: the chain cleans up */
	if (rc || !fp) {
		rc2 = capture_end(s, dir, fd, false, &st->raw, &st->raw_len);
		if (!rc) {
			rc = alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
					"fdopen() failed in the target");
		}
		return rc ? rc : rc2;
	}
	rc = alloc_chain(s, &(struct inject_chain){
				 .fn = info, .a0 = 0, .a1 = fp,
				 .nz_fn = fclose_fn, .nz_a0 = fp,
				 .z_fn = fclose_fn, .z_a0 = fp,
				 .flags = INJECT_CHAIN_ALWAYS,
			 }, NULL, 0, &ret);
	if (rc == -EFAULT) {
		/* A fault in malloc_info: the FILE is still ours to free. */
		alloc_call(s, fclose_fn, &fp, 1, NULL);
		return rc;
	}
	if (rc)
		return rc;
	rc = capture_end(s, dir, fd, true, &st->raw, &st->raw_len);
	if (rc)
		return rc;
	if ((int)(uint32_t)ret != 0)
		return alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				  "malloc_info() failed in the target");
	return 0;
}

static int gl_stats(struct alloc_session *s, const struct allocator *a,
		    struct dumpdir *dir, enum alloc_stats_form form,
		    struct alloc_stats *st)
{
	struct alloc_stat_table *t;
	struct alloc_stat_row *row;
	struct mallinfo2_raw mi;
	const uint64_t *v = &mi.arena;
	size_t i;
	int rc;

	rc = malloc_info_xml(s, a, dir, st);
	if (rc)
		return rc;
	st->raw_format = "xml";
	st->source = "malloc_info(0, fp) + mallinfo2()";
	rc = glibc_parse_malloc_info(st->raw, st->raw_len, st);
	if (rc) {
		if (rc == -ENOMEM)
			return rc;
		return alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				  "malloc_info() wrote no XML memsnap understands");
	}
	rc = mallinfo2(s, a, &mi);
	if (rc == -EOPNOTSUPP) {
		rc = 0;
	} else if (!rc) {
		t = stats_table(st, "mallinfo2", mallinfo_cols, MALLINFO_BYTES);
		row = stats_row(t, "process");
		if (!row)
			return -ENOMEM;
		for (i = 0; mallinfo_cols[i]; i++)
			stats_set(t, row, mallinfo_cols[i], v[i]);
	}
	if (form == ALLOC_STATS_TABLES) {
		free(st->raw);
		st->raw = NULL;
		st->raw_len = 0;
	}
	return rc;
}

static int gl_trim(struct alloc_session *s, const struct allocator *a,
		   struct alloc_trim_result *res)
{
	uint64_t arg = 0, ret = 0;
	int rc;

	res->how = "malloc_trim(0)";
	rc = alloc_call(s, alloc_func_addr(a, "malloc_trim"), &arg, 1, &ret);
	if (rc == -EOPNOTSUPP)
		alloc_fail(s, rc, DIAG_UNSUPPORTED, "malloc_trim not found");
	if (rc)
		return rc;
	res->have_released = true;
	res->released = (int)(uint32_t)ret != 0;
	return 0;
}

const struct alloc_backend glibc_backend = {
	.caps = ALLOC_CAN_STATE | ALLOC_CAN_STATS | ALLOC_CAN_TRIM,
	.state = gl_state,
	.stats = gl_stats,
	.trim = gl_trim,
};
