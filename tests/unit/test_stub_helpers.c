/*
 * The helpers of the stub page (injector/arch/<arch>-stub.S), run here:
 * copied into an executable page of the test process, exactly as
 * memsnap copies them into a target's, and called like the target
 * calls them.
 */
#include "injector/arch.h"
#include "injector/inject.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned char *page;

static void load(void)
{
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(page, MAP_FAILED);
	cr_assert_leq(arch_helpers_len, 4096);
	memcpy(page, arch_helpers_code, arch_helpers_len);
	cr_assert_eq(mprotect(page, 4096, PROT_READ | PROT_EXEC), 0);
}

static void unload(void)
{
	munmap(page, 4096);
}

TestSuite(stub_helpers, .init = load, .fini = unload);

static void *helper(int which)
{
	return page + arch_helper_off[which];
}

/* What the follow-ups saw. */
static int calls;
static uint64_t last_a0, last_a1;

static long fn_ret(long a0, long a1, long a2)
{
	calls++;
	return a0 + a1 + a2;
}

static long then_nz(uint64_t a0, uint64_t a1)
{
	calls += 10;
	last_a0 = a0;
	last_a1 = a1;
	return -1;
}

static long then_z(uint64_t a0, uint64_t a1)
{
	calls += 100;
	last_a0 = a0;
	last_a1 = a1;
	return -1;
}

static long run_chain(struct inject_chain *c)
{
	long (*chain)(struct inject_chain *) =
		(long (*)(struct inject_chain *))helper(ARCH_HELPER_CHAIN);

	calls = 0;
	last_a0 = last_a1 = 0;
	return chain(c);
}

static struct inject_chain chain_of(long a0, long a1, long a2)
{
	return (struct inject_chain){
		.fn = (uint64_t)fn_ret, .a0 = (uint64_t)a0,
		.a1 = (uint64_t)a1, .a2 = (uint64_t)a2,
		.nz_fn = (uint64_t)then_nz, .nz_a0 = 7,
		.z_fn = (uint64_t)then_z, .z_a0 = 8,
		.t_a1 = 9,
	};
}

Test(stub_helpers, chain_runs_no_follow_up_unless_asked)
{
	struct inject_chain c = chain_of(1, 2, 3);

	cr_assert_eq(run_chain(&c), 6);
	cr_assert_eq(calls, 1);
	cr_assert_eq(c.ret, 6);
}

Test(stub_helpers, chain_always_picks_by_result)
{
	struct inject_chain c = chain_of(1, 2, 3);

	c.flags = INJECT_CHAIN_ALWAYS;
	cr_assert_eq(run_chain(&c), 6, "fn's result, not the follow-up's");
	cr_assert_eq(calls, 11);
	cr_assert_eq(last_a0, 7);
	cr_assert_eq(last_a1, 9);

	c = chain_of(1, -1, 0);
	c.flags = INJECT_CHAIN_ALWAYS;
	cr_assert_eq(run_chain(&c), 0);
	cr_assert_eq(calls, 101);
	cr_assert_eq(last_a0, 8);
	cr_assert_eq(last_a1, 9);
}

Test(stub_helpers, chain_abandoned_cleans_up)
{
	struct inject_chain c = chain_of(40, 2, 0);

	c.flags = INJECT_CHAIN_NZ_GETS_RET;
	c.abandoned = 1;
	cr_assert_eq(run_chain(&c), 42);
	cr_assert_eq(calls, 11);
	cr_assert_eq(last_a0, 42, "nz_fn gets the result");

	c = chain_of(0, 0, 0);
	c.flags = INJECT_CHAIN_NZ_GETS_RET;
	c.abandoned = 1;
	cr_assert_eq(run_chain(&c), 0);
	cr_assert_eq(calls, 101);
	cr_assert_eq(last_a0, 8);
}

Test(stub_helpers, chain_without_follow_up_function)
{
	struct inject_chain c = chain_of(1, 1, 1);

	c.nz_fn = 0;
	c.flags = INJECT_CHAIN_ALWAYS;
	cr_assert_eq(run_chain(&c), 3);
	cr_assert_eq(calls, 1);
}

Test(stub_helpers, syscall_and_write_cb)
{
	long (*sys)(long, long, long, long, long, long) =
		(long (*)(long, long, long, long, long, long))helper(
			ARCH_HELPER_SYSCALL);
	void (*cb)(void *, const char *) =
		(void (*)(void *, const char *))helper(ARCH_HELPER_WRITE_CB);
	void (*cb_msg)(const char *, void *) =
		(void (*)(const char *, void *))helper(
			ARCH_HELPER_WRITE_CB_MSG_FIRST);
	char buf[64] = { 0 };
	int p[2];

	cr_assert_eq(sys(SYS_getpid, 0, 0, 0, 0, 0), getpid());
	cr_assert_eq(sys(SYS_close, -1, 0, 0, 0, 0), -EBADF);
	cr_assert_eq(pipe(p), 0);
	cb((void *)(intptr_t)p[1], "one, ");
	cb_msg("two", (void *)(intptr_t)p[1]);
	close(p[1]);
	cr_assert_eq(read(p[0], buf, sizeof(buf) - 1), 8);
	cr_assert_str_eq(buf, "one, two");
	close(p[0]);
}
