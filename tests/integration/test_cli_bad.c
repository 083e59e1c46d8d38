/*
 * Every malformed invocation of every command and option, table-driven:
 * unknown commands and options, missing values, bad numbers for --pid,
 * --thread, --timeout and --lg-sample, extra arguments, empty strings,
 * files that are missing, unreadable, directories or FIFOs, -o into a
 * missing directory, and the pids memsnap must refuse (0, 1, its own,
 * a kernel thread, a zombie, a pid that is gone).
 *
 * Each row gives the arguments, the exit code(s) allowed, and a pattern
 * (fnmatch(3), after the @ words below are replaced) for all of stderr,
 * which must be exactly one line unless the row says otherwise; stdout
 * must be empty.  Where a live target is named (@PID), it must be
 * untouched after every row: healthy, not stopped, not traced, nothing
 * left in its TMPDIR or cwd.
 *
 *   @PID     a live jemalloc process (profiling on)
 *   @GONE    a pid that was just reaped      @ZOMBIE  a zombie, @ZCOMM its comm
 *   @KCOMM   pid 2's comm (kthreadd)         @SELF    memsnap's own pid ($$)
 *   @DUMP    a valid heap dump               @TEXT    a file that is no dump
 *   @DIR     a directory                     @FIFO    a FIFO nobody writes
 *   @MISSING a path that does not exist      @OUT     a directory for output
 *   @LONG    a 17000-byte argument (made by the shell)
 *   @PUB, @SECRET  (rows run as uid 65534) a readable dump and one that
 *                  only root may read
 *
 * Rows that show a bug memsnap still has carry .bug (where, and what):
 * they are left out of the suite's tests, and run by known_bugs, which
 * needs MEMSNAP_KNOWN_BUGS=1 (see tests/lib/fault.h).
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define C(code) (1u << (code))

enum {
	OUT_OK = 1,	/* stdout may hold something (info before it failed) */
	NOBODY = 2,	/* run as uid 65534 */
	KTHREAD = 4,	/* needs pid 2 to be a kernel thread */
};

struct row {
	const char *args[12];
	unsigned codes;		/* C(status) | ... */
	const char *err;	/* fnmatch pattern for stderr; NULL: any */
	const char *pre;	/* shell command to run first (ulimit) */
	int lines;		/* stderr lines when it fails; 0: one */
	const char *absent;	/* must not be in stderr */
	unsigned flags;
	const char *bug;	/* a known bug: file:function, what */
};

static struct fixture fx = { .pid = -1 };
static char base[PATH_MAX];
static char words[16][PATH_MAX + 64];	/* values of the @ words */
static const char *const names[16] = {
	"@PID", "@GONE", "@ZOMBIE", "@ZCOMM", "@KCOMM", "@DUMP", "@TEXT",
	"@DIR", "@FIFO", "@MISSING", "@OUT", "@PUB", "@SECRET", "@BIN", NULL,
};
enum { W_PID, W_GONE, W_ZOMBIE, W_ZCOMM, W_KCOMM, W_DUMP, W_TEXT, W_DIR,
       W_FIFO, W_MISSING, W_OUT, W_PUB, W_SECRET, W_BIN };
static char tmp_dir[PATH_MAX + 8], cwd_dir[PATH_MAX + 8];
static char pub_dir[PATH_MAX + 8];
static pid_t zombie = -1;
static bool have_kthread;

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char cmd[3 * PATH_MAX], a[PATH_MAX + 8], b[PATH_MAX + 8];
	struct run r;

	snprintf(cmd, sizeof(cmd), "cp %s %s && chmod %o %s",
		 sh_quote(from, a, sizeof(a)), sh_quote(to, b, sizeof(b)),
		 (unsigned int)mode, b);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	run_free(&r);
}

/* A child that exits and is left unreaped. */
static void make_zombie(void)
{
	char path[64];
	siginfo_t si;
	FILE *f;

	zombie = fork();
	cr_assert_geq(zombie, 0);
	if (zombie == 0)
		_exit(0);
	cr_assert_eq(waitid(P_PID, (id_t)zombie, &si, WEXITED | WNOWAIT), 0);
	snprintf(words[W_ZOMBIE], sizeof(words[0]), "%d", (int)zombie);
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)zombie);
	f = fopen(path, "re");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(words[W_ZCOMM], sizeof(words[0]), f));
	fclose(f);
	words[W_ZCOMM][strcspn(words[W_ZCOMM], "\n")] = '\0';
}

static void teardown(void);

