/*
 * memsnap report parses in a child with no rights (profile/box.h): the
 * dump, and the ELF and DWARF files it names, are read by a process
 * that is nobody, has no capability, no file it was not handed, and a
 * seccomp filter; a parser that crashes on them costs the report, not
 * root's memsnap.
 *
 * The child is caught while it works by giving memsnap a FIFO as its
 * dump (a dump may be a pipe: `report <(zcat dump.gz)`): memsnap opens
 * the FIFO, so the test's open() of its other end returns, then starts
 * the child, which is locked in before it asks for its input and then
 * waits in read() until the test writes the dump.
 *
 * The crash is a real hostile input: a library whose DWARF nests
 * lexical blocks 200000 deep (tests/fixtures/deep_dwarf.S), which
 * libdw 0.188's dwarf_getscopes() walks by recursion until the stack
 * runs out.
 *
 * What the parser sends back is memsnap's to write: the report, at most
 * --max-size of it, and its lines, cleaned (the last test passed before
 * the sandbox too: it guards that the lines still go through
 * fputs_clean()).
 */
#include "tests/lib/fault.h"
#include "tests/lib/scratch.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];		/* /tmp/memsnap-rs.XXXXXX, 0755 */

static void teardown(void)
{
	scratch_cleanup(top);
}

static void setup(void)
{
	/* in /tmp itself, whatever $TMPDIR, and 0755: nobody's memsnap
	 * reads its dump here */
	int rc = scratch_make("/tmp/memsnap-rs", top, sizeof(top));

	cr_assert_eq(rc, 0, "scratch_make: %s", strerror(-rc));
	cr_assert_eq(chmod(top, 0755), 0);
	skip_cleanup = teardown;
}

TestSuite(report_sandbox, .init = setup, .fini = teardown);

/* What a dump holds without MAPPED_LIBRARIES, and its folded report. */
static const char small_dump[] =
	"heap_v2/1\n"
	"  t*: 3: 3072 [0: 0]\n"
	"@ 0x10 0x20\n"
	"  t*: 2: 2048 [0: 0]\n"
	"@ 0x30 0x20\n"
	"  t*: 1: 1024 [0: 0]\n";
static const char small_folded[] = "0x20;0x10 2048\n0x20;0x30 1024\n";

/*
 * memsnap report in the background, as bg_start() (tests/lib/fault.h)
 * runs it, but as nobody when @nobody (and the test is root).
 */
static void start_as(struct bg *b, const char *const args[], bool nobody)
{
	const char *bin = getenv("MEMSNAP_BIN");
	char *argv[16];
	int out[2], err[2];
	size_t i;

	cr_assert_not_null(bin, "MEMSNAP_BIN is not set");
	argv[0] = (char *)bin;
	for (i = 0; args[i] && i + 2 < 16; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	b->pid = fork();
	cr_assert_geq(b->pid, 0);
	if (b->pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (nobody && !geteuid() &&
		    (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		     setresuid(65534, 65534, 65534)))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	b->out = out[0];
	b->err = err[0];
}

/* The one child of @parent, from /proc/PID/stat's ppid; 0 if none. */
static pid_t child_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		char path[300], buf[512], *p;
		int ppid = 0;
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (p && sscanf(p, ") %*c %d", &ppid) == 1 && ppid == parent) {
			found = (pid_t)atoi(e->d_name);
			n++;
		}
	}
	closedir(d);
	cr_assert_leq(n, 1, "memsnap has %d children", n);
	return found;
}

/* The value of @key in /proc/@pid/status, blanks squeezed to one. */
static void status_of(pid_t pid, const char *key, char *val, size_t size)
{
	char path[64], line[1024];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f)) {
		size_t k = strlen(key), o = 0;
		char *s;

		if (strncmp(line, key, k) || line[k] != ':')
			continue;
		for (s = line + k + 1; *s && *s != '\n' && o + 1 < size; s++)
			if (*s != '\t' && *s != ' ')
				val[o++] = *s;
			else if (o && val[o - 1] != ' ')
				val[o++] = ' ';
		val[o] = '\0';
		found = true;
	}
	fclose(f);
	cr_assert(found, "%s: no %s line", path, key);
}

