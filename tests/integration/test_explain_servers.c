/*
 * explain on real Debian servers on glibc malloc:
 *
 * - memcached with 32 worker threads, holding 400 items of 8 KiB: its
 *   slab pages (malloc'd, "total_malloced" in its own `stats slabs`)
 *   show as heap in use, not as memory outside the allocator; every
 *   thread is counted.
 * - mariadbd (10.11) with a 64 MiB InnoDB buffer pool, loaded with a
 *   40 MB table and scanned by a client while explain runs: the pool is
 *   mmap'd by InnoDB itself, so it must show as anon_other, named (the
 *   buffer pool, its setting, its mapping), never as heap, and counted
 *   once.
 *
 * Each is started privately (unix socket, temp dir) and serves its data
 * afterwards.
 */
#include "test_explain_lib.h"
#include "common/util.h"
#include "../lib/fixture.h"
#include "../lib/notify.h"
#include "../lib/scratch.h"

#include "../lib/memcached.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024 * 1024LL)
#define MEMCACHED "/usr/bin/memcached"
#define MARIADBD "/usr/sbin/mariadbd"
#define MC_KEYS 400

static pid_t srv = -1;
static char base[96];

static void teardown(void)
{
	explain_free_all();
	if (srv > 0) {
		kill(srv, SIGKILL);
		while (waitpid(srv, NULL, 0) < 0 && errno == EINTR)
			;
		srv = -1;
	}
	scratch_cleanup(base);
}

TestSuite(explain_servers, .fini = teardown, .timeout = 180);

/* In /tmp itself, whatever $TMPDIR: the servers' unix sockets are in
 * it, and a socket's path must be short. */