static void setup(void)
{
	const char *td = getenv("MEMSNAP_TESTDATA");
	const char *bin = getenv("MEMSNAP_BIN");
	char p[PATH_MAX + 32];
	pid_t gone;
	FILE *f;
	int rc;

	skip_cleanup = teardown;
	/* in /tmp itself, whatever $TMPDIR: uid 65534 must reach pub/ */
	rc = scratch_make("/tmp/memsnap-test-clibad", base, sizeof(base));
	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tmp", base);
	snprintf(cwd_dir, sizeof(cwd_dir), "%s/cwd", base);
	snprintf(pub_dir, sizeof(pub_dir), "%s/pub", base);
	cr_assert_eq(mkdir(tmp_dir, 01777), 0);
	cr_assert_eq(mkdir(cwd_dir, 0755), 0);

	gone = fork();
	cr_assert_geq(gone, 0);
	if (gone == 0)
		_exit(0);
	cr_assert_eq(waitpid(gone, NULL, 0), gone);
	snprintf(words[W_GONE], sizeof(words[0]), "%d", (int)gone);
	make_zombie();

	/* pid 2 is kthreadd, unless in a pid namespace. */
	f = fopen("/proc/2/comm", "re");
	have_kthread = f && fgets(words[W_KCOMM], sizeof(words[0]), f) &&
		       readlink("/proc/2/exe", p, sizeof(p)) < 0;
	if (f)
		fclose(f);
	words[W_KCOMM][strcspn(words[W_KCOMM], "\n")] = '\0';

	snprintf(words[W_DUMP], sizeof(words[0]), "%s/profiles/chain-3.heap",
		 td ? td : "tests/data");
	snprintf(words[W_TEXT], sizeof(words[0]), "%s/text", base);
	write_file(words[W_TEXT], "hello\n", 0644);
	snprintf(words[W_DIR], sizeof(words[0]), "%s/dir", base);
	cr_assert_eq(mkdir(words[W_DIR], 0755), 0);
	snprintf(words[W_FIFO], sizeof(words[0]), "%s/fifo", base);
	cr_assert_eq(mkfifo(words[W_FIFO], 0600), 0);
	snprintf(words[W_MISSING], sizeof(words[0]), "%s/missing", base);
	snprintf(words[W_OUT], sizeof(words[0]), "%s/out", base);
	cr_assert_eq(mkdir(words[W_OUT], 0755), 0);

	/* What uid 65534 may reach: memsnap, a dump, and a secret dump. */
	cr_assert_eq(mkdir(pub_dir, 0755), 0);
	cr_assert_eq(chmod(base, 0755), 0);
	snprintf(words[W_BIN], sizeof(words[0]), "%s/memsnap", pub_dir);
	copy_file(bin ? bin : "./memsnap", words[W_BIN], 0755);
	snprintf(words[W_PUB], sizeof(words[0]), "%s/pub.heap", pub_dir);
	copy_file(words[W_DUMP], words[W_PUB], 0644);
	snprintf(words[W_SECRET], sizeof(words[0]), "%s/secret.heap", pub_dir);
	copy_file(words[W_DUMP], words[W_SECRET], 0600);
}

static void teardown(void)
{
	fixture_stop(&fx);
	if (zombie > 0) {
		waitpid(zombie, NULL, 0);
		zombie = -1;
	}
	scratch_cleanup(base);
}

TestSuite(cli_bad, .init = setup, .fini = teardown, .timeout = 120);

/* The live target: jemalloc, profiling on, TMPDIR and cwd of its own. */
static void start_target(void)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16], cwd[PATH_MAX + 32];
	char conf[] = "MALLOC_CONF=prof:true";
	char *argv[] = { path, NULL };
	char *env[] = { conf, tmp, cwd, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "TMPDIR=%s", tmp_dir);
	snprintf(cwd, sizeof(cwd), "JE_FIXTURE_CWD=%s", cwd_dir);
	fixture_path("jemalloc-target", path, sizeof(path));
	rc = fixture_start(&fx, argv, env, 10000);
	cr_assert_eq(rc, 0, "starting %s: %s", path, strerror(-rc));
	snprintf(words[W_PID], sizeof(words[0]), "%d", (int)fx.pid);
}

/* @in with every @ word replaced, into @out. */
static void subst(const char *in, char *out, size_t size)
{
	size_t o = 0;

	while (*in && o + 1 < size) {
		size_t i, n = 0;

		if (*in == '@')
			for (i = 0; names[i]; i++)
				if (!strncmp(in, names[i], strlen(names[i]))) {
					n = strlen(names[i]);
					o += (size_t)snprintf(out + o, size - o,
							      "%s", words[i]);
					break;
				}
		if (n) {
			in += n;
			continue;
		}
		out[o++] = *in++;
	}
	out[o < size ? o : size - 1] = '\0';
}

/* The shell command line for @row: its arguments quoted, @SELF as $$. */
static void command_line(const struct row *row, char *cmd, size_t size)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char arg[PATH_MAX * 2], q[PATH_MAX * 2 + 64];
	size_t o;
	int i;

	o = (size_t)snprintf(cmd, size, "%s%sexec %s%s", row->pre ? row->pre : "",
			     row->pre ? " && " : "",
			     row->flags & NOBODY ? "setpriv --reuid 65534 "
						   "--regid 65534 --clear-groups "
						   "--inh-caps=-all "
						 : "",
			     sh_quote(row->flags & NOBODY ? words[W_BIN]
					  : bin ? bin : "./memsnap",
				      q, sizeof(q)));
	for (i = 0; row->args[i] && o < size; i++) {
		if (!strcmp(row->args[i], "@SELF")) {
			o += (size_t)snprintf(cmd + o, size - o, " $$");
			continue;
		}
		if (!strcmp(row->args[i], "@LONG")) {
			/* 17000 bytes: more than a call may put on a stack. */
			o += (size_t)snprintf(cmd + o, size - o, " \"$(head -c "
					      "17000 /dev/zero | tr '\\0' a)\"");
			continue;
		}
		subst(row->args[i], arg, sizeof(arg));
		o += (size_t)snprintf(cmd + o, size - o, " %s",
				      sh_quote(arg, q, sizeof(q)));
	}
	cr_assert_lt(o, size, "command line too long");
}

static bool names_target(const struct row *row)
{
	int i;

	for (i = 0; row->args[i]; i++)
		if (strstr(row->args[i], "@PID"))
			return true;
	return false;
}

/*
 * Run @row and check it; with @expect, record failures and go on (for
 * the known bugs), else stop at the first.  true if it passed.
 */
