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
#include "cli/session.h"

#include "cli/progress.h"

#include "allocators/allocator.h"
#include "common/json.h"
#include "common/util.h"
#include "symbols/detect.h"
#include "symbols/objects.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int cmd_call(const struct options *opt, int argc, char **argv)
{
	struct inject_call call = { 0 };
	struct inject_result res = { 0 };
	struct target t = { 0 };
	struct symbol fn;
	const char *name;
	uint64_t addr;
	int i, rc = 0, ex = diag_exit(DIAG_FAILED);

	if (argc < 2)
		return fail(DIAG_USAGE, "call: which function? (see memsnap --help)");
	name = argv[1];
	for (i = 2; i < argc; i++) {
		struct inject_arg *a = &call.args[call.nargs];
		const char *v = argv[i];
		size_t len = strlen(v);
		uint64_t iv;

		/* "--" lets negative numbers through option parsing. */
		if (!strcmp(v, "--"))
			continue;
		if (call.nargs == INJECT_MAX_ARGS)
			return fail(DIAG_USAGE, "call: at most %d arguments", INJECT_MAX_ARGS);
		call.nargs++;

		if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
			v++;
			len -= 2;
		} else if (parse_int_arg(v, &iv)) {
			a->kind = INJECT_ARG_INT;
			a->value = iv;
			continue;
		}
		if (len + 1 > INJECT_MAX_BUF_BYTES / 2)
			return fail(DIAG_USAGE, "call: argument %d: string too long", i - 1);
		a->kind = INJECT_ARG_BUF;
		a->buf = call.nbufs;
		/* The copy in argv is NUL-terminated where we cut it. */
		if (v != argv[i])
			argv[i][len + 1] = '\0';
		call.bufs[call.nbufs].in = v;
		call.bufs[call.nbufs].len = len + 1;
		call.nbufs++;
	}

	/* The view and the session every command uses (cli/session.c). */
	ex = target_view(opt, "call", &t);
	if (ex)
		goto out;
	memset(&fn, 0, sizeof(fn));
	if (!strncmp(name, "0x", 2) && !parse_u64(name, 16, &addr)) {
		fn.addr = addr;
	} else if ((rc = resolve(t.os, &t.det.order, name, &fn))) {
		if (rc == -ENOENT)
			error("call: pid %d: no function '%s' in any object",
			      (int)opt->pid, name);
		else
			error_errno(rc, "call: pid %d: looking for '%s'",
				    (int)opt->pid, name);
		ex = diag_exit(DIAG_FAILED);
		goto out;
	}
	call.fn = fn.addr;
	rc = target_open_session(opt, &t);
	if (rc) {
		ex = target_error(&t, "call", rc);
		goto out;
	}
	progress_set("calling %s in pid %d, thread %d", name,
		     (int)opt->pid, (int)t.tid);
	if (fn.type == STT_GNU_IFUNC) {
		/* An IFUNC symbol is its resolver: ask it for the function. */
		struct inject_call r = { .fn = fn.addr };

		rc = alloc_call_function(t.s, &r, &res);
		call.fn = res.ret;
	}
	if (!rc)
		rc = alloc_call_function(t.s, &call, &res);
	if (rc)
		ex = target_error(&t, "call", target_interrupted() ? -EINTR : rc);
	rc = target_detach(opt, "call", &t);
	if (!ex)
		ex = rc;
	if (ex)
		goto out;
	if (opt->json) {
		struct json j;

		json_init(&j, stdout);
		json_object_begin(&j, NULL);
		json_string(&j, "function", name);
		json_hex(&j, "address", fn.addr);
		json_i64(&j, "tid", t.tid);
		json_u64(&j, "return", res.ret);
		json_i64(&j, "return_signed", (int64_t)res.ret);
		json_hex(&j, "return_hex", res.ret);
		json_object_end(&j);
		json_finish(&j);
	} else {
		printf("%" PRIu64 " (signed %" PRId64 ", 0x%" PRIx64 ")\n",
		       res.ret, (int64_t)res.ret, res.ret);
	}
	if (target_interrupted())
		ex = target_error(&t, "call", -EINTR);
out:
	target_free(&t);
	return ex;
}
