/*
 * memsnap --pid N trim: ask the allocator to give free memory back to
 * the system (malloc_trim(0), arena purge, ReleaseFreeMemory,
 * mi_collect(true)) and show the process's RSS before and after.
 */
#include "cli/cli.h"

#include "allocators/allocator.h"
#include "cli/session.h"
#include "common/json.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmRSS of /proc/PID/status in bytes; 0 and -errno if unreadable. */
static int rss_bytes(pid_t pid, uint64_t *out)
{
	char *buf, *p;
	uint64_t kib;
	int rc;

	*out = 0;
	rc = proc_read_status(pid, "status", &buf);
	if (rc)
		return rc;
	p = strstr(buf, "\nVmRSS:");
	if (!p) {
		free(buf);
		return -ENOENT;
	}
	p += 7;
	while (*p == ' ' || *p == '\t')
		p++;
	kib = strtoull(p, NULL, 10);
	free(buf);
	*out = kib * 1024;
	return 0;
}

int cmd_trim(const struct options *opt, int argc, char **argv)
{
	struct alloc_trim_result res = { 0 };
	uint64_t before = 0, after = 0;
	bool json = opt->json;
	char b1[32], b2[32], b3[32];
	struct target t;
	int i, ret, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
			continue;
		}
		return fail(DIAG_USAGE, "trim: %s '%s' (see memsnap --help)",
			    argv[i][0] == '-' ? "unknown option"
			    : "unexpected argument",
			    argv[i]);
	}
	ret = target_load(opt, "trim", ALLOC_CAN_TRIM, &t);
	if (ret)
		goto out;
	ret = target_attach(opt, "trim", &t);
	if (ret)
		goto out;
	rss_bytes(t.pi.pid, &before);
	rc = alloc_trim(t.s, t.a, &res);
	if (rc)
		ret = target_error(&t, "trim",
				   target_interrupted() ? -EINTR : rc);
	rss_bytes(t.pi.pid, &after);
	rc = target_detach(opt, "trim", &t);
	if (!ret)
		ret = rc;
	if (ret)
		goto out;
	if (json) {
		struct json j;

		target_json_begin(&t, &j);
		json_string(&j, "call", res.how);
		json_u64(&j, "rss_before", before);
		json_u64(&j, "rss_after", after);
		json_i64(&j, "rss_change", (int64_t)(after - before));
		if (res.have_released)
			json_bool(&j, "released", res.released);
		else
			json_null(&j, "released");
		json_object_end(&j);
		json_finish(&j);
	} else {
		human_bytes(before, b1, sizeof(b1));
		human_bytes(after, b2, sizeof(b2));
		human_bytes(before > after ? before - after : after - before,
			    b3, sizeof(b3));
		printf("pid %d: %s: RSS %s -> %s (%s%s)%s\n", (int)t.pi.pid,
		       res.how, b1, b2, before > after ? "-" : "+", b3,
		       !res.have_released ? ""
		       : res.released	  ? ", memory was released"
					  : ", nothing to release");
	}
	if (target_interrupted())
		ret = target_error(&t, "trim", -EINTR);
out:
	target_free(&t);
	return ret;
}
