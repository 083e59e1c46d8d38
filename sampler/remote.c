/*
 * Memory in the target for the sampler (sampler/internal.h): mmap()
 * through its libc (the raw call in a program linked statically),
 * mprotect() and madvise(), all in the borrowed thread.  Its loading (sampler.c) and
 * its entry-point stubs (direct.c) both map and protect with these;
 * and what it holds there once loaded, for explain (sampler_memory()).
 */
#include "sampler/internal.h"

#include "allocators/allocator.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>

int sampler_mmap(struct alloc_session *s, uint64_t hint, uint64_t len,
		 uint64_t flags, uint64_t *out)
{
	uint64_t fn = alloc_bound_symbol(s, "mmap");
	uint64_t args[6] = { hint, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | flags,
			     (uint64_t)-1, 0 };
	uint64_t ret;
	int rc;

	if (fn) {
		rc = inject_check_syscall(alloc_inject(s), SYS_mmap, args, 5);
		if (!rc)
			rc = alloc_call(s, fn, args, 6, &ret);
	} else {
		/* a program linked statically binds no mmap: the raw call,
		 * whose fd and offset are both the helper's fifth argument
		 * (0; an anonymous mapping ignores the fd) */
		int64_t r;

		args[4] = 0;
		rc = inject_syscall(alloc_inject(s), SYS_mmap, args, 5, &r);
		ret = (uint64_t)r;
	}
	if (rc)
		return rc;
	if (ret == (uint64_t)MAP_FAILED || !ret || ret % page_size()) {
		return alloc_fail(s, -ENOMEM, DIAG_FAILED,
				  "mmap of %" PRIu64 " bytes in the target failed",
				  len);
	}
	*out = ret;
	return 0;
}

/* System call @nr with @addr, @len and @arg in the borrowed thread:
 * 0, its -errno, or the engine's error. */
static int syscall3(struct alloc_session *s, long nr, uint64_t addr,
		    uint64_t len, uint64_t arg)
{
	uint64_t args[3] = { addr, len, arg };
	int64_t ret;
	int rc = inject_syscall(alloc_inject(s), nr, args, 3, &ret);

	return rc ? rc : ret ? (int)ret : 0;
}

int sampler_mprotect(struct alloc_session *s, uint64_t addr, uint64_t len,
		     uint64_t prot)
{
	return syscall3(s, SYS_mprotect, addr, len, prot);
}

int sampler_madvise(struct alloc_session *s, uint64_t addr, uint64_t len,
		    uint64_t advice)
{
	return syscall3(s, SYS_madvise, addr, len, advice);
}

size_t sampler_memory(const struct sampler_status *st,
		      uint64_t lo[SAMPLER_RANGES], uint64_t hi[SAMPLER_RANGES])
{
	size_t n = 0;

	if (!st->image)
		return 0;
	lo[n] = st->image;
	hi[n++] = st->image + SAMPLER_IMAGE_LEN;
	if (st->table && st->table_len &&
	    st->table <= UINT64_MAX - st->table_len) {
		lo[n] = st->table;
		hi[n++] = st->table + st->table_len;
	}
	if (st->patch_page && st->patch_page_len &&
	    st->patch_page <= UINT64_MAX - st->patch_page_len) {
		lo[n] = st->patch_page;
		hi[n++] = st->patch_page + st->patch_page_len;
	}
	return n;
}