static bool run_row(const struct row *row, size_t idx, bool expect)
{
	char cmd[PATH_MAX * 4], want[PATH_MAX * 2];
	int lines = row->lines ? row->lines : 1;
	bool ok = true;
	struct run r;

	command_line(row, cmd, sizeof(cmd));
	cr_assert_eq(run_shell(&r, cmd), 0);
#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			ok = false;                                       \
			if (expect)                                       \
				cr_expect_fail(__VA_ARGS__);              \
			else                                              \
				cr_assert_fail(__VA_ARGS__);              \
		}                                                         \
	} while (0)
	CHECK(r.status <= 31 && (row->codes & C(r.status)),
	      "row %zu: %s\nexit %d, stderr:\n%s", idx, cmd, r.status, r.err);
	if (r.status)
		CHECK(count_lines(r.err) == (size_t)lines,
		      "row %zu: %s\n%zu lines on stderr, not %d:\n%s", idx, cmd,
		      count_lines(r.err), lines, r.err);
	else
		CHECK(count_lines(r.err) <= (size_t)lines,
		      "row %zu: %s\nstderr:\n%s", idx, cmd, r.err);
	if (row->err) {
		subst(row->err, want, sizeof(want));
		CHECK(!fnmatch(want, r.err, 0),
		      "row %zu: %s\nstderr:\n%s\nwanted:\n%s", idx, cmd, r.err,
		      want);
	}
	if (row->absent)
		CHECK(!strstr(r.err, row->absent),
		      "row %zu: %s\n'%s' in stderr:\n%s", idx, cmd, row->absent,
		      r.err);
	if (!(row->flags & OUT_OK) && r.status)
		CHECK(!r.out[0], "row %zu: %s\nstdout:\n%s", idx, cmd, r.out);
#undef CHECK
	run_free(&r);
	if (names_target(row)) {
		char when[64];

		snprintf(when, sizeof(when), "after row %zu", idx);
		assert_untouched(&fx, when);
		cr_assert_eq(dir_count_entries(tmp_dir), 0,
			     "row %zu left something in the target's TMPDIR",
			     idx);
		cr_assert_eq(dir_count_entries(cwd_dir), 0,
			     "row %zu left something in the target's cwd", idx);
	}
	return ok;
}

/* Rows as uid 65534 need root and setpriv(1); pid 2 rows kthreadd. */
static bool row_runnable(const struct row *row)
{
	if ((row->flags & NOBODY) &&
	    (geteuid() != 0 || access("/usr/bin/setpriv", X_OK)))
		return false;
	return !(row->flags & KTHREAD) || have_kthread;
}

/* The rows of @t without a known bug; the target started if named. */
static void run_table(const struct row *t, size_t n)
{
	size_t i, skipped = 0;

	start_target();
	for (i = 0; i < n; i++) {
		if (t[i].bug || !row_runnable(&t[i])) {
			skipped++;
			continue;
		}
		run_row(&t[i], i, false);
	}
	if (skipped)
		cr_log_info("%zu rows skipped (known bugs; no kthreadd, root or "
			    "setpriv)", skipped);
}

/* ---- the tables ---------------------------------------------------------- */

#define HELP " (see memsnap --help)\n"
#define RHELP " (see memsnap report --help)\n"
#define NOT_PID(v) { .args = { "--pid", v, "info", "--no-attach" }, \
		     .codes = C(2), \
		     .err = "memsnap: " v ": not a process id" HELP }
#define PID_RANGE(v) { .args = { "--pid", v, "info", "--no-attach" }, \
		       .codes = C(2), \
		       .err = "memsnap: " v ": pid out of range" HELP }
#define NOT_TID(v) { .args = { "--pid", "@PID", "--thread", v, "dump" }, \
		     .codes = C(2), \
		     .err = "memsnap: " v ": not a thread id" HELP }
#define NOT_TIMEOUT(v) { .args = { "--pid", "@PID", "--timeout", v, "prof", \
				   "on" }, .codes = C(2), \
			 .err = "memsnap: " v ": not a timeout in seconds" HELP }
#define NOT_SIZE(v) { .args = { "--pid", "@PID", "--max-size", v, "dump" }, \
		      .codes = C(2), \
		      .err = "memsnap: " v ": not a size (bytes, or with K, M, G, T)" HELP }
#define NEEDS_VALUE(o) "memsnap: " o ": needs a value" HELP

