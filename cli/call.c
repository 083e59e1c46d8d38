/*
 * memsnap --pid N call SYMBOL [ARG...]: call any function in the target
 * on one borrowed thread and print what it returned.
 *
 *   memsnap --pid 4242 call getpid
 *   memsnap --pid 4242 call malloc_trim 0
 *   memsnap --pid 4242 call setenv '"MALLOC_ARENA_MAX"' '"2"' 1
 *
 * SYMBOL is looked up in the objects in the dynamic linker's search
 * order (the first definition wins, as for the program itself); 0xADDR
 * is taken as an address.  An ARG that reads as an integer (decimal,
 * 0x hex, negative) is passed as one; anything else, or text in double
 * quotes, is passed as a pointer to a NUL-terminated copy placed on the
 * borrowed thread's stack.  The return value is printed as an unsigned,
 * a signed and a hex number.
 */
#include "cli/cli.h"
#include "cli/target.h"

#include "cli/progress.h"

#include "allocators/allocator.h"
#include "proc/diagnose.h"
#include "proc/procinfo.h"
#include "common/json.h"
#include "proc/procfs.h"
#include "common/util.h"
#include "injector/inject.h"
#include "symbols/detect.h"
#include "symbols/linkmap.h"
#include "proc/maps.h"
#include "symbols/objects.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile int call_interrupted;

static void on_signal(int sig)
{
	call_interrupted = sig;
}

/* The first definition of @name in search order. */
static int resolve(struct objects *os, const struct search_order *so,
		   const char *name, struct symbol *out)
{
	size_t i;

	for (i = 0; i < so->n; i++) {
		struct object *obj = so->v[i];

		int rc;

		if (!obj->exec)
			continue;
		rc = object_lookup(os, obj, name, 0, out);
		if (!rc || err_is_starved(rc))
			return rc;
	}
	return -ENOENT;
}

static bool parse_int_arg(const char *s, uint64_t *out)
{
	uint64_t v;

	if (*s == '-') {
		if (parse_u64(s + 1, 0, &v) || v > (uint64_t)INT64_MAX + 1)
			return false;
		*out = (uint64_t)0 - v;
		return true;
	}
	return parse_u64(s, 0, out) == 0;
}

/* "name+0xoff (libfoo.so)" or "libfoo.so+0xoff" for @pc into @buf. */
static const char *describe_pc(struct objects *os, uint64_t pc, char *buf,
			       size_t size)
{
	struct symbol sym;

	if (objects_symbolize(os, pc, &sym))
		snprintf(buf, size, "?");
	else if (sym.name)
		snprintf(buf, size, "%s+0x%" PRIx64 " (%s)", sym.name,
			 sym.offset, path_base(sym.obj->path));
	else
		snprintf(buf, size, "%s+0x%" PRIx64, path_base(sym.obj->path),
			 sym.offset);
	return buf;
}

/*
 * The engine's reasons, one per line, each "... at 0xADDR ..." followed
 * by what is at that address.
 */
static void print_why(const char *why, struct objects *os)
{
	const char *line = why;

	while (*line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *at = memmem(line, len, " at 0x", 6);
		char sym[300];

		if (at) {
			uint64_t pc = strtoull(at + 4, NULL, 16);

			fprintf(stderr, "  %.*s: %s\n", (int)len, line,
				describe_pc(os, pc, sym, sizeof(sym)));
		} else {
			fprintf(stderr, "  %.*s\n", (int)len, line);
		}
		line += len + (eol ? 1 : 0);
	}
}

static void print_backtrace(struct inject_session *s, struct objects *os)
{
	uint64_t pcs[64];
	size_t n = inject_backtrace(s, pcs, ARRAY_SIZE(pcs)), i;

	for (i = 0; i < n; i++) {
		char sym[300];

		fprintf(stderr, "  #%zu 0x%" PRIx64 " %s\n", i, pcs[i],
			describe_pc(os, pcs[i], sym, sizeof(sym)));
	}
}

static int attach_error(pid_t pid, int rc, const char *why,
			struct objects *os)
{
	char diag[512];

