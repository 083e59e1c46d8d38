/*
 * report's parent (cli/report.h): memsnap starts the child that parses
 * and serves it over the socket (cli/report_wire.h), by memsnap's own
 * rules, trusting nothing it says:
 *
 *   - a file is opened only as the in-process report opens it: the
 *     dumps of the command line (profile_open()), and ELF files beneath
 *     --root, their copies for libdw and debuginfod's
 *     (cli/report_files.c);
 *   - every message is checked for its size, its order and a budget;
 *     a descriptor comes back only with STEADY, and only one;
 *   - its lines reach the terminal through fputs_clean() (error(),
 *     warning()), a bounded number of them; its report goes to -o,
 *     at most --max-size bytes, and -o is committed only once the
 *     child has said the report is whole and has exited with 0;
 *   - its exit status is taken only if documented (1 or 10, after its
 *     error line; 0 after a whole report); any other end, a signal,
 *     or a message out of turn is one line:
 *
 *       memsnap: report: the parser ended with SIGSEGV (a hostile or corrupt input?)
 *
 *     and exit status 10, as for a dump that cannot be read: the input
 *     is what a parser crashes on.
 *
 * There is no time limit on the child: a report takes as long as its
 * dump (memsnap can be interrupted; the child dies with it).
 */
#include "cli/report.h"

#include "cli/progress.h"
#include "cli/report_wire.h"
#include "common/fsio.h"
#include "common/output.h"
#include "common/sandbox.h"
#include "common/seqpacket.h"
#include "common/util.h"
#include "injector/arch.h"
#include "profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The child's warnings printed, at most. */
#define WARNINGS_MAX 10000u
/* How long a child that has said its last word may take to exit. */
#define EXIT_MS 10000

/*
 * What the child may do beside the sandbox's fixed list, found by
 * running every format, with and without --base, --lines and
 * debuginfo, plainly and with ASan: read the files memsnap passes it
 * (pread64; fstat is newfstatat(fd, "", AT_EMPTY_PATH) in glibc, and a
 * path there cannot be checked by a filter, so a child taken over could
 * stat a path its uid can reach: metadata, nothing opened), close them,
 * check and duplicate them (libelf's fcntl(F_GETFD), the symbolizer's
 * F_DUPFD_CLOEXEC), take and give descriptors on its socket, seed its
 * hash tables (getrandom), and what glibc's qsort asks (sysinfo).
 * libdw's realpath() of /proc/self/fd/N (for a debug directory memsnap
 * never lets it search) fails instead.
 */
static const struct sandbox_call child_calls[] = {
	{ .nr = SYS_close, .arg = -1 },
	{ .nr = SYS_newfstatat, .arg = -1 },
	{ .nr = SYS_pread64, .arg = -1 },
	{ .nr = SYS_recvmsg, .arg = -1 },
	{ .nr = SYS_sendmsg, .arg = -1 },
	{ .nr = SYS_getrandom, .arg = -1 },
	{ .nr = SYS_sysinfo, .arg = -1 },
	{ .nr = SYS_fcntl, .arg = 1, .nok = 2,
	  .ok = { F_DUPFD_CLOEXEC, F_GETFD } },
	/* glibc's readlink() is readlinkat on arm64, which has no
	 * readlink */
#ifdef SYS_readlink
	{ .nr = SYS_readlink, .fail = EACCES },
#endif
	{ .nr = SYS_readlinkat, .fail = EACCES },
};

struct box {
	const struct options *opt;
	const struct report_args *a;
	struct sandbox sb;
	struct report_files *files;	/* what it may be handed */
	unsigned char *msg;	/* RW_MSG_MAX + 1: a longer one is seen */
	/* what the child had */
	unsigned int inputs;	/* a bit per report_input */
	uint32_t warnings, dropped;
	bool spoke;		/* any message at all */
	int said;		/* the status its ERROR announced, or 0 */
	/* the output */
	bool begun, ended;
	struct output o;
	bool o_open;
	int out_fd;
	uint64_t written;
};

/* The verdict of one message: go on, or stop with an exit status. */
#define GO_ON (-1)
/* A message out of turn: the child's verdict, not memsnap's. */
#define OUT_OF_TURN (-2)
/* Its end of the socket is closed: it is ending (its status says how). */
#define GONE (-3)

/* ---- answers ----------------------------------------------------------- */

static int answer(struct box *b, int32_t val, int fd)
{
	struct rw_head h = { .type = RW_FD, .val = val };
	/* a child that asks and does not read its answers speaks out of
	 * turn: the answer would not fit */
	int rc = seqpacket_send(b->sb.fd, &h, sizeof(h), fd, MSG_DONTWAIT);

	if (fd >= 0)
		close(fd);
	if (rc == -EPIPE || rc == -ECONNRESET)
		return GONE;	/* it died asking */
	return rc ? OUT_OF_TURN : GO_ON;
}