static const struct row global_rows[] = {
	{ .args = { NULL }, .codes = C(2),
	  .err = "memsnap: no command given" HELP },
	{ .args = { "--pid", "@PID" }, .codes = C(2),
	  .err = "memsnap: no command given" HELP },
	{ .args = { "--pid", "@PID", "--json", "-q" }, .codes = C(2),
	  .err = "memsnap: no command given" HELP },
	{ .args = { "--pid", "@PID", "frobnicate" }, .codes = C(2),
	  .err = "memsnap: frobnicate: unknown command" HELP },
	{ .args = { "--pid", "@PID", "" }, .codes = C(2),
	  .err = "memsnap: : unknown command" HELP },
	{ .args = { "--pid", "@PID", "INFO" }, .codes = C(2),
	  .err = "memsnap: INFO: unknown command" HELP },
	{ .args = { "--pid", "@PID", "report", "@DUMP" }, .codes = C(2),
	  .err = "memsnap: report: unknown command" HELP },
	{ .args = { "--", "--pid", "@PID", "info" }, .codes = C(2),
	  .err = "memsnap: --pid: unknown command" HELP },
	{ .args = { "--frob", "--pid", "@PID", "info" }, .codes = C(2),
	  .err = "memsnap: --frob: unknown option" HELP },
	{ .args = { "-Z", "--pid", "@PID", "info" }, .codes = C(2),
	  .err = "memsnap: -Z: unknown option" HELP },
	{ .args = { "--pid", "@PID", "info", "--frob" }, .codes = C(2),
	  .err = "memsnap: --frob: unknown option" HELP },
	{ .args = { "--allocator" }, .codes = C(2),
	  .err = NEEDS_VALUE("--allocator") },
	{ .args = { "--pid", "@PID", "--allocator" }, .codes = C(2),
	  .err = NEEDS_VALUE("--allocator") },
	{ .args = { "--pid", "@PID", "--allocator", "foo", "dump" },
	  .codes = C(5),
	  .err = "memsnap: dump @PID: no foo in this process (see memsnap --pid "
		 "@PID info)\n" },
	{ .args = { "--pid", "@PID", "--allocator", "foo", "prof", "on" },
	  .codes = C(5),
	  .err = "memsnap: prof @PID: no foo in this process (see memsnap --pid "
		 "@PID info)\n" },
	{ .args = { "--pid" }, .codes = C(2), .err = NEEDS_VALUE("--pid") },
	{ .args = { "-p" }, .codes = C(2), .err = NEEDS_VALUE("-p") },
	{ .args = { "--thread" }, .codes = C(2), .err = NEEDS_VALUE("--thread") },
	{ .args = { "--timeout" }, .codes = C(2),
	  .err = NEEDS_VALUE("--timeout") },
	{ .args = { "--json", "--pid" }, .codes = C(2),
	  .err = NEEDS_VALUE("--pid") },
	{ .args = { "--pid", "@PID", "--thread" }, .codes = C(2),
	  .err = NEEDS_VALUE("--thread") },
	{ .args = { "--pid", "@PID", "--timeout" }, .codes = C(2),
	  .err = NEEDS_VALUE("--timeout") },
	{ .args = { "--json=yes", "--pid", "@PID", "info" }, .codes = C(2),
	  .err = "memsnap: --json*" HELP},
	{ .args = { "--pid", "@PID", "--allocator", "", "dump" }, .codes = C(2),
	  .err = NULL},
};

static const struct row pid_rows[] = {
	NOT_PID("abc"), NOT_PID("12x"), NOT_PID("-5"), NOT_PID(""),
	NOT_PID("+5"), NOT_PID(" 12"), NOT_PID("0x10"), NOT_PID("1e3"),
	NOT_PID("-0"), NOT_PID("5 "),
	PID_RANGE("0"), PID_RANGE("99999999999999999999"),
	PID_RANGE("4194305"), PID_RANGE("2147483648"),
	{ .args = { "--pid=", "info" }, .codes = C(2),
	  .err = "memsnap: : not a process id" HELP },
#define GONE(...) { .args = { "--pid", "@GONE", __VA_ARGS__ }, \
		    .codes = C(3), \
		    .err = "memsnap: pid @GONE: no such process\n" }
	GONE("info"), GONE("info", "--no-attach"), GONE("dump"),
	GONE("prof", "on"), GONE("call", "getpid"), GONE("stats"),
	GONE("trim"),
#define ZOMBIE(...) { .args = { "--pid", "@ZOMBIE", __VA_ARGS__ }, \
		      .codes = C(3), \
		      .err = "memsnap: pid @ZOMBIE (@ZCOMM) is a zombie: it " \
			     "has exited and holds no memory\n" }
	ZOMBIE("info"), ZOMBIE("info", "--no-attach"), ZOMBIE("dump"),
	ZOMBIE("prof", "on"), ZOMBIE("stats"), ZOMBIE("trim"),
	ZOMBIE("call", "getpid"),
#define KTHREAD(...) { .args = { "--pid", "2", __VA_ARGS__ }, \
		       .codes = C(3), \
		       .err = "memsnap: pid 2 (@KCOMM) is a kernel thread: " \
			      "it has no allocator\n", \
		       .flags = KTHREAD }
	KTHREAD("info"), KTHREAD("info", "--no-attach"), KTHREAD("dump"),
	KTHREAD("prof", "on"), KTHREAD("stats"), KTHREAD("trim"),
	KTHREAD("call", "getpid"),
	/*
	 * init: memsnap may read it (root on a host) or not (a container);
	 * it is never stopped: --no-attach, and dump refuses glibc before
	 * attaching.
	 */
	{ .args = { "--pid", "1", "info", "--no-attach" }, .codes = C(0) | C(4),
	  .err = NULL,
	  .flags = OUT_OK },
	{ .args = { "--pid", "1", "dump", "-o", "@OUT/init.heap" },
	  .codes = C(4) | C(5),
	  .err = "memsnap: *\n" },
	/* Its own pid: a thread group cannot trace itself. */
	{ .args = { "--pid", "@SELF", "dump", "-o", "@OUT/self.heap" },
	  .codes = C(5),
	  .err = "memsnap: dump *: glibc malloc* cannot write a heap profile*\n" },
	{ .args = { "--pid", "@SELF", "prof", "on" }, .codes = C(5),
	  .err = "memsnap: prof *: glibc malloc* cannot control heap profiling*\n" },
	{ .args = { "--pid", "@SELF", "call", "getpid" }, .codes = C(4),
	  .err = "memsnap: *\n",
	  .absent = "security module"},
	{ .args = { "--pid", "@SELF", "stats" }, .codes = C(4),
	  .err = "memsnap: *\n",
	  .absent = "security module"},
};

