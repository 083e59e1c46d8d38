/*
 * `memsnap info` on a real Debian redis-server (linked with Debian's
 * libjemalloc.so.2).  Every address memsnap prints is computed again
 * here, independently: the load address from /proc/PID/maps, the
 * link-time address from nm, the first segment from readelf.
 */
#include "../lib/addr.h"
#include "../lib/fixture.h"
#include "../lib/redis.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct redis rd = { .pid = -1 };

static void stop_redis(void)
{
	redis_stop(&rd);
}

static void start_redis(void)
{
	int rc = redis_start(&rd, "prof:true");

	if (rc == -ENOENT)
		cr_skip_test("redis-server is not installed (apt-get install redis-server)");
	cr_assert_eq(rc, 0, "starting redis-server: %s", strerror(-rc));
}

Test(info_redis, addresses_match_nm_and_maps, .fini = stop_redis)
{
	char pid[16], reply[64];
	struct run r;

	start_redis();
	cr_assert_eq(redis_command(&rd, "SET memsnap:key kept", reply,
				   sizeof(reply)), 0);
	cr_assert_str_eq(reply, "+OK");
	snprintf(pid, sizeof(pid), "%d", (int)rd.pid);
	{
		const char *args[] = { "--pid", pid, "--json", "info", NULL };

		cr_assert_eq(run_memsnap(&r, args), 0);
	}
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "\"kind\": \"jemalloc\"") != NULL, "%s", r.out);
	cr_expect(strstr(r.out, "\"allocator\": \"jemalloc\"") != NULL,
		  "jemalloc must serve malloc: %s", r.out);
	addr_expect_json(r.out, "mallctl",
			 addr_expected(rd.pid, "libjemalloc.so", "mallctl", 1));
	addr_expect_json(r.out, "mallctlnametomib",
			 addr_expected(rd.pid, "libjemalloc.so", "mallctlnametomib", 1));
	addr_expect_json(r.out, "malloc_stats_print",
			 addr_expected(rd.pid, "libjemalloc.so", "malloc_stats_print", 1));
	addr_expect_json(r.out, "malloc_info",
			 addr_expected(rd.pid, "libc.so", "malloc_info", 1));
	addr_expect_json(r.out, "malloc_trim",
			 addr_expected(rd.pid, "libc.so", "malloc_trim", 1));
	run_free(&r);

	/* Unharmed: answers and kept its data. */
	cr_assert(redis_alive(&rd));
	cr_assert_eq(redis_command(&rd, "GET memsnap:key", reply,
				   sizeof(reply)), 0);
	cr_assert_str_eq(reply, "kept");
}

Test(info_redis, text_names_the_serving_allocator, .fini = stop_redis)
{
	char pid[16];
	struct run r;

	start_redis();
	snprintf(pid, sizeof(pid), "%d", (int)rd.pid);
	{
		const char *args[] = { "--pid", pid, "info", NULL };

		cr_assert_eq(run_memsnap(&r, args), 0);
	}
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "\njemalloc  [serves malloc]\n") != NULL, "%s",
		  r.out);
	cr_expect(strstr(r.out, "\nglibc malloc\n") != NULL, "%s", r.out);
	cr_expect(strstr(r.out, "threads   ") != NULL);
	run_free(&r);
	cr_assert(redis_alive(&rd));
}
