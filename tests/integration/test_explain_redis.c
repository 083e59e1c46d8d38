/*
 * explain on a real Debian redis-server (jemalloc) in states the test
 * makes: 200000 keys written, then three in four deleted.  memsnap's
 * numbers must agree with redis's own INFO memory (used_memory and the
 * allocator_* fields jemalloc gives it), and where MEMORY DOCTOR finds
 * the allocator holding memory (fragmentation, RSS overhead, a past
 * peak), explain must report it as heap_free.  Redis serves every kept
 * key afterwards.
 */
#include "test_explain_lib.h"
#include "../lib/redis.h"
#include "../lib/fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MiB (1024 * 1024LL)
#define KEYS 200000

static struct redis rs = { .pid = -1 };

static void teardown(void)
{
	explain_free_all();
	redis_stop(&rs);
}

TestSuite(explain_redis, .fini = teardown, .timeout = 120);

/* One inline command; the whole reply (a bulk reply's payload, or the
 * status/integer/error line) in @buf. */
static void redis_query(const char *cmd, char *buf, size_t size)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t got = 0, want = 0;
	char *nl;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", rs.socket);
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0,
		     "connect %s: %s", rs.socket, strerror(errno));
	cr_assert_gt(dprintf(fd, "%s\r\n", cmd), 0);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		cr_assert_eq(poll(&p, 1, 60000), 1, "redis: no reply to %.40s",
			     cmd);
		cr_assert_lt(got + 1, size, "reply too long");
		n = read(fd, buf + got, size - 1 - got);
		cr_assert_gt(n, 0, "redis closed the connection");
		got += (size_t)n;
		buf[got] = '\0';
		nl = strstr(buf, "\r\n");
		if (!nl)
			continue;
		if (buf[0] != '$' || buf[1] == '-')	/* "$-1": nil */
			break;
		want = (size_t)(nl - buf) + 2 + strtoull(buf + 1, NULL, 10) + 2;
		if (got >= want)
			break;
	}
	close(fd);
	if (buf[0] == '$' && buf[1] != '-') {
		nl = strstr(buf, "\r\n") + 2;
		memmove(buf, nl, strlen(nl) + 1);
	}
}

/* "name:value" of INFO's text. */
static int64_t info_num(const char *info, const char *name)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s:", name);
	p = strstr(info, pat);
	cr_assert_not_null(p, "no %s in INFO memory", name);
	return strtoll(p + strlen(pat), NULL, 10);
}

static void eval(const char *script)
{
	static char reply[256];
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "EVAL \"%s\" 0", script);
	redis_query(cmd, reply, sizeof(reply));
	cr_assert(reply[0] != '-', "%s: %s", cmd, reply);
}

/* CONFIG SET activedefrag yes: 1 taken, 0 refused (a jemalloc that is
 * not Redis's own); then back off, so the test changes nothing. */
static int config_set_activedefrag(void)
{
	char reply[512];

	redis_query("CONFIG SET activedefrag yes", reply, sizeof(reply));
	if (strncmp(reply, "+OK", 3))
		return 0;
	redis_query("CONFIG SET activedefrag no", reply, sizeof(reply));
	return 1;
}

static void assert_kept_keys(void)
{
	static char reply[1024];
	char cmd[64];
	int i;

	for (i = 4; i <= KEYS; i += 4 * 997) {
		snprintf(cmd, sizeof(cmd), "STRLEN k%d", i);
		redis_query(cmd, reply, sizeof(reply));
		cr_assert_eq(strtol(reply + 1, NULL, 10), 100 + i % 200,
			     "k%d: %s", i, reply);
	}
	cr_assert(redis_alive(&rs));
}

static atomic_bool stop;
static atomic_long pings, failures;

/* A client, one PING at a time, while explain runs: redis must answer
 * every one (explain stops one thread, briefly). */
static void *pinger(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		if (redis_alive(&rs))
			atomic_fetch_add(&pings, 1);
		else
			atomic_fetch_add(&failures, 1);
	}
	return NULL;
}

/*
 * explain's heap agrees with INFO memory read just before and after it:
 * heap_in_use within 5% of used_memory and 2% of allocator_allocated
 * (what jemalloc itself says is allocated) but what explain says of it
 * was jemalloc's own or cached.
 */