static const struct row thread_timeout_rows[] = {
	NOT_TID("abc"), NOT_TID("-1"), NOT_TID("0"), NOT_TID(""),
	NOT_TID("99999999999"), NOT_TID("1.5"), NOT_TID("0x10"),
	{ .args = { "--pid", "@PID", "--thread", "@GONE", "dump" },
	  .codes = C(3),
	  .err = "memsnap: dump @PID: thread @GONE is not a thread of pid @PID\n" },
	{ .args = { "--pid", "@PID", "--thread", "1", "prof", "on" },
	  .codes = C(3),
	  .err = "memsnap: prof @PID: thread 1 is not a thread of pid @PID\n" },
	{ .args = { "--pid", "@PID", "--thread", "1", "stats" }, .codes = C(3),
	  .err = "memsnap: stats @PID: thread 1 is not a thread of pid @PID\n" },
	{ .args = { "--pid", "@PID", "--thread", "1", "call", "getpid" },
	  .codes = C(3),
	  .err = "memsnap: call @PID: thread 1 is not a thread of pid @PID\n" },
	NOT_TIMEOUT("abc"), NOT_TIMEOUT("-1"), NOT_TIMEOUT("0"),
	NOT_TIMEOUT(""), NOT_TIMEOUT("1e9"), NOT_TIMEOUT("nan"),
	NOT_TIMEOUT("inf"), NOT_TIMEOUT("86401"), NOT_TIMEOUT("-0"),
	NOT_TIMEOUT("1s"), NOT_TIMEOUT("1 "),
	NOT_SIZE("abc"), NOT_SIZE("-1"), NOT_SIZE("0"), NOT_SIZE(""),
	NOT_SIZE("1X"), NOT_SIZE("1.5G"), NOT_SIZE("99999999999T"),
	NOT_SIZE("1 G"),
	{ .args = { "--pid", "@PID", "--max-size" }, .codes = C(2),
	  .err = NEEDS_VALUE("--max-size") },
	{ .args = { "--pid", "@PID", "--json", "dump", "-o", "-" },
	  .codes = C(2),
	  .err = "memsnap: dump: --json and -o - would both write to standard output\n" },
};

static const struct row info_rows[] = {
	{ .args = { "info" }, .codes = C(2),
	  .err = "memsnap: info: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "info", "extra" }, .codes = C(2),
	  .err = "memsnap: info: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "info", "--no-attach", "extra" },
	  .codes = C(2),
	  .err = "memsnap: info: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "info", "" }, .codes = C(2),
	  .err = "memsnap: info: unexpected argument ''" HELP },
};

/* fnmatch(3) patterns: a bracket is \\[ */
#define WATCH_USAGE " (usage: watch -o DIR \\[--interval DUR] \\[--for DUR | " \
	"--count K] \\[--dump-every K] \\[--sampler \\[--sample-bytes SIZE] " \
	"\\[--stack-bytes SIZE] \\[--sampler-lease DUR]] \\[--no-attach])\n"

static const struct row dump_rows[] = {
	{ .args = { "dump" }, .codes = C(2),
	  .err = "memsnap: dump: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "dump", "more" }, .codes = C(2),
	  .err = "memsnap: dump: unexpected argument 'more'" HELP },
	{ .args = { "--pid", "@PID", "dump", "-o" }, .codes = C(2),
	  .err = "memsnap: dump: -o needs a value" HELP },
	{ .args = { "--pid", "@PID", "dump", "--output" }, .codes = C(2),
	  .err = "memsnap: dump: --output needs a value" HELP },
	{ .args = { "--pid", "@PID", "dump", "-o", "" }, .codes = C(2),
	  .err = "memsnap: dump: -o needs a file name" HELP },
	{ .args = { "--pid", "@PID", "dump", "-x" }, .codes = C(2),
	  .err = "memsnap: dump: unknown option '-x'" HELP },
	{ .args = { "--pid", "@PID", "dump", "--frob" }, .codes = C(2),
	  .err = "memsnap: dump: unknown option '--frob'" HELP },
	{ .args = { "--pid", "@PID", "dump", "-o", "@MISSING/x.heap" },
	  .codes = C(1),
	  .err = "memsnap: dump @PID: writing '@MISSING/x.heap': No such file or "
		 "directory\n" },
	{ .args = { "--pid", "@PID", "watch" }, .codes = C(2),
	  .err = "memsnap: watch: -o DIR is needed: where the series goes" \
		 WATCH_USAGE },
	{ .args = { "--pid", "@PID", "watch", "-o", "@DIR", "--interval",
		    "0" }, .codes = C(2),
	  .err = "memsnap: watch: not an interval (0.1s at least, e.g. 30s, "
		 "5m): '0'" WATCH_USAGE },
	{ .args = { "--pid", "@PID", "watch", "-o", "@DIR", "--for", "1h",
		    "--count", "3" }, .codes = C(2),
	  .err = "memsnap: watch: --for and --count both say when to stop; "
		 "give one\n" },
	{ .args = { "--pid", "@PID", "watch", "-o", "@DIR", "--stack-bytes",
		    "32K" }, .codes = C(2),
	  .err = "memsnap: watch: --stack-bytes goes with --sampler\n" },
	{ .args = { "--pid", "@PID", "watch", "-o", "@DIR", "--sampler",
		    "--stack-bytes", "3K" }, .codes = C(2),
	  .err = "memsnap: watch: not one of 4K, 8K, 16K, 32K, 64K: '3K'"
		 WATCH_USAGE },
	{ .args = { "--pid", "@PID", "dump", "-o", "@DIR" }, .codes = C(1),
	  .err = "memsnap: dump @PID: writing '@DIR': Is a directory\n" },
	{ .args = { "--pid", "@PID", "dump", "-o", "@TEXT/x.heap" },
	  .codes = C(1),
	  .err = "memsnap: dump @PID: writing '@TEXT/x.heap': Not a directory\n" },
};

