/*
 * jump_shim: the floor of any hook reached through a GOT slot.  Loaded
 * with LD_PRELOAD, its malloc, free, calloc and realloc do nothing but
 * jump on to the next definition (libc's, or a preloaded allocator's):
 * one more indirect jump per call, the least a hook can add, and the
 * part of a sampler's cost no hook can avoid.  bench/sampler.sh runs
 * malloc_bench with it beside memsnap's sampler.
 *
 *   cc -O2 -shared -fPIC -o jump_shim.so bench/jump_shim.c -ldl
 *
 * Each function is a test of one pointer and a sibling call through
 * it: at -O2 a load, a branch never taken and a jump.  The pointers are
 * set at the first call, by dlsym(): a constructor would be too late,
 * since the dynamic linker allocates before any runs, and that first
 * call comes before the program's threads exist.  glibc's dlsym() does
 * not allocate for a name it finds (ls, python3 and redis-server run
 * with the shim preloaded, on glibc's malloc and on jemalloc's).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN void *(*next_malloc)(size_t);
HIDDEN void (*next_free)(void *);
HIDDEN void *(*next_calloc)(size_t, size_t);
HIDDEN void *(*next_realloc)(void *, size_t);

__attribute__((noinline, cold)) static void find_next(void)
{
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
}

void *malloc(size_t n)
{
	if (__builtin_expect(!next_malloc, 0))
		find_next();
	return next_malloc(n);
}

void free(void *p)
{
	if (__builtin_expect(!next_free, 0))
		find_next();
	next_free(p);
}

void *calloc(size_t n, size_t size)
{
	if (__builtin_expect(!next_calloc, 0))
		find_next();
	return next_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	if (__builtin_expect(!next_realloc, 0))
		find_next();
	return next_realloc(p, n);
}