static void make_base(const char *what)
{
	char prefix[64];
	int rc;

	snprintf(prefix, sizeof(prefix), "/tmp/memsnap-explain-%s", what);
	rc = scratch_make(prefix, base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
}

static void set_sun_path(struct sockaddr_un *sa, const char *path)
{
	cr_assert_lt(strlen(path), sizeof(sa->sun_path), "%s", path);
	memcpy(sa->sun_path, path, strlen(path) + 1);
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	set_sun_path(&sa, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* "STAT name value" from a stats reply. */
static int64_t mc_stat(const char *stats, const char *name)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "STAT %s ", name);
	p = strstr(stats, pat);
	cr_assert_not_null(p, "no %s in:\n%s", name, stats);
	return strtoll(p + strlen(pat), NULL, 10);
}

static int64_t status_threads(pid_t pid)
{
	char path[64], line[128];
	long long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %lld", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* Wait (10 s at most) for @sock to appear in the directory @in
 * watches, then connect to it. */
static int wait_listening(int in, const char *sock)
{
	const char *name = strrchr(sock, '/') + 1;
	char buf[4096] __attribute__((aligned(8)));
	bool made = false;
	int i, fd = -1;

	while (!made) {
		struct pollfd p = { .fd = in, .events = POLLIN };
		ssize_t n;
		char *q;

		cr_assert_eq(poll(&p, 1, 10000), 1, "memcached made no %s",
			     sock);
		n = read(in, buf, sizeof(buf));
		cr_assert_gt(n, 0);
		for (q = buf; q < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)q;

			if (ev->len && !strcmp(ev->name, name))
				made = true;
			q += sizeof(*ev) + ev->len;
		}
	}
	/* bind() made it; listen() comes next: ECONNREFUSED until then */
	for (i = 0; i < 100000 && fd < 0; i++) {
		fd = unix_connect(sock);
		if (fd == -ECONNREFUSED)
			sched_yield();
		else if (fd < 0)
			break;
	}
	return fd;
}

Test(explain_servers, memcached_slabs_are_heap)
{
	static char req[12000], v[8193], reply[65536];
	char sock[128], log[128];
	struct explain e;
	int64_t lo, hi, malloced;
	unsigned int k;
	int in, fd;

	if (access(MEMCACHED, X_OK))
		cr_skip_test("%s is not installed (apt-get install memcached)",
			     MEMCACHED);
	make_base("memcached");
	snprintf(sock, sizeof(sock), "%s/mc.sock", base);
	snprintf(log, sizeof(log), "%s/mc.log", base);
	in = inotify_init1(IN_CLOEXEC);
	cr_assert_geq(in, 0);
	cr_assert_geq(inotify_add_watch(in, base, IN_CREATE), 0);
	srv = fork();
	cr_assert_geq(srv, 0);
	if (srv == 0) {
		int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (out < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
			_exit(126);
		execl(MEMCACHED, "memcached", "-u", "root", "-s", sock, "-m",
		      "64", "-t", "32", (char *)NULL);
		_exit(127);
	}
	/* Ready when its socket is made (an inotify event: memcached has
	 * no readiness signal) and listening, which follows bind() at
	 * once. */
	fd = wait_listening(in, sock);
	close(in);
	cr_assert_geq(fd, 0, "memcached never listened on %s", sock);
	for (k = 0; k < MC_KEYS; k++) {
		mc_value(k, v, sizeof(v));
		snprintf(req, sizeof(req), "set key%u 0 0 %zu\r\n%s\r\n", k,
			 sizeof(v) - 1, v);
		mc_request(fd, req, strlen(req), "\r\n", reply, sizeof(reply));
		cr_assert_str_eq(reply, "STORED\r\n");
	}
	mc_request(fd, "stats slabs\r\n", 13, "END\r\n", reply, sizeof(reply));
	malloced = mc_stat(reply, "total_malloced");
	cr_assert_geq(malloced, MC_KEYS * 8192LL, "%s", reply);

	explain_run(srv, NULL, &e, &lo, &hi);
	explain_assert_sound(&e, lo, hi, true);
	cr_assert_str_eq(e.allocator ? e.allocator : "?", "glibc", "%s", e.json);
	cr_assert_eq(e.threads, status_threads(srv), "%s", e.json);
	/* The slab pages are malloc'd (1 MiB each, mmap'd by glibc): heap
	 * in use, and resident as far as items were written into them. */
	cr_assert_geq(e.part[P_HEAP_IN_USE], MC_KEYS * 8192LL,
		      "memcached's %d items of 8 KiB are not in heap_in_use\n%s",
		      MC_KEYS, e.json);
	cr_assert_lt(e.part[P_ANON_OTHER], MC_KEYS * 8192LL,
		     "memcached's slabs counted outside the allocator\n%s",
		     e.json);
	explain_assert_text_verdict(srv, &e);

	for (k = 0; k < MC_KEYS; k += 7) {
		static char want[8300];

		mc_value(k, v, sizeof(v));
		snprintf(req, sizeof(req), "get key%u\r\n", k);
		snprintf(want, sizeof(want), "VALUE key%u 0 %zu\r\n%s\r\nEND\r\n",
			 k, sizeof(v) - 1, v);
		mc_request(fd, req, strlen(req), "END\r\n", reply, sizeof(reply));
		cr_assert_str_eq(reply, want, "key%u", k);
	}
	close(fd);
	explain_free(&e);
}

/* Of the anonymous mappings of @pid of at least @min bytes, the one
 * with the most resident: its Rss (its Size in @size); -1 if none.
 * (mariadbd also reserves terabytes it never touches.) */
static int64_t largest_anon_rss(pid_t pid, int64_t min, int64_t *size)
{
	char path[64], line[512];
	long long kb, sz = 0, best = -1, best_sz = 0;
	bool anon = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b, ino;
		char perms[8], dev[16];
		int n = 0;

		if (sscanf(line, "%lx-%lx %7s %*x %15s %lu %n", &a, &b, perms,
			   dev, &ino, &n) == 5 && strchr(line, '-') <
							  strchr(line, ' ')) {
			anon = !ino && (line[n] == '\n' || line[n] == '\0');
			continue;
		}
		if (anon && sscanf(line, "Size: %lld kB", &kb) == 1)
			sz = kb;
		if (anon && sscanf(line, "Rss: %lld kB", &kb) == 1 &&
		    sz * 1024 >= min && kb > best) {
			best = kb;
			best_sz = sz;
		}
	}
	fclose(f);
	*size = best_sz * 1024;
	return best < 0 ? -1 : best * 1024;
}

static void sql(const char *sock, const char *query, char *out, size_t size)
{
	char cmd[1024];
	struct run r;

	snprintf(cmd, sizeof(cmd),
		 "mariadb --no-defaults --socket='%s' -u root -N -B -e \"%s\"",
		 sock, query);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", query, r.err);
	if (out)
		snprintf(out, size, "%s", r.out);
	run_free(&r);
}

static char mdb_sock[128];
static atomic_bool mdb_stop;
static atomic_long mdb_queries, mdb_failures;

/* A client scanning the table over and over while explain runs: the
 * load, and every query must succeed. */
static void *mdb_client(void *arg)
{
	char cmd[512];

	(void)arg;
	snprintf(cmd, sizeof(cmd),
		 "mariadb --no-defaults --socket='%s' -u root -N -B -e "
		 "\"SELECT SUM(LENGTH(v)) FROM m.t\" 2>&1 | grep -qx 40000000",
		 mdb_sock);
	while (!atomic_load(&mdb_stop)) {
		if (system(cmd))
			atomic_fetch_add(&mdb_failures, 1);
		else
			atomic_fetch_add(&mdb_queries, 1);
	}
	return NULL;
}

/*
 * MariaDB 10.11 maps its buffer pool itself (my_large_malloc: mmap,
 * large pages off): the pool is not malloc's, and explain must put it
 * with the program's own anonymous memory, not the heap.
 */
Test(explain_servers, mariadb_buffer_pool_is_anon_other)
{
	char sock[128], notify[128], cmd[512];
	char out[256], want[64];
	const struct explain_finding *f;
	struct explain e;
	struct run r;
	pthread_t t;
	int64_t lo, hi, pool, pool_size;
	int nfd, rc;

	if (access(MARIADBD, X_OK) || access("/usr/bin/mariadb-install-db", X_OK) ||
	    access("/usr/bin/mariadb", X_OK))
		cr_skip_test("mariadb-server is not installed (apt-get install mariadb-server)");
	make_base("mariadb");
	snprintf(sock, sizeof(sock), "%s/sock", base);
	snprintf(notify, sizeof(notify), "%s/notify", base);
	snprintf(cmd, sizeof(cmd),
		 "mariadb-install-db --no-defaults --datadir='%s/data' --user=root "
		 "--auth-root-authentication-method=normal --skip-test-db",
		 base);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "mariadb-install-db: %s%s", r.out, r.err);
	run_free(&r);

	nfd = notify_socket(notify);
	cr_assert_geq(nfd, 0, "%s: %s", notify, strerror(-nfd));
	srv = fork();
	cr_assert_geq(srv, 0);
	if (srv == 0) {
		char datadir[160], socket_[160], err[160];
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		setenv("NOTIFY_SOCKET", notify, 1);
		snprintf(datadir, sizeof(datadir), "--datadir=%s/data", base);
		snprintf(socket_, sizeof(socket_), "--socket=%s", sock);
		snprintf(err, sizeof(err), "--log-error=%s/err", base);
		execl(MARIADBD, MARIADBD, "--no-defaults", datadir, socket_,
		      err, "--skip-networking", "--user=root",
		      "--innodb-buffer-pool-size=64M",
		      "--innodb-log-file-size=16M", (char *)NULL);
		_exit(127);
	}
	rc = notify_wait_ready(nfd, 60000);
	close(nfd);
	cr_assert_eq(rc, 0, "mariadbd did not say READY=1: %s (see %s/err)",
		     strerror(-rc), base);

	/* 40000 rows of 1000 bytes: the pool fills. */
	sql(sock, "CREATE DATABASE m; USE m; "
		  "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(1000)) ENGINE=InnoDB; "
		  "INSERT INTO t SELECT seq, REPEAT('x', 1000) FROM seq_1_to_40000",
	    NULL, 0);
	sql(sock, "SELECT SUM(LENGTH(v)) FROM m.t", out, sizeof(out));
	cr_assert_eq(strtoll(out, NULL, 10), 40000000LL, "%s", out);

	pool = largest_anon_rss(srv, 64 * MiB, &pool_size);
	cr_assert_geq(pool, 32 * MiB, "no 64 MiB anonymous mapping with the "
		      "pool's pages resident (largest: %" PRId64 " of %" PRId64
		      ")", pool, pool_size);
	snprintf(mdb_sock, sizeof(mdb_sock), "%s", sock);
	atomic_store(&mdb_stop, false);
	cr_assert_eq(pthread_create(&t, NULL, mdb_client, NULL), 0);
	/* the client's loop is under way before explain starts */
	while (!atomic_load(&mdb_queries) && !atomic_load(&mdb_failures))
		sched_yield();
	explain_run(srv, NULL, &e, &lo, &hi);
	atomic_store(&mdb_stop, true);
	pthread_join(t, NULL);
	cr_assert_eq(atomic_load(&mdb_failures), 0,
		     "%ld queries failed during explain",
		     atomic_load(&mdb_failures));
	explain_assert_sound(&e, lo, hi, true);
	cr_assert_str_eq(e.allocator ? e.allocator : "?", "glibc", "%s", e.json);
	cr_assert_geq(e.part[P_ANON_OTHER], pool,
		      "the buffer pool's %" PRId64 " resident bytes are not all "
		      "in anon_other\n%s", pool, e.json);
	f = explain_finding(&e, "anon_other");
	cr_assert_not_null(f, "%s", e.json);
	cr_assert_geq(f->bytes, pool, "%s", e.json);
	cr_assert_str_eq(e.f[0].id, "anon_other", "the first finding\n%s",
			 e.json);
	/* named: the pool, its setting, and its mapping with its size */
	cr_assert_not_null(strstr(f->text, "InnoDB's buffer pool"), "%s",
			   e.json);
	cr_assert_not_null(strstr(f->remedy, "innodb_buffer_pool_size"), "%s",
			   e.json);
	human_bytes((uint64_t)pool_size, want, sizeof(want) - 2);
	strcat(want, ", ");
	cr_assert_not_null(strstr(f->text, "the largest such mapping"), "%s",
			   e.json);
	cr_assert_not_null(strstr(strstr(f->text, "the largest such mapping"),
				  want), "no %s mapping named\n%s", want,
			   e.json);
	cr_assert_null(strstr(f->remedy, "not a"), "%s", e.json);
	/* counted once: glibc's arenas inside heap_free, if at all */
	cr_assert_null(explain_finding(&e, "glibc_arenas") &&
				       explain_finding(&e, "heap_free")
			       ? "both"
			       : NULL,
		       "glibc_arenas beside heap_free\n%s", e.json);
	/* What is left for the heap cannot hold the pool. */
	cr_assert_leq(e.part[P_HEAP_IN_USE] + e.part[P_HEAP_FREE],
		      e.rss - pool, "%s", e.json);
	explain_assert_text_verdict(srv, &e);

	sql(sock, "SELECT COUNT(*) FROM m.t WHERE v = REPEAT('x', 1000)", out,
	    sizeof(out));
	cr_assert_eq(strtoll(out, NULL, 10), 40000, "%s", out);
	explain_free(&e);
}