#define PROF_SAY "say on \\[--sampler \\[--sample-bytes SIZE\\] " \
	"\\[--stack-bytes SIZE\\]\\], off, " \
	"reset \\[--lg-sample N\\] or gdump on|off"
#define LG(v) { .args = { "--pid", "@PID", "prof", "reset", "--lg-sample", \
			  v }, \
		.codes = C(2), \
		.err = "memsnap: prof reset: --lg-sample " v ": not a number " \
		       "from 0 to 62\n" }

static const struct row prof_rows[] = {
	{ .args = { "prof", "on" }, .codes = C(2),
	  .err = "memsnap: prof: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "prof" }, .codes = C(2),
	  .err = "memsnap: prof: " PROF_SAY HELP },
	{ .args = { "--pid", "@PID", "prof", "maybe" }, .codes = C(2),
	  .err = "memsnap: prof: unknown action 'maybe'; " PROF_SAY "\n" },
	{ .args = { "--pid", "@PID", "prof", "ON" }, .codes = C(2),
	  .err = "memsnap: prof: unknown action 'ON'; " PROF_SAY "\n" },
	{ .args = { "--pid", "@PID", "prof", "" }, .codes = C(2),
	  .err = "memsnap: prof: unknown action ''; " PROF_SAY "\n" },
	{ .args = { "--pid", "@PID", "prof", "gdump" }, .codes = C(2),
	  .err = "memsnap: prof gdump: say on or off" HELP },
	{ .args = { "--pid", "@PID", "prof", "gdump", "maybe" }, .codes = C(2),
	  .err = "memsnap: prof gdump: say on or off" HELP },
	{ .args = { "--pid", "@PID", "prof", "gdump", "" }, .codes = C(2),
	  .err = "memsnap: prof gdump: say on or off" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "now" }, .codes = C(2),
	  .err = "memsnap: prof: unexpected argument 'now'" HELP },
	{ .args = { "--pid", "@PID", "prof", "gdump", "on", "extra" },
	  .codes = C(2),
	  .err = "memsnap: prof: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--lg-sample", "3" },
	  .codes = C(2),
	  .err = "memsnap: prof: unexpected argument '--lg-sample'" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--sample-bytes", "1K" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --sample-bytes goes with --sampler" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--sample-bytes" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --sample-bytes needs a size" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--sample-bytes", "0" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --sample-bytes 0: not a size from 1 to 1T\n" },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--sample-bytes=2T" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --sample-bytes 2T: not a size from 1 to 1T\n" },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--sample-bytes", "1x" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --sample-bytes 1x: not a size from 1 to 1T\n" },
	{ .args = { "--pid", "@PID", "prof", "on", "--stack-bytes", "8K" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --stack-bytes goes with --sampler" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--stack-bytes" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --stack-bytes needs a size" HELP },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--stack-bytes", "12K" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --stack-bytes 12K: not one of 4K, 8K, "
		 "16K, 32K, 64K\n" },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--stack-bytes=128K" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --stack-bytes 128K: not one of 4K, 8K, "
		 "16K, 32K, 64K\n" },
	{ .args = { "--pid", "@PID", "prof", "on", "--sampler",
		    "--stack-bytes", "2K" },
	  .codes = C(2),
	  .err = "memsnap: prof on: --stack-bytes 2K: not one of 4K, 8K, "
		 "16K, 32K, 64K\n" },
	{ .args = { "--pid", "@PID", "prof", "off", "--sampler" },
	  .codes = C(2),
	  .err = "memsnap: prof: unexpected argument '--sampler'" HELP },
	{ .args = { "--pid", "@PID", "prof", "reset", "extra" }, .codes = C(2),
	  .err = "memsnap: prof: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "prof", "reset", "--lg-sample" },
	  .codes = C(2),
	  .err = "memsnap: prof reset: --lg-sample needs a value" HELP },
	LG("63"), LG("-1"), LG("abc"), LG(""), LG("99999999999999999999"),
	LG("0x10"), LG("1.5"), LG(" 5"),
	{ .args = { "--pid", "@PID", "prof", "reset", "--lg-sample=" },
	  .codes = C(2),
	  .err = "memsnap: prof reset: --lg-sample : not a number from 0 to 62\n" },
	{ .args = { "--pid", "@PID", "prof", "reset", "--lg-sample=63" },
	  .codes = C(2),
	  .err = "memsnap: prof reset: --lg-sample 63: not a number from 0 to 62\n" },
};

