/*
 * `memsnap info` on a real Debian redis-server (linked with Debian's
 * libjemalloc.so.2).  Every address memsnap prints is computed again
 * here, independently: the load address from /proc/PID/maps, the
 * link-time address from nm, the first segment from readelf.
 */
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

/* The path and lowest start address of the object mapped as @needle. */
static uint64_t map_base(pid_t pid, const char *needle, char *path,
			 size_t size)
{
	char name[64], line[4096];
	uint64_t best = 0;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "re");
	cr_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, off;
		char *p = strchr(line, '/');

		if (!p || !strstr(p, needle) ||
		    sscanf(line, "%llx-%*x %*s %llx", &start, &off) != 2)
			continue;
		if (off == 0 && (!best || start < best)) {
			best = start;
			p[strcspn(p, "\n")] = '\0';
			snprintf(path, size, "%s", p);
		}
	}
	fclose(f);
	cr_assert(best, "%s is not mapped in pid %d", needle, (int)pid);
	return best;
}

/* Run @cmd and parse the first hex number of its output. */
static uint64_t shell_hex(const char *cmd)
{
	struct run r;
	uint64_t v;

	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	cr_assert_eq(sscanf(r.out, "%" SCNx64, &v), 1, "%s: '%s'", cmd, r.out);
	run_free(&r);
	return v;
}

/* base - page_down(first PT_LOAD vaddr) + nm value. */
static uint64_t expected(pid_t pid, const char *lib, const char *sym)
{
	char path[512], cmd[1200];
	uint64_t base = map_base(pid, lib, path, sizeof(path));
	uint64_t vaddr, value;

	snprintf(cmd, sizeof(cmd),
		 "readelf -lW '%s' | awk '$1 == \"LOAD\" { print $3; exit }'",
		 path);
	vaddr = shell_hex(cmd);
	snprintf(cmd, sizeof(cmd),
		 "nm -D --defined-only '%s' | awk '$3 == \"%s\" || index($3, \"%s@\") == 1 { print $1; exit }'",
		 path, sym, sym);
	value = shell_hex(cmd);
	return base - (vaddr & ~(uint64_t)4095) + value;
}

static void expect_address(const char *json, const char *role, uint64_t want)
{
	char key[64], hex[32];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\": {", role);
	p = strstr(json, key);
	cr_assert(p != NULL, "no %s in %s", role, json);
	p = strstr(p, "\"address\": \"");
	cr_assert(p != NULL);
	snprintf(hex, sizeof(hex), "0x%" PRIx64 "\"", want);
	cr_expect(!strncmp(p + strlen("\"address\": \""), hex, strlen(hex)),
		  "%s: want %s got %.24s", role, hex,
		  p + strlen("\"address\": \""));
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
	expect_address(r.out, "mallctl",
		       expected(rd.pid, "libjemalloc.so", "mallctl"));
	expect_address(r.out, "mallctlnametomib",
		       expected(rd.pid, "libjemalloc.so", "mallctlnametomib"));
	expect_address(r.out, "malloc_stats_print",
		       expected(rd.pid, "libjemalloc.so", "malloc_stats_print"));
	expect_address(r.out, "malloc_info",
		       expected(rd.pid, "libc.so", "malloc_info"));
	expect_address(r.out, "malloc_trim",
		       expected(rd.pid, "libc.so", "malloc_trim"));
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