/* Every descriptor of @pid: its one socket, or the FIFO @fifo. */
static void assert_holds_only(pid_t pid, const char *fifo)
{
	char dir[64];
	struct dirent *e;
	int sockets = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		char path[384], target[PATH_MAX];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		cr_assert_gt(n, 0, "%s: %s", path, strerror(errno));
		target[n] = '\0';
		if (!strncmp(target, "socket:", 7))
			sockets++;
		else
			cr_assert_str_eq(target, fifo, "the parser holds %s",
					 target);
	}
	closedir(d);
	cr_assert_eq(sockets, 1, "the parser holds %d sockets", sockets);
}

#define TOKEN "hunter2-3f1c9a"

/* The environment @pid was started with holds no TOKEN any more. */
static void assert_no_token(pid_t pid)
{
	char path[64], *env;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	env = calloc(1, 1 << 20);
	cr_assert_not_null(env);
	len = fread(env, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_assert_null(memmem(env, len, TOKEN, strlen(TOKEN)),
		       "the parser has memsnap's environment");
	free(env);
}

/*
 * memsnap report of a FIFO (as nobody when @nobody): once the child asks
 * for the dump, check it from outside, then give it the dump; the
 * report must be whole.
 */
static void catch_the_parser(bool nobody)
{
	char fifo[96], v[256];
	const char *args[] = { "report", fifo, "-q", "--format", "folded",
			       NULL };
	uint64_t caps;
	long deadline;
	struct bg b;
	struct run r;
	pid_t child;
	int fd;

	snprintf(fifo, sizeof(fifo), "%s/dump.fifo", top);
	cr_assert_eq(mkfifo(fifo, 0666), 0, "%s", strerror(errno));
	cr_assert_eq(chmod(fifo, 0666), 0);
	/* something of root's that the parser must not have */
	cr_assert_eq(setenv("MEMSNAP_TEST_TOKEN", TOKEN, 1), 0);
	start_as(&b, args, nobody);
	unsetenv("MEMSNAP_TEST_TOKEN");
	/* returns once memsnap has opened it: the child has asked (if
	 * memsnap never does, the test's timeout ends it) */
	fd = open(fifo, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", fifo, strerror(errno));
	/* memsnap opens the dump, then starts the parser, which waits for
	 * the dump's bytes: there within the deadline, or never */
	deadline = fault_now_ms() + 30000;
	while (!(child = child_of(b.pid)) && fault_now_ms() < deadline)
		fault_sleep_ms(5);
	cr_assert_gt(child, 0, "memsnap reads its dump with no child");
	/* locked in: its filter is the last thing it takes on */
	do {
		status_of(child, "Seccomp", v, sizeof(v));
	} while (strcmp(v, "2") && fault_now_ms() < deadline &&
		 (fault_sleep_ms(5), true));
	cr_expect_str_eq(v, "2", "Seccomp: %s", v);
	status_of(child, "NoNewPrivs", v, sizeof(v));
	cr_expect_str_eq(v, "1", "NoNewPrivs: %s", v);
	status_of(child, "CapEff", v, sizeof(v));
	caps = strtoull(v, NULL, 16);
	status_of(child, "CapPrm", v, sizeof(v));
	caps |= strtoull(v, NULL, 16);
	status_of(child, "CapAmb", v, sizeof(v));
	caps |= strtoull(v, NULL, 16);
	cr_expect_eq(caps, 0, "the parser has capabilities %" PRIx64, caps);
	if (!geteuid()) {
		status_of(child, "Uid", v, sizeof(v));
		cr_expect_str_eq(v, "65534 65534 65534 65534", "Uid: %s", v);
		status_of(child, "Gid", v, sizeof(v));
		cr_expect_str_eq(v, "65534 65534 65534 65534", "Gid: %s", v);
		status_of(child, "Groups", v, sizeof(v));
		cr_expect_str_eq(v, "", "Groups: %s", v);
	}
	assert_holds_only(child, fifo);
	assert_no_token(child);

	cr_assert_eq(write(fd, small_dump, strlen(small_dump)),
		     (ssize_t)strlen(small_dump));
	close(fd);
	bg_finish(&b, &r);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.out, small_folded);
	cr_assert_str_eq(r.err, "");
	run_free(&r);
}

Test(report_sandbox, the_parser_has_no_rights, .timeout = 60)
{
	catch_the_parser(false);
}

/* A memsnap that is not root cannot change the child's uid; the child
 * still has no capability, NO_NEW_PRIVS and the filter. */
Test(report_sandbox, the_parser_of_a_user_has_no_rights_either,
     .timeout = 60)
{
	catch_the_parser(true);
}

/* ---- a parser that crashes ------------------------------------------ */

#define BASE 0x7f0000000000ull

/* A dump whose one stack is at @pc, the library /lib/libdeep.so mapped
 * at BASE from offset 0; its path into @dump. */
static void deep_dump(uint64_t pc, char *dump, size_t size)
{
	FILE *f;

	snprintf(dump, size, "%s/deep.heap", top);
	f = fopen(dump, "w");
	cr_assert_not_null(f);
	fprintf(f, "heap_v2/524288\n"
		   "  t*: 1: 4096 [0: 0]\n"
		   "@ 0x%" PRIx64 "\n"
		   "  t*: 1: 4096 [0: 0]\n"
		   "\n"
		   "MAPPED_LIBRARIES:\n"
		   "%llx-%llx r-xp 00000000 00:00 5 /lib/libdeep.so\n",
		pc, BASE, BASE + 0x10000);
	cr_assert_eq(fclose(f), 0);
}

/* The root with the library at /lib/libdeep.so; deep_leaf's address in
 * the file into *@leaf. */
static void deep_root(char *root, size_t size, uint64_t *leaf)
{
	char lib[PATH_MAX], cmd[3 * PATH_MAX];
	struct run r;

	fixture_path("libdeep-dwarf.so", lib, sizeof(lib));
	cr_assert_eq(access(lib, R_OK), 0, "%s: %s", lib, strerror(errno));
	snprintf(root, size, "%s/root", top);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/lib' && cp '%s' "
		 "'%s/lib/libdeep.so' && nm '%s' | sed -n 's/ T deep_leaf$//p'",
		 root, lib, root, lib);
	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	*leaf = strtoull(r.out, NULL, 16);
	cr_assert_neq(*leaf, 0, "%s", r.out);
	run_free(&r);
}