	switch (rc) {
	case -ESRCH:
		error("pid %d: no such process%s%s", (int)pid,
		      why[0] ? ": " : "", why);
		return exit_for(rc, true);
	case -EPERM:
	case -EACCES:
		diagnose_access(pid, true, diag, sizeof(diag));
		error("attach %d: ptrace(PTRACE_SEIZE): %s%s%s", (int)pid,
		      strerror(-rc), diag[0] ? ": " : "", diag);
		return exit_for(rc, true);
	case -EBUSY:
		error("attach %d: %s", (int)pid, why);
		return exit_for(rc, true);
	case -EAGAIN:
		error("%s", why);
		return exit_for(rc, true);
	case -EOPNOTSUPP:
		/* One reason (seccomp, a shadow stack): one line. */
		if (why[0] && !strchr(why, '\n')) {
			error("pid %d: %s; memsnap cannot call into this process safely",
			      (int)pid, why);
			return exit_for(rc, true);
		}
		error("pid %d: no thread can be borrowed:", (int)pid);
		print_why(why, os);
		return exit_for(rc, true);
	case -EDEADLK:
		error("pid %d: no thread is safe to call from:", (int)pid);
		print_why(why, os);
		return exit_for(rc, true);
	case -EINTR:
		error("interrupted; pid %d untouched", (int)pid);
		return exit_for(rc, true);
	case -ENOEXEC:
		error("attach %d: %s", (int)pid, msg_no_syscall_code);
		return exit_for(rc, true);
	default:
		error("attach %d: %s%s%s", (int)pid, strerror(-rc),
		      why[0] ? ": " : "", why);
		return exit_for(rc, true);
	}
}