static int on_input(struct box *b, int32_t which, size_t len)
{
	const char *path = which == REPORT_BASE ? b->a->base : b->a->dump;
	char msg[4096];
	int fd, ret;

	if (len || (which != REPORT_DUMP && which != REPORT_BASE) || !path ||
	    (b->inputs & (1u << which)))
		return OUT_OF_TURN;
	b->inputs |= 1u << which;
	fd = profile_open(path, b->a->max_size);
	if (fd >= 0)
		return answer(b, 0, fd);
	/* memsnap's own open: memsnap says why, and ends the child */
	ret = report_load_error(path, fd, "", b->a->max_size, msg,
				sizeof(msg));
	error("%s", msg);
	return ret;
}

/* ---- the child's lines and its report ---------------------------------- */

static int on_line(struct box *b, uint32_t type, int32_t val,
		   const char *text, size_t len)
{
	if (len >= RW_TEXT_MAX || b->said)
		return OUT_OF_TURN;
	if (type == RW_ERROR) {
		if (val != EXIT_FAILURE_OTHER && val != EXIT_BAD_INPUT)
			return OUT_OF_TURN;
		b->said = val;
		error("%.*s", (int)len, text);
		return GO_ON;
	}
	if (++b->warnings > WARNINGS_MAX)
		b->dropped++;
	else
		warning(b->opt, "%.*s", (int)len, text);
	return GO_ON;
}

/* -o, as for dump (common/output.h): "-" is stdout, a device is written
 * to, a file is replaced only when complete. */
static int on_begin(struct box *b, size_t len)
{
	const char *out = b->a->out;
	int rc;

	if (len || b->begun || b->said)
		return OUT_OF_TURN;
	b->begun = true;
	progress_clear();
	if (!out || !strcmp(out, "-")) {
		b->out_fd = STDOUT_FILENO;
		return GO_ON;
	}
	rc = output_open(&b->o, out, true);
	if (!rc) {
		b->o_open = true;
		b->out_fd = b->o.fd;
		return GO_ON;
	}
	if (rc == -ELOOP && b->o.refused[0])
		error("'%s': '%s' is a symlink of another user; memsnap does not follow it",
		      out, b->o.refused);
	else
		error("'%s': %s", out, strerror(-rc));
	return diag_exit(DIAG_FAILED);
}

static void output_error(struct box *b, int rc)
{
	const char *out = b->a->out;

	error("%s%s%s: %s", out ? "'" : "", out ? out : "stdout",
	      out ? "'" : "", strerror(-rc));
}

static int on_data(struct box *b, const void *bytes, size_t len)
{
	char size[32];
	int rc;

	if (!b->begun || b->ended || b->said)
		return OUT_OF_TURN;
	if (len > b->a->max_size - b->written) {
		human_bytes(b->a->max_size, size, sizeof(size));
		return fail(DIAG_FAILED, "%s%s%s: the report is larger than --max-size (%s)",
			    b->a->out ? "'" : "", b->a->out ? b->a->out : "stdout",
			    b->a->out ? "'" : "", size);
	}
	b->written += len;
	rc = write_in_full(b->out_fd, bytes, len);
	if (rc) {
		output_error(b, rc);
		return diag_exit(DIAG_FAILED);
	}
	return GO_ON;
}

static int on_end(struct box *b, int32_t rc, size_t len)
{
	if (len || !b->begun || b->ended || b->said || rc > 0 || rc < -4095)
		return OUT_OF_TURN;
	b->ended = true;
	if (!rc)
		return GO_ON;
	output_error(b, rc);
	return diag_exit(DIAG_FAILED);
}

/* One message from the child; @fd: a descriptor that came with it. */
static int dispatch(struct box *b, size_t n, int fd)
{
	struct rw_head h;
	const char *bytes = (const char *)b->msg + sizeof(h);
	size_t len;

	if (n < sizeof(h) || n > RW_MSG_MAX)
		goto out_of_turn;
	memcpy(&h, b->msg, sizeof(h));
	len = n - sizeof(h);
	b->spoke = true;
	if (b->ended)
		goto out_of_turn;	/* nothing but its exit, now */
	if (h.type == RW_OPEN || h.type == RW_STEADY ||
	    h.type == RW_DEBUGINFOD) {
		int32_t val;
		int give;

		if (!report_files_answer(b->files, h.type, h.val, bytes, len,
					 fd, &val, &give))
			return OUT_OF_TURN;
		return answer(b, val, give);
	}
	if (fd >= 0)
		goto out_of_turn;
	switch (h.type) {
	case RW_INPUT:
		return on_input(b, h.val, len);
	case RW_PROGRESS:
		if (len || h.val < 0)
			return OUT_OF_TURN;
		progress_set("symbolizing the frames of %d mapped objects",
			     (int)h.val);
		return GO_ON;
	case RW_WARNING:
	case RW_ERROR:
		return on_line(b, h.type, h.val, bytes, len);
	case RW_BEGIN:
		return on_begin(b, len);
	case RW_DATA:
		return on_data(b, bytes, len);
	case RW_END:
		return on_end(b, h.val, len);
	}
out_of_turn:
	if (fd >= 0)
		close(fd);
	return OUT_OF_TURN;
}

