/*
 * memsnap --pid N dump [-o FILE]: the allocator's heap profile, written
 * by the target into a private directory of its own view and collected
 * here (docs/DESIGN.md, "Files in the target's view").  Prints the path
 * of the result; nothing with -o - or a device.
 */
#include "cli/cli.h"
#include "cli/dump.h"

#include "allocators/allocator.h"
#include "agent/dumpdir.h"
#include "cli/progress.h"
#include "cli/sampling.h"
#include "cli/session.h"
#include "common/json.h"
#include "common/output.h"
#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int parse_args(int argc, char **argv, const char **out)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*out = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:o:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!optarg[0])
				return fail(DIAG_USAGE, "dump: -o needs a file name (see memsnap --help)");
			*out = optarg;
			break;
		case ':':
			return fail(DIAG_USAGE, "dump: %s needs a value (see memsnap --help)",
				    argv[optind - 1]);
		default:
			return fail(DIAG_USAGE, "dump: unknown option '%s' (see memsnap --help)",
				    argv[optind - 1]);
		}
	}
	if (optind < argc)
		return fail(DIAG_USAGE, "dump: unexpected argument '%s' (see memsnap --help)",
			    argv[optind]);
	return EXIT_OK;
}

/*
 * The profile in @fd to @to: @to->name in @to->dir_fd, made new there
 * (nothing planted there is written through); else -o's path, or the
 * first free default name.  Its name into @final; @refused, a symlink
 * -o did not follow (PATH_MAX bytes).  0 or -errno.
 */