static void explain_against_info(struct explain *e, char *info, size_t size)
{
	int64_t lo, hi, used, allocated, allocated0, internal, cached;
	pthread_t t;

	redis_query("INFO memory", info, size);
	used = info_num(info, "used_memory");
	allocated = allocated0 = info_num(info, "allocator_allocated");
	atomic_store(&stop, false);
	atomic_store(&failures, 0);
	cr_assert_eq(pthread_create(&t, NULL, pinger, NULL), 0);
	explain_run(rs.pid, NULL, e, &lo, &hi);
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&failures), 0, "%ld pings failed during explain",
		     atomic_load(&failures));
	explain_assert_sound(e, lo, hi, true);
	cr_assert(redis_alive(&rs));
	cr_assert_str_eq(e->allocator ? e->allocator : "?", "jemalloc", "%s",
			 e->json);
	assert_within_pct(e->part[P_HEAP_IN_USE], used, 5,
			  "heap_in_use against INFO's used_memory", e);
	/* allocator_allocated is stats.allocated, which also holds
	 * jemalloc's own allocations and the blocks its threads' caches
	 * keep: explain counts those as metadata and free, and says how
	 * much they were */
	if (explain_num(e, "account.internal", &internal))
		allocated -= internal;
	if (explain_num(e, "account.tcache_bytes", &cached))
		allocated -= cached;
	assert_within_pct(e->part[P_HEAP_IN_USE], allocated, 2,
			  "heap_in_use against INFO's allocator_allocated "
			  "but jemalloc's internal and cached bytes", e);
	redis_query("INFO memory", info, size);
	cr_assert_leq(llabs(info_num(info, "allocator_allocated") - allocated0),
		      allocated0 / 100, "redis changed under the test");
}

/* MEMORY DOCTOR flags memory the allocator holds (fragmentation, RSS
 * overhead, a past peak)?  Then explain has heap_free; when it has
 * nothing to say, explain has no heap_free either. */
static bool doctor_agrees(const struct explain *e, char *doctor, size_t size)
{
	bool flags;

	redis_query("MEMORY DOCTOR", doctor, size);
	flags = strstr(doctor, "fragmentation") ||
		strstr(doctor, "RSS overhead") || strstr(doctor, "Peak memory");
	if (flags)
		cr_assert_not_null(explain_finding(e, "heap_free"),
				   "MEMORY DOCTOR says:\n%s\nexplain has no "
				   "heap_free:\n%s", doctor, e->json);
	else if (strstr(doctor, "can't find any memory issue"))
		cr_assert_null(explain_finding(e, "heap_free"),
			       "MEMORY DOCTOR finds no issue:\n%s\nexplain "
			       "has heap_free:\n%s", doctor, e->json);
	return flags;
}

Test(explain_redis, fragmented_after_deletes_agrees_with_info_and_doctor)
{
	static char info[16384], doctor[16384];
	const struct explain_finding *f;
	struct explain e;
	int64_t allocated, active, resident;
	char script[256];
	int rc;

	rc = redis_start(&rs, NULL);
	if (rc == -ENOENT)
		cr_skip_test("redis-server is not installed (apt-get install redis-server)");
	cr_assert_eq(rc, 0, "starting redis-server: %s", strerror(-rc));

	/* Written: values of 100..299 bytes, so many size classes. */
	snprintf(script, sizeof(script),
		 "for i=1,%d do redis.call('SET','k'..i,string.rep('x',100 + i %% 200)) end",
		 KEYS);
	eval(script);
	explain_against_info(&e, info, sizeof(info));
	doctor_agrees(&e, doctor, sizeof(doctor));
	explain_assert_text_verdict(rs.pid, &e);
	explain_free(&e);

	/* Three in four deleted: the kept ones pin pages in every slab. */
	snprintf(script, sizeof(script),
		 "for i=1,%d do if i %% 4 ~= 0 then redis.call('DEL','k'..i) end end",
		 KEYS);
	eval(script);
	explain_against_info(&e, info, sizeof(info));
	allocated = info_num(info, "allocator_allocated");
	active = info_num(info, "allocator_active");
	resident = info_num(info, "allocator_resident");

	/* The state this test made is one redis itself complains of. */
	cr_assert(doctor_agrees(&e, doctor, sizeof(doctor)),
		  "MEMORY DOCTOR finds nothing:\n%s", doctor);
	/* What redis calls fragmentation (active - allocated) is memory
	 * the allocator holds: at least that, at most all it has resident
	 * beyond the allocated. */
	f = explain_finding(&e, "heap_free");
	cr_assert(f->bytes >= (active - allocated) * 8 / 10 &&
			  f->bytes <= resident - allocated + MiB,
		  "heap_free %" PRId64 ": INFO has active-allocated %" PRId64
		  ", resident-allocated %" PRId64 "\n%s", f->bytes,
		  active - allocated, resident - allocated, e.json);
	cr_assert_geq(e.part[P_HEAP_FREE], f->bytes, "%s", e.json);
	/* first; a jemalloc built for larger pages than the kernel's
	 * (page_size) is a cause inside it */
	cr_assert_str_eq(e.f[0].id, "heap_free", "%s", e.json);
	cr_assert_null(explain_finding(&e, "page_size"), "%s", e.json);
	/* the remedy it gets: Debian's redis-server runs on the system's
	 * libjemalloc, not Redis's own, and refuses active
	 * defragmentation, so a restart is what gives it back */
	cr_assert_not_null(strstr(f->remedy, "restart"), "%s", e.json);
	cr_assert_not_null(strstr(f->remedy, "refuses CONFIG SET activedefrag"),
			   "%s", e.json);
	cr_assert_not_null(strstr(f->remedy, "libjemalloc"), "%s", e.json);
	cr_assert_eq(config_set_activedefrag(), 0,
		     "this redis-server took activedefrag: the remedy is wrong");
	explain_assert_text_verdict(rs.pid, &e);
	assert_kept_keys();
	explain_free(&e);
}