/* ---- the child's end --------------------------------------------------- */

/*
 * The crash line, and status 10: what the child did (@what), or how it
 * ended when @what is NULL ("ended with SIGSEGV", "ended with status 3").
 */
static int parser_ended(struct box *b, const char *what)
{
	char st[64], how[80];

	if (!what) {
		const char *s = sandbox_status(&b->sb, st, sizeof(st));

		if (!strncmp(s, "killed by ", 10))
			s += 10;
		else if (!strncmp(s, "exited with ", 12))
			s += 12;
		snprintf(how, sizeof(how), "ended with %s", s);
		what = how;
	}
	return fail(DIAG_BAD_INPUT, "report: the parser %s (a hostile or corrupt input?)", what);
}

/* The socket has closed: the child's status, and what it means. */
static int verdict(struct box *b)
{
	int st;

	/* it has closed its end: it is exiting (or holds on, for a while) */
	if (!sandbox_wait(&b->sb, EXIT_MS))
		return parser_ended(b, "did not exit after its last word");
	st = b->sb.status;
	if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_OK && b->ended &&
	    !b->said)
		return EXIT_OK;
	if (WIFEXITED(st) && b->said && WEXITSTATUS(st) == b->said)
		return b->said;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !b->spoke)
		return fail(DIAG_FAILED, "report: the parser's sandbox could not be made");
	return parser_ended(b, NULL);
}

/*
 * In the child, before it is locked in: it has a copy of memsnap's
 * memory, and a child taken over could write what it finds there into
 * the report.  Nothing it parses needs the environment (root's, which
 * may hold a token or two; debuginfod is memsnap's to ask): its strings
 * are wiped, not only unset.
 */
static int prepare(void *arg)
{
	char **e;

	(void)arg;
	for (e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	return clearenv() ? -ENOMEM : 0;
}

static int start(struct box *b)
{
	struct sandbox_opts so = {
		.calls = child_calls,
		.ncalls = ARRAY_SIZE(child_calls),
		/* libdw maps whole object and debug files, a program's
		 * worth of them: no bound fits all (its memory is what the
		 * report's was in memsnap's own process) */
		.memory = SANDBOX_NO_LIMIT,
	};
	struct rlimit rl;
	int rc;

	/* room for every descriptor it holds: as many as memsnap may */
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		so.files = rl.rlim_cur == RLIM_INFINITY ? 1u << 20
							: (unsigned long)rl.rlim_cur;
	/* fork copies @b->a: the child's own */
	rc = sandbox_start_with(&b->sb, arch_audit, &so, prepare,
				report_child_serve, (void *)b->a);
	if (rc)
		error("report: the parser's sandbox could not be made: %s",
		      strerror(-rc));
	return rc;
}

int report_boxed(const struct options *opt, const struct report_args *a)
{
	struct box b = { .opt = opt, .a = a, .out_fd = -1 };
	int ret = GO_ON;

	b.msg = malloc(RW_MSG_MAX + 1);
	if (!b.msg || report_files_new(a->root, a->debuginfod, &b.files)) {
		free(b.msg);
		return fail(DIAG_FAILED, "report: %s", strerror(ENOMEM));
	}
	/* before the progress line's thread: the child forks from one */
	if (start(&b)) {
		ret = diag_exit(DIAG_FAILED);
		goto out;
	}
	progress_init(opt->quiet);
	progress_set("reading %s", a->dump);
	while (ret == GO_ON) {
		int fd;
		ssize_t n = seqpacket_recv(b.sb.fd, b.msg, RW_MSG_MAX + 1, &fd);

		if (!n || n == -ECONNRESET)
			ret = GONE;
		else
			ret = n < 0 ? OUT_OF_TURN : dispatch(&b, (size_t)n, fd);
	}
	if (b.dropped)
		warning(opt, "%u more warnings not shown", b.dropped);
	if (ret == GONE)
		ret = verdict(&b);
	else if (ret == OUT_OF_TURN)
		ret = parser_ended(&b, "spoke out of turn");
	if (ret == EXIT_OK && b.o_open) {
		int rc = output_commit(&b.o);

		b.o_open = false;
		if (rc) {
			output_error(&b, rc);
			ret = diag_exit(DIAG_FAILED);
		}
	}
	progress_clear();
out:
	if (b.o_open)
		output_abort(&b.o);
	sandbox_stop(&b.sb);
	report_files_free(b.files);
	free(b.msg);
	return ret;
}