static int write_out(const struct options *opt, const struct target *t,
		     int fd, const struct dump_to *to, char *final,
		     size_t size, uint64_t *bytes, bool *in_place,
		     char *refused)
{
	time_t now = time(NULL);
	unsigned int attempt;
	struct output o;
	int rc = -EEXIST;

	refused[0] = '\0';
	for (attempt = 1; rc == -EEXIST && attempt < 100; attempt++) {
		if (to->dir_fd >= 0)
			snprintf(final, size, "%s", to->name);
		else if (to->path)
			snprintf(final, size, "%s", to->path);
		else
			output_default_name(t->pi.pid, now, attempt, final,
					    size);
		if (lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		rc = to->dir_fd >= 0
			     ? output_open_at(&o, to->dir_fd, to->name, false)
			     : output_open(&o, final, to->path != NULL);
		if (rc == -ELOOP)
			snprintf(refused, PATH_MAX, "%s", o.refused);
		if (rc)
			continue;
		rc = copy_fd_max(fd, o.fd, opt->max_size, bytes);
		if (rc)
			output_abort(&o);
		else
			*in_place = o.dir_fd < 0;
		if (!rc)
			rc = output_commit(&o);
		if (to->dir_fd >= 0 || to->path)
			break;
	}
	return rc;
}

/*
 * Copy the result to @to; its name into @final, *@in_place when it was
 * written to standard output, a device or FIFO.  The result is the file
 * the target wrote in @d, or @memfd when the allocator handed the
 * profile back in memory.
 */
static int collect(const struct options *opt, struct target *t,
		   struct dumpdir *d, int memfd, const struct dump_to *to,
		   char *final, size_t size, uint64_t *bytes, bool *in_place)
{
	char head[8] = "", refused[PATH_MAX];
	struct stat st;
	int fd, rc;

	if (memfd >= 0) {
		fd = dup(memfd);
		if (fd < 0 || fstat(fd, &st)) {
			error_errno(errno, "dump %d", (int)t->pi.pid);
			if (fd >= 0)
				close(fd);
			return diag_exit(DIAG_FAILED);
		}
		*bytes = (uint64_t)st.st_size;
		/* the target's memfd: its size first, as for its file */
		if (*bytes > opt->max_size) {
			close(fd);
			fd = -EFBIG;
		}
	} else {
		dumpdir_set_max(d, opt->max_size);
		fd = dumpdir_open_result(d, bytes);
	}
	if (fd == -EFBIG) {
		dump_size_error(t->pi.pid, opt->max_size);
		return diag_exit(DIAG_FAILED);
	}
	if (fd < 0)
		return fail(DIAG_FAILED, "dump %d: reading %s: %s", (int)t->pi.pid,
			    dumpdir_here(d), dumpdir_result_why(fd));
	if (pread(fd, head, sizeof(head) - 1, 0) < 0 ||
	    (strncmp(head, "heap_v2", 7) && strncmp(head, "heap pr", 7)))
		warning(opt, "dump %d: the file does not look like a heap "
			"profile", (int)t->pi.pid);
	rc = write_out(opt, t, fd, to, final, size, bytes, in_place, refused);
	close(fd);
	if (rc == -EFBIG) {
		dump_size_error(t->pi.pid, opt->max_size);
		return diag_exit(DIAG_FAILED);
	}
	if (rc == -ELOOP && refused[0])
		return fail(DIAG_FAILED, "dump %d: writing '%s': '%s' is a symlink of another user; memsnap does not follow it",
			    (int)t->pi.pid, final, refused);
	if (rc)
		return fail(DIAG_FAILED, "dump %d: writing '%s': %s", (int)t->pi.pid,
			    final, rc == -EEXIST && to->dir_fd >= 0
			    ? "something is there already; nothing was written "
			      "through it" : strerror(-rc));
	return EXIT_OK;
}

/* --json: the reply of a dump. */
static void print_json(const struct target *t, const struct dump_done *dd)
{
	const struct sampler_dump *sd = dd->sampler ? &dd->sd : NULL;
	struct json j;

	target_json_begin(t, &j);
	json_string(&j, "path", dd->final);
	json_u64(&j, "bytes", dd->bytes);
	if (sd) {
		json_u64(&j, "samples", sd->live);
		json_u64(&j, "samples_taken", sd->st.samples);
		json_u64(&j, "samples_freed", sd->st.freed);
		json_u64(&j, "stacks", sd->stacks);
		json_u64(&j, "mean", sd->st.mean);
		if (sd->spent) {
			json_u64(&j, "samples_cut", sd->cut);
			json_string(&j, "budget_spent", sd->spent);
		}
		if (sd->lost)
			json_u64(&j, "samples_unwinder_failed", sd->lost);
	}
	json_object_begin(&j, "timings");
	json_u64(&j, "stopped_us",
		 t->timings.seize_us + t->timings.check_us +
			 t->timings.save_us + t->timings.call_us +
			 t->timings.restore_us + t->timings.detach_us);
	json_u64(&j, "seize_us", t->timings.seize_us);
	json_u64(&j, "check_us", t->timings.check_us);
	json_u64(&j, "save_us", t->timings.save_us);
	json_u64(&j, "call_us", t->timings.call_us);
	json_u64(&j, "restore_us", t->timings.restore_us);
	json_u64(&j, "detach_us", t->timings.detach_us);
	json_u64(&j, "threads_stopped", t->timings.threads_stopped);
	json_object_end(&j);
	json_object_end(&j);
	json_finish(&j);
}

/* The sampler is on: its records make the profile, and no thread is
 * stopped for it. */
static int dump_sampler(const struct options *opt, struct target *t,
			const struct dump_to *to, struct dump_done *dd)
{
	struct sampler_dump *sd = &dd->sd;
	int ret, memfd = -1;

	dd->sampler = true;
	ret = sampler_cmd_dump(opt, t, sd, &memfd);
	if (ret)
		return ret;
	if (lseek(memfd, 0, SEEK_SET) < 0) {
		error_errno(errno, "dump %d", (int)t->pi.pid);
		close(memfd);
		return diag_exit(DIAG_FAILED);
	}
	ret = collect(opt, t, NULL, memfd, to, dd->final, sizeof(dd->final),
		      &dd->bytes, &dd->in_place);
	close(memfd);
	if (ret)
		return ret;
	if (opt->timings)
		fprintf(stderr, "memsnap: timings: pid %d: no thread stopped "
			"(the sampler's records were read)\n",
			(int)t->pi.pid);
	/* churn: a profile of live blocks is empty when each was freed */
	if (!sd->live && sd->st.samples)
		note(opt, "pid %d: the profile is empty: %s %" PRIu64
		     " block%s sampled since prof on %s freed since (the "
		     "process allocates and frees; no sampled block is "
		     "live)%s", (int)t->pi.pid,
		     sd->st.samples == 1 ? "the" : "all", sd->st.samples,
		     sd->st.samples == 1 ? "" : "s",
		     sd->st.samples == 1 ? "was" : "were",
		     sd->freed_kept[0] + sd->freed_kept[1]
			     ? ": `memsnap report --alloc` shows where they "
			       "were allocated"
			     : "");
	if (sd->st.dropped)
		warning(opt, "pid %d: %" PRIu64 " samples found the sampler's "
			"table full and were dropped: the profile undercounts "
			"(prof off, then prof on --sampler with a larger "
			"--sample-bytes)", (int)t->pi.pid, sd->st.dropped);
	return EXIT_OK;
}

/* Through the allocator's profiler: one borrowed thread. */
static int dump_allocator(const struct options *opt, struct target *t,
			  const struct dump_to *to, struct dump_done *dd)
{
	struct dumpdir *d = NULL;
	bool to_fd = false;
	int ret, rc, memfd = -1;

	ret = target_pick(opt, "dump", ALLOC_CAN_DUMP, t);
	if (ret)
		return ret;
	/* Before attaching: the thread is stopped for the call only.  An
	 * allocator that writes a file by name writes a memfd of the
	 * target's where it can, and the agent is started only if not. */
	ret = target_dumpdir(t, "dump", DUMPDIR_DEFERRED, &d);
	if (ret)
		return ret;
	/* Where a profile handed back in memory goes (gperftools), or
	 * memsnap's descriptor for the target's memfd (jemalloc). */
	memfd = memfd_create("memsnap-dump", MFD_CLOEXEC);
	if (memfd < 0) {
		ret = fail_errno(DIAG_FAILED, errno, "dump %d: memfd_create", (int)t->pi.pid);
		goto out;
	}
	ret = target_attach(opt, "dump", t);
	if (ret)
		goto out;
	rc = alloc_dump(t->s, t->a, d, memfd, &to_fd);
	if (rc) {
		char explain[512] = "";

		if (target_interrupted()) {
			/* Whatever the allocator said after that. */
			ret = target_error(t, "dump", -EINTR);
		} else if (rc == -EREMOTEIO && alloc_errno(t->s) == EFAULT) {
			/* The one error that is about the file. */
			dumpdir_explain(d, explain, sizeof(explain));
			ret = fail(DIAG_REFUSED, "dump %d: the target could not write %s%s%s",
				   (int)t->pi.pid, dumpdir_file(d),
				   explain[0] ? ": " : "", explain);
		} else {
			ret = target_error(t, "dump", rc);
		}
		rc = target_detach(opt, "dump", t);
		if (!ret)
			ret = rc;
		goto out;
	}
	ret = target_detach(opt, "dump", t);
	if (ret)
		goto out;
	if (target_interrupted()) {
		/* The call was finished and the thread restored; the user
		 * asked to stop, so no output is written. */
		ret = target_error(t, "dump", -EINTR);
		goto out;
	}
	if (to_fd && lseek(memfd, 0, SEEK_SET) < 0) {
		ret = fail_errno(DIAG_FAILED, errno, "dump %d", (int)t->pi.pid);
		goto out;
	}
	progress_set("collecting the profile of pid %d", (int)t->pi.pid);
	ret = collect(opt, t, d, to_fd ? memfd : -1, to, dd->final,
		      sizeof(dd->final), &dd->bytes, &dd->in_place);
	progress_clear();
out:
	if (memfd >= 0)
		close(memfd);
	if (d && (rc = dumpdir_remove(d)) && !ret) {
		ret = fail_errno(DIAG_FAILED, rc, "dump %d: removing the temporary directory",
				 (int)t->pi.pid);
	}
	return ret;
}

/* The view loaded into @t: the sampler's records while it is on, else
 * the allocator's profiler. */
static int dump_view(const struct options *opt, struct target *t,
		     const struct dump_to *to, struct dump_done *dd)
{
	int rc = opt->allocator ? -ENOENT : t->sampler_rc;

	if (!rc && t->sampler.active)
		return dump_sampler(opt, t, to, dd);
	if (rc == -EPROTO)
		/* written over (or another build's): nothing of it is read */
		return fail(DIAG_FAILED, "dump %d: the sampler's control block there is not one "
			    "this memsnap made; --allocator NAME dumps through the "
			    "allocator instead", (int)t->pi.pid);
	return dump_allocator(opt, t, to, dd);
}

int dump_take(const struct options *opt, const struct dump_to *to,
	      struct dump_done *dd)
{
	struct target t;
	int ret;

	memset(dd, 0, sizeof(*dd));
	ret = target_view(opt, "dump", &t);
	if (!ret)
		ret = dump_view(opt, &t, to, dd);
	target_free(&t);
	return ret;
}

int cmd_dump(const struct options *opt, int argc, char **argv)
{
	struct dump_to to = { .dir_fd = -1 };
	struct dump_done *dd;
	struct target t;
	int ret;

	ret = parse_args(argc, argv, &to.path);
	if (ret)
		return ret;
	if (to.path && !strcmp(to.path, "-") && opt->json)
		return fail(DIAG_USAGE, "dump: --json and -o - would both write to standard output");
	dd = calloc(1, sizeof(*dd));
	if (!dd)
		return fail_errno(DIAG_FAILED, ENOMEM, "dump");
	ret = target_view(opt, "dump", &t);
	if (!ret)
		ret = dump_view(opt, &t, &to, dd);
	if (!ret && opt->json)
		print_json(&t, dd);
	else if (!ret && !dd->in_place)
		printf("%s\n", dd->final);
	target_free(&t);
	free(dd);
	return ret;
}
