/*
 * report's parent (profile/box.h): memsnap starts the child that parses
 * and serves it over the socket (profile/box_wire.h), by memsnap's own
 * rules, trusting nothing it says:
 *
 *   - it is handed only the descriptors its caller opened, each input
 *     once, and files by memsnap's rules: ELF files beneath --root,
 *     their copies for libdw and debuginfod's (box_files.c);
 *   - every message is checked for its size, its order and a budget;
 *     a descriptor comes back only with STEADY, and only one;
 *   - its lines reach the voice, a bounded number of them; its report
 *     goes to -o or to the caller's sink, at most --max-size bytes
 *     each, and -o is committed only once the child has said the
 *     report is whole and has exited with 0;
 *   - its exit status is taken only if documented (BOX_FAILED or
 *     BOX_BAD_INPUT after its error line; 0 after its last report);
 *     any other end, a signal, or a message out of turn is one line:
 *
 *       memsnap: report: the parser ended with SIGSEGV (a hostile or corrupt input?)
 *
 *     and DIAG_BAD_INPUT, as for a dump that cannot be read: the input
 *     is what a parser crashes on.
 *
 * There is no time limit on the child: a report takes as long as its
 * dump (memsnap can be interrupted; the child dies with it).
 */
#include "profile/box_internal.h"

#include "common/fsio.h"
#include "common/output.h"
#include "common/sandbox.h"
#include "common/seqpacket.h"
#include "common/util.h"
#include "profile/box_wire.h"
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

/* The child's warnings passed on, at most. */
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
	const struct report_args *a;
	const struct voice *v;
	struct sandbox sb;
	struct report_files *files;	/* what it may be handed */
	unsigned char *msg;	/* RW_MSG_MAX + 1: a longer one is seen */
	/* what the child had */
	bool *handed;		/* per input */
	uint32_t warnings, dropped;
	bool spoke;		/* any message at all */
	int said;		/* the status its ERROR announced, or 0 */
	/* the output: of one report, or of input @k of each */
	bool begun, ended;
	size_t k;
	size_t done;		/* reports ended or inputs left out */
	struct output o;
	bool o_open;
	int out_fd;
	uint64_t written;
	enum diag_kind kind;	/* of the failure, once STOP */
};

/* The verdict of one message: go on, or stop (b->kind says why). */
#define GO_ON (-1)
/* A message out of turn: the child's verdict, not memsnap's. */
#define OUT_OF_TURN (-2)
/* Its end of the socket is closed: it is ending (its status says how). */
#define GONE (-3)
#define STOP (-4)