static const struct row call_rows[] = {
	{ .args = { "call", "getpid" }, .codes = C(2),
	  .err = "memsnap: call: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "call" }, .codes = C(2),
	  .err = "memsnap: call: which function?" HELP },
	{ .args = { "--pid", "@PID", "call", "getpid", "1", "2", "3", "4", "5", "6",
	    "7" }, .codes = C(2),
	      .err = "memsnap: call: at most 6 arguments\n" },
	{ .args = { "--pid", "@PID", "call", "getpid", "-1" }, .codes = C(2),
	  .err = "memsnap: -1: unknown option" HELP },
	{ .args = { "--pid", "@PID", "call", "getpid", "@LONG" }, .codes = C(2),
	  .err = "memsnap: call: argument 1: string too long\n" },
	{ .args = { "--pid", "@PID", "call", "" }, .codes = C(1),
	  .err = "memsnap: call: pid @PID: no function '' in any object\n" },
	{ .args = { "--pid", "@PID", "call", "no_such_function_anywhere" },
	  .codes = C(1),
	  .err = "memsnap: call: pid @PID: no function 'no_such_function_anywhere' "
		 "in any object\n" },
	{ .args = { "--pid", "@PID", "call", "0xzz" }, .codes = C(1),
	  .err = "memsnap: call: pid @PID: no function '0xzz' in any object\n" },
};

static const struct row stats_trim_rows[] = {
	{ .args = { "stats" }, .codes = C(2),
	  .err = "memsnap: stats: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "stats", "extra" }, .codes = C(2),
	  .err = "memsnap: stats: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "stats", "" }, .codes = C(2),
	  .err = "memsnap: stats: unexpected argument ''" HELP },
	{ .args = { "--pid", "@PID", "stats", "--frob" }, .codes = C(2),
	  .err = "memsnap: stats: unknown option '--frob'" HELP },
	{ .args = { "--pid", "@PID", "stats", "--raw=x" }, .codes = C(2),
	  .err = "memsnap: stats: unknown option '--raw=x'" HELP },
	{ .args = { "--pid", "@PID", "stats", "--json", "--raw" },
	  .codes = C(2),
	  .err = "memsnap: stats: give --json or --raw, not both\n" },
	{ .args = { "--pid", "@PID", "--allocator", "foo", "stats" },
	  .codes = C(5),
	  .err = "memsnap: stats @PID: no foo in this process (see memsnap --pid "
		 "@PID info)\n" },
	{ .args = { "trim" }, .codes = C(2),
	  .err = "memsnap: trim: which process? give --pid PID\n" },
	{ .args = { "--pid", "@PID", "trim", "extra" }, .codes = C(2),
	  .err = "memsnap: trim: unexpected argument 'extra'" HELP },
	{ .args = { "--pid", "@PID", "trim", "--frob" }, .codes = C(2),
	  .err = "memsnap: trim: unknown option '--frob'" HELP },
	{ .args = { "--pid", "@PID", "--allocator", "foo", "trim" },
	  .codes = C(5),
	  .err = "memsnap: trim @PID: no foo in this process (see memsnap --pid "
		 "@PID info)\n" },
};

#define NOT_ROWS(v) { .args = { "report", "@DUMP", "--top", v }, \
		      .codes = C(2), \
		      .err = "memsnap: report: " v ": not a row count" RHELP }

static const struct row report_rows[] = {
	{ .args = { "report" }, .codes = C(2),
	  .err = "memsnap: report: no dump given" RHELP },
	{ .args = { "report", "-q" }, .codes = C(2),
	  .err = "memsnap: report: no dump given" RHELP },
	{ .args = { "report", "@DUMP", "extra" }, .codes = C(2),
	  .err = "memsnap: report: extra: one dump at a time" RHELP },
	{ .args = { "report", "@MISSING" }, .codes = C(10),
	  .err = "memsnap: '@MISSING': No such file or directory\n" },
	{ .args = { "report", "" }, .codes = C(10),
	  .err = "memsnap: '': No such file or directory\n" },
	{ .args = { "report", "@DIR" }, .codes = C(10),
	  .err = "memsnap: '@DIR/series.tsv': no such file: not a directory "
		 "`memsnap watch` wrote\n" },
	{ .args = { "report", "@DIR", "--base", "@DUMP" }, .codes = C(2),
	  .err = "memsnap: report: '@DIR' is a watch's directory: text, "
		 "--format json, svg or html, and no --base (see memsnap "
		 "report --help)\n" },
	{ .args = { "report", "@FIFO" }, .codes = C(10),
	  .err = "memsnap: '@FIFO': not a readable heap profile: *\n" },
	{ .args = { "report", "@TEXT" }, .codes = C(10),
	  .err = "memsnap: '@TEXT': not a readable heap profile: *\n" },
	{ .args = { "report", "@DUMP", "--base" }, .codes = C(2),
	  .err = "memsnap: report: --base: needs a value" RHELP },
	{ .args = { "report", "-q", "@DUMP", "--base", "@MISSING" },
	  .codes = C(10),
	  .err = "memsnap: '@MISSING': No such file or directory\n" },
	{ .args = { "report", "-q", "@DUMP", "--base", "" }, .codes = C(10),
	  .err = "memsnap: '': No such file or directory\n" },
	{ .args = { "report", "-q", "@DUMP", "--base", "@DIR" }, .codes = C(10),
	  .err = "memsnap: '@DIR': Is a directory\n" },
	{ .args = { "report", "-q", "@DUMP", "--base", "@FIFO" },
	  .codes = C(10),
	  .err = "memsnap: '@FIFO': not a readable heap profile: *\n" },
	{ .args = { "report", "-q", "@DUMP", "--base", "@TEXT" },
	  .codes = C(10),
	  .err = "memsnap: '@TEXT': not a readable heap profile: *\n" },
	{ .args = { "report", "@DUMP", "--format" }, .codes = C(2),
	  .err = "memsnap: report: --format: needs a value" RHELP },
	{ .args = { "report", "@DUMP", "--format", "" }, .codes = C(2),
	  .err = "memsnap: report: : unknown format" RHELP },
	{ .args = { "report", "@DUMP", "--format", "png" }, .codes = C(2),
	  .err = "memsnap: report: png: unknown format" RHELP },
	{ .args = { "report", "@DUMP", "--format", "TEXT" }, .codes = C(2),
	  .err = "memsnap: report: TEXT: unknown format" RHELP },
	{ .args = { "report", "@DUMP", "--top" }, .codes = C(2),
	  .err = "memsnap: report: --top: needs a value" RHELP },
	NOT_ROWS("-1"), NOT_ROWS("abc"), NOT_ROWS(""),
	NOT_ROWS("99999999999999999999"), NOT_ROWS("1000001"),
	{ .args = { "report", "@DUMP", "-o" }, .codes = C(2),
	  .err = "memsnap: report: -o: needs a value" RHELP },
	{ .args = { "report", "-q", "@DUMP", "-o", "@MISSING/x" },
	  .codes = C(1),
	  .err = "memsnap: '@MISSING/x': No such file or directory\n" },
	{ .args = { "report", "-q", "@DUMP", "-o", "@DIR" }, .codes = C(1),
	  .err = "memsnap: '@DIR': Is a directory\n" },
	{ .args = { "report", "@DUMP", "--root" }, .codes = C(2),
	  .err = "memsnap: report: --root: needs a value" RHELP },
	{ .args = { "report", "@DUMP", "--frob" }, .codes = C(2),
	  .err = "memsnap: report: --frob: unknown option" RHELP },
	{ .args = { "report", "@DUMP", "-Z" }, .codes = C(2),
	  .err = "memsnap: report: -Z: unknown option" RHELP },
	{ .args = { "report", "@DUMP", "--base", "@DUMP", "--format", "pprof" },
	  .codes = C(2),
	  .err = "memsnap: report: --base: not with pprof (use pprof -diff_base)"
	  RHELP },
	{ .args = { "report", "@DUMP", "--base", "@DUMP", "--format", "jeprof" },
	  .codes = C(2),
	  .err = "memsnap: report: --base: not with jeprof (use jeprof --base)"
	  RHELP },
	{ .args = { "report", "@SECRET" }, .codes = C(10),
	  .err = "memsnap: '@SECRET': Permission denied\n", .flags = NOBODY },
	{ .args = { "report", "-q", "@PUB", "--base", "@SECRET" },
	  .codes = C(10),
	  .err = "memsnap: '@SECRET': Permission denied\n", .flags = NOBODY },
	{ .args = { "report", "-q", "@DUMP", "-o", "" }, .codes = C(2),
	  .err = "memsnap: report: *\n"},
	/* a device is refused before a byte is read */
	{ .args = { "report", "/dev/zero" }, .codes = C(10),
	  .err = "memsnap: '/dev/zero': *\n" },
};