/* The file at @path, NUL-terminated. */
static char *slurp(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	return bg_slurp(fd);
}

/*
 * libdw overflows its stack on the library's DWARF: memsnap says so in
 * one line and exits 10, the file -o names is as it was, and a report
 * of the same objects that does not ask for that address works.
 */
Test(report_sandbox, a_parser_crash_costs_only_the_report)
{
	char root[128], dump[128], out[128], line[200], *kept;
	const char *args[] = { "report", dump, "--root", root, "-o", out,
			       NULL };
	uint64_t leaf;
	struct run r;
	FILE *f;

	deep_root(root, sizeof(root), &leaf);
	snprintf(out, sizeof(out), "%s/report.txt", top);
	f = fopen(out, "w");
	cr_assert_not_null(f);
	fputs("the report before\n", f);
	cr_assert_eq(fclose(f), 0);

	deep_dump(BASE + leaf + 4, dump, sizeof(dump));
	/* the stack Debian gives a shell: the recursion outgrows it */
	cr_assert_eq(run_memsnap_after(&r, "ulimit -s 8192", args), 0);
	cr_assert_eq(r.status, 10, "exit %d (128 + a signal: memsnap itself "
		     "crashed): %s", r.status, r.err);
	if (memsnap_sanitized()) {
		/* ASan catches the overflow: its report, then SIGABRT or
		 * exit 1, as ASAN_OPTIONS say */
		cr_assert(!strncmp(r.err, "memsnap: report: the parser ended "
				   "with ", 39) &&
				  count_lines(r.err) == 1,
			  "%s", r.err);
	} else {
		snprintf(line, sizeof(line), "memsnap: report: the parser "
			 "ended with SIGSEGV (a hostile or corrupt input?)\n");
		cr_assert_str_eq(r.err, line);
	}
	cr_assert_str_eq(r.out, "");
	run_free(&r);
	kept = slurp(out);
	cr_assert_str_eq(kept, "the report before\n", "-o was written: %s",
			 kept);
	free(kept);

	/* the same library, an address outside its code: a whole report */
	deep_dump(BASE + 0x8000, dump, sizeof(dump));
	cr_assert_eq(run_memsnap_after(&r, "ulimit -s 8192", args), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_free(&r);
	kept = slurp(out);
	cr_assert(strstr(kept, "  libdeep.so+0x8000\n"), "%s", kept);
	free(kept);
}

/* ---- what the parser sends back --------------------------------------- */

/* @text into @name under the test's directory; the path into @path. */
/* @text as @name in the test's directory; its path into @path. */
static void put_dump(const char *name, const char *text, char *path,
		     size_t size)
{
	snprintf(path, size, "%s/%s", top, name);
	write_file(path, text, 0644);
}

/*
 * The report is written by memsnap, at most --max-size bytes of it: the
 * JSON of a 97-byte dump is 1240 bytes, so with --max-size 200 nothing
 * reaches -o (nor stdout) and one line says why.
 */
Test(report_sandbox, the_report_written_is_bounded_by_max_size)
{
	char dump[128], out[128], msg[300];
	const char *to_file[] = { "report", dump, "-q", "--format", "json",
				  "--max-size", "200", "-o", out, NULL };
	const char *to_stdout[] = { "report", dump, "-q", "--format", "json",
				    "--max-size", "200", NULL };
	const char *whole[] = { "report", dump, "-q", "--format", "json",
				"--max-size", "2K", "-o", out, NULL };
	struct run r;

	put_dump("small.heap", small_dump, dump, sizeof(dump));
	snprintf(out, sizeof(out), "%s/report.json", top);
	cr_assert_eq(run_memsnap(&r, to_file), 0);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	snprintf(msg, sizeof(msg), "memsnap: '%s': the report is larger than "
		 "--max-size (200 B)\n", out);
	cr_assert_str_eq(r.err, msg);
	cr_assert_neq(access(out, F_OK), 0, "%s was written", out);
	run_free(&r);

	cr_assert_eq(run_memsnap(&r, to_stdout), 0);
	cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "memsnap: stdout: the report is larger than "
				"--max-size (200 B)\n");
	cr_assert_str_eq(r.out, "");
	run_free(&r);

	cr_assert_eq(run_memsnap(&r, whole), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_eq(access(out, F_OK), 0, "%s was not written", out);
	run_free(&r);
}

/* The parser's warnings reach the terminal through memsnap, cleaned: an
 * escape sequence in a path of the maps is a '?'. */
Test(report_sandbox, the_parsers_lines_reach_the_terminal_clean)
{
	char dump[128];
	const char *args[] = { "report", dump, "--format", "folded", NULL };
	struct run r;

	put_dump("esc.heap",
		   "heap_v2/1\n"
		   "@ 0x7f0000001000\n"
		   "  t*: 1: 1024 [0: 0]\n"
		   "\n"
		   "MAPPED_LIBRARIES:\n"
		   "7f0000000000-7f0000010000 r-xp 00000000 00:00 5 "
		   "/nonexistent/\033[2J\033]0;owned\007.so\n",
		   dump, sizeof(dump));
	cr_assert_eq(run_memsnap(&r, args), 0);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	cr_assert_str_eq(r.err, "memsnap: warning: '/nonexistent/?[2J?]0;"
				"owned?.so': No such file or directory: its "
				"frames are shown as ?[2J?]0;owned?.so+0xoffset"
				"\n");
	run_free(&r);
}