/* Stop after the line @fmt, a failure of kind @kind. */
static int stop(struct box *b, enum diag_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int stop(struct box *b, enum diag_kind kind, const char *fmt, ...)
{
	char line[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	voice_error(b->v, "%s", line);
	b->kind = kind;
	return STOP;
}

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

/* Input @k: a copy of the caller's descriptor, once. */
static int on_input(struct box *b, int32_t k, size_t len)
{
	int fd;

	if (len || k < 0 || (size_t)k >= b->a->n || b->handed[k])
		return OUT_OF_TURN;
	b->handed[k] = true;
	fd = fcntl(b->a->in[k].fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return stop(b, DIAG_FAILED, "'%s': %s", b->a->in[k].name,
			    strerror(errno));
	return answer(b, 0, fd);
}

/* ---- the child's lines and its report ---------------------------------- */

static int on_line(struct box *b, uint32_t type, int32_t val,
		   const char *text, size_t len)
{
	if (len >= RW_TEXT_MAX || b->said)
		return OUT_OF_TURN;
	if (type == RW_ERROR) {
		if (val != BOX_FAILED && val != BOX_BAD_INPUT)
			return OUT_OF_TURN;
		b->said = val;
		voice_error(b->v, "%.*s", (int)len, text);
		return GO_ON;
	}
	if (++b->warnings > WARNINGS_MAX)
		b->dropped++;
	else
		voice_warning(b->v, "%.*s", (int)len, text);
	return GO_ON;
}

/* -o, as for dump (common/output.h): "-" is stdout, a device is written
 * to, a file is replaced only when complete. */
static int open_out(struct box *b)
{
	const char *out = b->a->out;
	int rc;

	if (!out || (!strcmp(out, "-") && b->a->out_dir < 0)) {
		b->out_fd = STDOUT_FILENO;
		return GO_ON;
	}
	rc = b->a->out_dir >= 0 ? output_open_at(&b->o, b->a->out_dir, out, true)
				: output_open(&b->o, out, true);
	if (!rc) {
		b->o_open = true;
		b->out_fd = b->o.fd;
		return GO_ON;
	}
	if (rc == -ELOOP && b->o.refused[0])
		return stop(b, DIAG_FAILED, "'%s': '%s' is a symlink of "
			    "another user; memsnap does not follow it", out,
			    b->o.refused);
	return stop(b, DIAG_FAILED, "'%s': %s", out, strerror(-rc));
}

/* Report @k begins: one report once, or each input's in order after
 * the last one's end. */
static int on_begin(struct box *b, int32_t k, size_t len)
{
	const struct report_sink *sink = b->a->sink;
	int rc;

	if (len || b->begun || b->said || k < 0 || (size_t)k >= b->a->n ||
	    !b->handed[k] || (b->ended && !b->a->each))
		return OUT_OF_TURN;
	b->begun = true;
	b->ended = false;
	b->k = (size_t)k;
	b->written = 0;
	voice_progress_done(b->v);
	if (!sink)
		return open_out(b);
	rc = sink->begin(sink->arg, b->k);
	return rc ? stop(b, DIAG_FAILED, "report: %s", strerror(-rc)) : GO_ON;
}

static int write_error(struct box *b, int rc)
{
	const char *out = b->a->sink ? NULL : b->a->out;

	return stop(b, DIAG_FAILED, "%s%s%s: %s", out ? "'" : "",
		    out ? out : b->a->sink ? "report" : "stdout",
		    out ? "'" : "", strerror(-rc));
}

static int on_data(struct box *b, const void *bytes, size_t len)
{
	const struct report_sink *sink = b->a->sink;
	char size[32];
	int rc;

	if (!b->begun || b->said)
		return OUT_OF_TURN;
	if (len > b->a->max_size - b->written) {
		human_bytes(b->a->max_size, size, sizeof(size));
		return stop(b, DIAG_FAILED, "%s%s%s: the report is larger "
			    "than --max-size (%s)", b->a->out ? "'" : "",
			    b->a->out ? b->a->out : "stdout",
			    b->a->out ? "'" : "", size);
	}
	b->written += len;
	rc = sink ? sink->data(sink->arg, bytes, len)
		  : write_in_full(b->out_fd, bytes, len);
	return rc ? write_error(b, rc) : GO_ON;
}

static int on_end(struct box *b, int32_t rc, size_t len)
{
	const struct report_sink *sink = b->a->sink;

	if (len || !b->begun || b->said || rc > 0 || rc < -4095)
		return OUT_OF_TURN;
	b->begun = false;
	b->ended = true;
	b->done++;
	if (sink && (rc = sink->end(sink->arg, b->k, rc)))
		return write_error(b, rc);
	return rc ? write_error(b, rc) : GO_ON;
}

/* Input @k, handed over, is left out: a run of each input goes on. */
static int on_skip(struct box *b, int32_t k, size_t len)
{
	const struct report_sink *sink = b->a->sink;
	int rc;

	if (len || !b->a->each || b->begun || b->said || k < 0 ||
	    (size_t)k >= b->a->n || !b->handed[k])
		return OUT_OF_TURN;
	b->done++;
	rc = sink ? sink->end(sink->arg, (size_t)k, -ENODATA) : 0;
	return rc ? write_error(b, rc) : GO_ON;
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
		voice_progress(b->v, "symbolizing the frames of %d mapped "
			       "objects", (int)h.val);
		return GO_ON;
	case RW_WARNING:
	case RW_ERROR:
		return on_line(b, h.type, h.val, bytes, len);
	case RW_SKIP:
		return on_skip(b, h.val, len);
	case RW_BEGIN:
		return on_begin(b, h.val, len);
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
 * The crash line, DIAG_BAD_INPUT: what the child did (@what), or how it
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
	return stop(b, DIAG_BAD_INPUT, "report: the parser %s (a hostile or "
		    "corrupt input?)", what);
}

/* The socket has closed: the child's status, and what it means. */
static int verdict(struct box *b)
{
	int st;

	/* it has closed its end: it is exiting (or holds on, for a while) */
	if (!sandbox_wait(&b->sb, EXIT_MS))
		return parser_ended(b, "did not exit after its last word");
	st = b->sb.status;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !b->said && !b->begun &&
	    b->done == (b->a->each ? b->a->n : 1))
		return 0;
	if (WIFEXITED(st) && b->said && WEXITSTATUS(st) == b->said) {
		b->kind = b->said == BOX_BAD_INPUT ? DIAG_BAD_INPUT
						   : DIAG_FAILED;
		return STOP;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !b->spoke)
		return stop(b, DIAG_FAILED, "report: the parser's sandbox "
			    "could not be made");
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
	rc = sandbox_start_with(&b->sb, sandbox_native_audit(), &so, prepare,
				report_child_serve, (void *)b->a);
	if (rc)
		return stop(b, DIAG_FAILED, "report: the parser's sandbox could "
			    "not be made: %s", strerror(-rc));
	return GO_ON;
}

int report_run(const struct report_args *a, const struct voice *v,
	       enum diag_kind *kind)
{
	struct box b = { .a = a, .v = v, .out_fd = -1 };
	int ret = GO_ON;

	b.msg = malloc(RW_MSG_MAX + 1);
	b.handed = calloc(a->n ? a->n : 1, sizeof(*b.handed));
	if (!b.msg || !b.handed ||
	    report_files_new(a->root, a->debuginfod, &b.files)) {
		free(b.msg);
		free(b.handed);
		*kind = DIAG_FAILED;
		voice_error(v, "report: %s", strerror(ENOMEM));
		return -1;
	}
	/* before the progress line's thread: the child forks from one */
	ret = start(&b);
	if (ret == GO_ON)
		voice_progress(v, "reading %s", a->n ? a->in[0].name : "");
	while (ret == GO_ON) {
		int fd;
		ssize_t n = seqpacket_recv(b.sb.fd, b.msg, RW_MSG_MAX + 1, &fd);

		if (!n || n == -ECONNRESET)
			ret = GONE;
		else
			ret = n < 0 ? OUT_OF_TURN : dispatch(&b, (size_t)n, fd);
	}
	if (b.dropped)
		voice_warning(v, "%u more warnings not shown", b.dropped);
	if (ret == GONE)
		ret = verdict(&b);
	else if (ret == OUT_OF_TURN)
		ret = parser_ended(&b, "spoke out of turn");
	if (!ret && b.o_open) {
		int rc = output_commit(&b.o);

		b.o_open = false;
		if (rc)
			ret = write_error(&b, rc);
	}
	voice_progress_done(v);
	if (b.o_open)
		output_abort(&b.o);
	if (b.sb.pid > 0)
		sandbox_stop(&b.sb);
	report_files_free(b.files);
	free(b.msg);
	free(b.handed);
	*kind = b.kind;
	return ret ? -1 : 0;
}