/* ---- the tests ----------------------------------------------------------- */

#define TABLE(t) t, sizeof(t) / sizeof(t[0])

Test(cli_bad, global_options)
{
	run_table(TABLE(global_rows));
}

Test(cli_bad, pid_values)
{
	run_table(TABLE(pid_rows));
}

Test(cli_bad, thread_and_timeout_values)
{
	run_table(TABLE(thread_timeout_rows));
}

Test(cli_bad, info)
{
	run_table(TABLE(info_rows));
}

Test(cli_bad, dump)
{
	run_table(TABLE(dump_rows));
	cr_assert_eq(dir_count_entries(words[W_OUT]), 0);
	cr_assert_eq(dir_count_entries(words[W_DIR]), 0);
}

Test(cli_bad, prof)
{
	run_table(TABLE(prof_rows));
}

Test(cli_bad, call)
{
	run_table(TABLE(call_rows));
}

/* stats and trim: once `memsnap --help` has them. */
Test(cli_bad, stats_and_trim)
{
	const char *const help[] = { "--help", NULL };
	struct run r;
	bool have;

	cr_assert_eq(run_memsnap(&r, help), 0);
	have = strstr(r.out, "\n  stats") && strstr(r.out, "\n  trim");
	run_free(&r);
	if (!have)
		skip_test("memsnap --help has no stats and trim yet");
	run_table(TABLE(stats_trim_rows));
}

Test(cli_bad, report)
{
	run_table(TABLE(report_rows));
	cr_assert_eq(dir_count_entries(words[W_DIR]), 0);
}

/* Every row with .bug: each must pass once its bug is fixed. */
Test(cli_bad, known_bugs)
{
	static const struct {
		const struct row *t;
		size_t n;
	} tables[] = {
		{ TABLE(global_rows) },	 { TABLE(pid_rows) },
		{ TABLE(thread_timeout_rows) }, { TABLE(info_rows) },
		{ TABLE(dump_rows) },	 { TABLE(prof_rows) },
		{ TABLE(call_rows) },	 { TABLE(stats_trim_rows) },
		{ TABLE(report_rows) },
	};
	size_t i, k, failed = 0, ran = 0;

	known_bug("the rows with .bug in test_cli_bad.c");
	start_target();
	for (k = 0; k < sizeof(tables) / sizeof(tables[0]); k++)
		for (i = 0; i < tables[k].n; i++) {
			const struct row *row = &tables[k].t[i];

			if (!row->bug || !row_runnable(row))
				continue;
			if (row->pre && strstr(row->pre, "ulimit -v") &&
			    memsnap_sanitized())
				continue;
			ran++;
			if (!run_row(row, i, true)) {
				failed++;
				cr_log_warn("KNOWN BUG: %s", row->bug);
			}
		}
	cr_log_info("%zu of %zu known-bug rows failed", failed, ran);
}