int cmd_call(const struct options *opt, int argc, char **argv)
{
	struct sigaction sa, old[3];
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct inject_opts io = { 0 };
	struct inject_call call = { 0 };
	struct inject_result res = { 0 };
	struct inject_session *s = NULL;
	struct search_order *so;
	struct target t = { 0 };
	struct objects *os = NULL;
	struct alloc_fence *fence = NULL;
	struct symbol fn, eloc;
	char why[4096] = "";
	const char *name;
	uint64_t addr;
	int i, rc, rc2, ex = EXIT_FAILURE_OTHER;

	if (argc < 2) {
		error("call: which function? (see memsnap --help)");
		return EXIT_USAGE;
	}
	name = argv[1];
	for (i = 2; i < argc; i++) {
		struct inject_arg *a = &call.args[call.nargs];
		const char *v = argv[i];
		size_t len = strlen(v);
		uint64_t iv;

		/* "--" lets negative numbers through option parsing. */
		if (!strcmp(v, "--"))
			continue;
		if (call.nargs == INJECT_MAX_ARGS) {
			error("call: at most %d arguments", INJECT_MAX_ARGS);
			return EXIT_USAGE;
		}
		call.nargs++;

		if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
			v++;
			len -= 2;
		} else if (parse_int_arg(v, &iv)) {
			a->kind = INJECT_ARG_INT;
			a->value = iv;
			continue;
		}
		if (len + 1 > INJECT_MAX_BUF_BYTES / 2) {
			error("call: argument %d: string too long", i - 1);
			return EXIT_USAGE;
		}
		a->kind = INJECT_ARG_BUF;
		a->buf = call.nbufs;
		/* The copy in argv is NUL-terminated where we cut it. */
		if (v != argv[i])
			argv[i][len + 1] = '\0';
		call.bufs[call.nbufs].in = v;
		call.bufs[call.nbufs].len = len + 1;
		call.nbufs++;
	}

	/* The view every command loads (cli/target.c), pinned first. */
	ex = target_view(opt, "call", &t);
	if (ex)
		goto out;
	ex = EXIT_FAILURE_OTHER;
	if (opt->tid && !target_has_thread(&t, opt->tid)) {
		error("call %d: thread %d is not a thread of pid %d",
		      (int)opt->pid, (int)opt->tid, (int)opt->pid);
		ex = exit_for(-ECHILD, false);
		goto out;
	}
	os = t.os;
	so = &t.det.order;
	memset(&fn, 0, sizeof(fn));
	if (!strncmp(name, "0x", 2) && !parse_u64(name, 16, &addr)) {
		fn.addr = addr;
	} else if ((rc = resolve(os, so, name, &fn))) {
		if (rc == -ENOENT)
			error("call: pid %d: no function '%s' in any object",
			      (int)opt->pid, name);
		else
			error("call: pid %d: looking for '%s': %s",
			      (int)opt->pid, name, strerror(-rc));
		ex = EXIT_FAILURE_OTHER;
		goto out;
	}
	fence = calloc(1, sizeof(*fence));
	if (!fence)
		goto out_oom;
	alloc_fence_build(os, &t.det, fence);

	io.tid = opt->tid;
	io.timeout_ms = opt->timeout_ms;
	io.forbidden = fence->v;
	io.nforbidden = fence->n;
	io.interrupted = &call_interrupted;
	io.why = why;
	io.why_size = sizeof(why);
	io.start_time = t.pi.start_time;
	io.pidfd = t.pidfd;
	io.pi = &t.pi;
	io.maps = t.maps;
	if (!resolve(os, so, "__errno_location", &eloc))
		io.errno_location = eloc.addr;
	call.fn = fn.addr;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);

	progress_set("waiting for a thread of pid %d that is safe to borrow",
		     (int)opt->pid);
	rc = inject_open(opt->pid, &io, &s);
	if (rc) {
		ex = attach_error(opt->pid, rc, why, os);
		goto out_sig;
	}
	progress_set("calling %s in pid %d, thread %d", name,
		     (int)opt->pid, (int)inject_tid(s));
	if (fn.type == STT_GNU_IFUNC) {
		/* An IFUNC symbol is its resolver: ask it for the function. */
		struct inject_call r = { .fn = fn.addr };

		rc = inject_call(s, &r, &res);
		call.fn = res.ret;
	}
	if (!rc)
		rc = inject_call(s, &call, &res);
	rc2 = inject_finish(s);
	progress_clear();
	if (rc2 && !rc) {
		error("pid %d: restoring thread %d failed", (int)opt->pid,
		      (int)inject_tid(s));
		ex = EXIT_FAILURE_OTHER;
		goto out_sig;
	}
	if (opt->timings) {
		struct inject_timings tm;

		inject_timings(s, &tm);
		target_print_timings(&t, inject_tid(s), &tm);
	}
	switch (rc) {
	case 0:
		if (opt->json) {
			struct json j;

			json_init(&j, stdout);
			json_object_begin(&j, NULL);
			json_string(&j, "function", name);
			json_hex(&j, "address", fn.addr);
			json_i64(&j, "tid", inject_tid(s));
			json_u64(&j, "return", res.ret);
			json_i64(&j, "return_signed", (int64_t)res.ret);
			json_hex(&j, "return_hex", res.ret);
			json_object_end(&j);
			json_finish(&j);
		} else {
			printf("%" PRIu64 " (signed %" PRId64 ", 0x%" PRIx64
			       ")\n", res.ret, (int64_t)res.ret, res.ret);
		}
		ex = EXIT_OK;
		break;
	case -ETIMEDOUT:
		error("call %s: pid %d: %s; its stack now:", name,
		      (int)opt->pid, inject_detail(s));
		print_backtrace(s, os);
		ex = exit_for(rc, false);
		break;
	case -EFAULT:
		error("call %s: pid %d: %s; thread %d was restored, but what "
		      "the function changed (an allocator's state) may be "
		      "inconsistent; its stack:", name, (int)opt->pid,
		      inject_detail(s), (int)inject_tid(s));
		print_backtrace(s, os);
		ex = exit_for(rc, false);
		break;
	case -ESRCH:
		error("call %s: pid %d: %s", name, (int)opt->pid,
		      inject_detail(s)[0] ? inject_detail(s) : "process gone");
		ex = exit_for(rc, false);
		break;
	case -EINTR:
		ex = exit_for(rc, false);
		break;
	default:
		error("call %s: pid %d: %s%s%s", name, (int)opt->pid,
		      strerror(-rc), inject_detail(s)[0] ? ": " : "",
		      inject_detail(s));
		ex = exit_for(rc, false);
		break;
	}
	if (call_interrupted && ex != EXIT_TIMEOUT) {
		error("interrupted by signal %d; thread %d restored",
		      call_interrupted, (int)inject_tid(s));
		ex = EXIT_INTERRUPTED;
	}
out_sig:
	inject_close(s);
	for (i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	goto out;
out_oom:
	error("call: %s", strerror(ENOMEM));
	ex = EXIT_FAILURE_OTHER;
out:
	free(fence);
	target_free(&t);
	return ex;
}
