/*
 * The sampler in programs with their allocator linked in (the `sampler`
 * suite; see test_sampler.c): jemalloc, tcmalloc_minimal, glibc in a
 * static program, and jemalloc under the je_ prefix beside libc's
 * malloc.  The program's own calls reach the allocator through no GOT
 * slot, so its entry points are patched with every thread stopped; a
 * thread held by another tracer makes `prof on` and `prof off` refuse
 * and leave the program as it was.
 */
#include "tests/lib/fault.h"
#include "tests/lib/procsnap.h"
#include "tests/lib/sampler.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The threads of @pid, and one of them other than the main one in
 * *@other (0: none). */
static int threads(pid_t pid, pid_t *other)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	*other = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		pid_t tid = atoi(e->d_name);

		n += tid > 0;
		if (tid > 0 && tid != pid)
			*other = tid;
	}
	closedir(d);
	return n;
}

/*
 * An allocator linked into the program: the program's own calls reach
 * it through no GOT slot, so its entry points are patched (every thread
 * stopped for the write).  libjemalloc.a's functions start with a plain
 * compare or pushes; libtcmalloc_minimal.a's with a RIP-relative load
 * the trampoline must move.  Every site within 10%, frees forgotten
 * through the patched free, the program's code byte for byte as it was
 * after prof off, and the target unharmed.  @conf: an environment
 * entry for the fixture, or NULL.
 */
static void linked_program(const char *fixture, const char *conf,
			   const char *kind, unsigned mask, bool whole)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t1, t2;
	char d[PATH_MAX + 32];
	size_t klen = strlen(kind);
	const char *v;
	struct counts c;
	struct run r;

	cr_assert_not_null(fo);
	start(fixture, conf);
	text_take(fx.pid, &t0);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "prof on --sampler: exit %d: %s", r.status,
		     r.err);
	v = json_value(r.out, "linked_allocator");
	cr_assert(v && *v == '"' && !strncmp(v + 1, kind, klen) &&
			  v[1 + klen] == '"',
		  "no linked_allocator \"%s\" in: %s", kind, r.out);
	v = json_value(r.out, "entries");
	cr_assert(v && atoi(v) >= 4, "fewer than 4 entry points patched: %s",
		  r.out);
	cr_assert_null(json_value(r.out, "unsampled_allocator"), "%s", r.out);
	cr_assert_str_empty(r.err, "prof on said: '%s'", r.err);
	run_free(&r);
	text_take(fx.pid, &t1);
	cr_assert(memcmp(t0.bytes, t1.bytes, t0.len),
		  "prof on changed no byte of the program's code");

	c = command_counts('a');
	dump_to("linked", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	check_sites(fo, &c, mask, kind, whole);
	folded_free(fo);
	c = command_counts('f');
	dump_to("linked-freed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	check_sites(fo, &c, mask, "after 'f'", whole);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");

	sampler_off();
	text_take(fx.pid, &t2);
	assert_same_text(&t0, &t2, "after prof off");
	text_free(&t0);
	text_free(&t1);
	text_free(&t2);
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	assert_untouched(&fx, "after prof off");
}

Test(sampler, jemalloc_linked_into_program)
{
	linked_program("sampler-target-je-static", NULL, "jemalloc", ~0u,
		       true);
}

/* A thread of @pid other than the main one. */
static pid_t other_thread(pid_t pid)
{
	pid_t tid;

	threads(pid, &tid);
	cr_assert_gt(tid, 0, "no second thread");
	return tid;
}

/* The one line of @r's refusal: a nonzero exit that names @tid's
 * tracer. */
static void assert_refused_for(const struct run *r, const char *what,
			       pid_t tid, pid_t tracer)
{
	char want[128];

	snprintf(want, sizeof(want), "thread %d is traced by pid %d (strace)",
		 (int)tid, (int)tracer);
	cr_assert_neq(r->status, 0, "%s with a traced thread: exit 0", what);
	cr_assert(strstr(r->err, want), "%s: no '%s' in: %s", what, want,
		  r->err);
	cr_assert_eq(count_lines(r->err), 1, "%s: not one line: %s", what,
		     r->err);
}

/* The program's code and GOT as in @t0 and @g0, and `info` says
 * @state ("sampler   on"), @when. */
static void assert_as_before(const struct text_snap *t0,
			     const struct got_snap *g0, const char *state,
			     const char *when)
{
	struct got_snap *g = calloc(1, sizeof(*g));
	char buf[512];
	struct text_snap t;

	cr_assert_not_null(g);
	text_take(fx.pid, &t);
	assert_same_text(t0, &t, when);
	text_free(&t);
	got_take(fx.pid, g);
	assert_same_got(g0, g, when);
	free(g);
	cr_assert(strstr(sampler_state(buf, sizeof(buf)), state), "%s: %s",
		  when, buf);
}

/*
 * A thread another tracer holds (strace -p TID) cannot be stopped for
 * the write: prof on fails in one line naming the tracer, and leaves
 * the program as it was (no entry patched, no slot swapped, sampling
 * off).  Once the tracer is gone, prof on works.
 */
Test(sampler, linked_program_with_a_traced_thread)
{
	struct got_snap *g0 = calloc(1, sizeof(*g0));
	struct text_snap t0, t1;
	char reply[256];
	pid_t tid, tracer;
	struct run r;

	cr_assert_not_null(g0);
	start("sampler-target-je-static", NULL);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	text_take(fx.pid, &t0);
	got_take(fx.pid, g0);
	tid = other_thread(fx.pid);
	tracer = seize_thread(tid);

	memsnap(&r, "prof", "on", "--sampler", NULL);
	need_sampler(&r);
	assert_refused_for(&r, "prof on", tid, tracer);
	run_free(&r);
	assert_as_before(&t0, g0, "sampler   off", "after the refused prof on");
	let_go(tracer);

	sampler_on(0);
	sampler_off();
	text_take(fx.pid, &t1);
	assert_same_text(&t0, &t1, "after prof on and off");
	text_free(&t0);
	text_free(&t1);
	command_expect('T', "ok loops=", reply, sizeof(reply));
	/* the threads stopped before the refusal were let go healed */
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g0);
	assert_untouched(&fx, "at the end");
}

/*
 * The same refusal at prof off, whose entry points cannot be put back
 * while a thread is held by another tracer: the sampler stays wholly on
 * (entry points and slots as prof on left them, sampling), so that the
 * next prof off, once the tracer is gone, finds it on and takes it all
 * back.
 */
Test(sampler, linked_program_prof_off_with_a_traced_thread)
{
	struct got_snap *g1 = calloc(1, sizeof(*g1));
	struct text_snap t0, t1, t;
	char reply[256];
	pid_t tid, tracer;
	struct run r;

	cr_assert_not_null(g1);
	start("sampler-target-je-static", NULL);
	command_expect('t', "ok threads=4", reply, sizeof(reply));
	text_take(fx.pid, &t0);
	sampler_on(0);
	text_take(fx.pid, &t1);
	cr_assert(memcmp(t0.bytes, t1.bytes, t0.len),
		  "prof on changed no byte of the program's code");
	got_take(fx.pid, g1);
	tid = other_thread(fx.pid);
	tracer = seize_thread(tid);

	memsnap(&r, "prof", "off", NULL);
	assert_refused_for(&r, "prof off", tid, tracer);
	run_free(&r);
	assert_as_before(&t1, g1, "sampler   on", "after the refused prof off");
	let_go(tracer);

	sampler_off();
	text_take(fx.pid, &t);
	assert_same_text(&t0, &t, "after prof off");
	text_free(&t0);
	text_free(&t1);
	text_free(&t);
	command_expect('T', "ok loops=", reply, sizeof(reply));
	cr_assert_eq(waiter_eintr(), 0, "an epoll_wait failed with EINTR");
	free(g1);
	assert_untouched(&fx, "at the end");
}

/*
 * The fixture @name has .eh_frame and no PT_GNU_EH_FRAME, as gcc -static
 * writes it: else the test would not unwind through the table memsnap
 * makes from .eh_frame.
 */
static void assert_no_eh_frame_hdr(const char *name)
{
	char path[PATH_MAX];
	Elf64_Phdr ph;
	Elf64_Ehdr e;
	int fd, i;

	fixture_path(name, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		skip_test("fixture %s not built", path);
	cr_assert_eq(pread(fd, &e, sizeof(e), 0), (ssize_t)sizeof(e), "%s",
		     path);
	cr_assert(!memcmp(e.e_ident, ELFMAG, SELFMAG) &&
			  e.e_ident[EI_CLASS] == ELFCLASS64 &&
			  e.e_phentsize == sizeof(ph),
		  "%s: not a 64-bit ELF file", path);
	for (i = 0; i < e.e_phnum; i++) {
		cr_assert_eq(pread(fd, &ph, sizeof(ph),
				   (off_t)(e.e_phoff + i * sizeof(ph))),
			     (ssize_t)sizeof(ph), "%s", path);
		cr_assert_neq(ph.p_type, PT_GNU_EH_FRAME,
			      "%s has PT_GNU_EH_FRAME: the test does not "
			      "test stacks unwound from .eh_frame alone",
			      path);
	}
	close(fd);
}

/*
 * Linked statically, glibc and all: no loader, no GOT slot.  gcc -static
 * writes no PT_GNU_EH_FRAME, so the CFI comes from .eh_frame, found in
 * the file's section headers: every stack whole, down to main.
 */
Test(sampler, glibc_in_a_static_program)
{
	assert_no_eh_frame_hdr("sampler-target-static");
	linked_program("sampler-target-static", NULL, "glibc", ~0u, true);
}

/*
 * The same program with one thread, serving its commands over stack
 * bytes where malloc's own calls left return addresses into malloc
 * (sampler_target.c, $MEMSNAP_SAMPLER_ALONE).  memsnap's stack check
 * finds them on the one thread it may borrow, and the unwind must be
 * whole to show that no frame is in malloc: from .eh_frame, it is.
 * (Without, prof on was refused: exit 6, "the unwinder stopped at
 * frame #0".)
 */
Test(sampler, static_program_with_one_thread)
{
	struct run r;
	pid_t tid;

	assert_no_eh_frame_hdr("sampler-target-static");
	linked_program("sampler-target-static", "MEMSNAP_SAMPLER_ALONE=1",
		       "glibc", ~0u, true);
	/* one all along: the program starts none, nor does memsnap */
	cr_assert_eq(threads(fx.pid, &tid), 1, "the fixture has more than one "
		     "thread");
	/* and prof on again, for a second round over the same stack */
	memsnap(&r, "prof", "on", "--sampler", NULL);
	cr_assert_eq(r.status, 0, "prof on again: exit %d: %s", r.status,
		     r.err);
	run_free(&r);
	sampler_off();
	assert_untouched(&fx, "after the second prof off");
}

Test(sampler, tcmalloc_minimal_linked_into_program)
{
	linked_program("sampler-target-tcm-static", NULL, "tcmalloc_minimal",
		       ~0u, true);
}

/*
 * jemalloc linked in under the je_ prefix, as redis built from source
 * has it, beside libc's malloc: the patched entries (je_malloc,
 * je_mallocx; je_free, je_sdallocx) and the GOT slots (malloc, free)
 * at once, each site within 10%, everything forgotten once freed.
 */
Test(sampler, prefixed_jemalloc_linked_into_program)
{
	struct folded *fo = calloc(1, sizeof(*fo));
	struct text_snap t0, t1;
	char d[PATH_MAX + 32], reply[128];
	long long je, libc;
	const char *v;
	struct run r;

	cr_assert_not_null(fo);
	start("sampler-prefixed", NULL);
	text_take(fx.pid, &t0);
	memsnap(&r, "--json", "prof", "on", "--sampler", "--sample-bytes",
		"16384", NULL);
	need_sampler(&r);
	cr_assert_eq(r.status, 0, "prof on: exit %d: %s", r.status, r.err);
	v = json_value(r.out, "linked_allocator");
	cr_assert(v && !strncmp(v, "\"jemalloc\"", 10), "%s", r.out);
	v = json_value(r.out, "entries");
	cr_assert(v && atoi(v) >= 4, "%s", r.out);
	cr_assert_str_empty(r.err, "prof on said: '%s'", r.err);
	run_free(&r);
	command_expect('a', "ok bytes=", reply, sizeof(reply));
	je = strtoll(reply + 9, NULL, 10);
	libc = strtoll(strstr(reply, "libc=") + 5, NULL, 10);
	dump_to("prefixed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert(near(leaf_bytes(fo, "prefixed_site"), je, 10),
		  "prefixed_site: %lld bytes, %lld live:\n%s",
		  leaf_bytes(fo, "prefixed_site"), je, fo->text);
	cr_assert(near(leaf_bytes(fo, "libc_site"), libc, 10),
		  "libc_site: %lld bytes, %lld live:\n%s",
		  leaf_bytes(fo, "libc_site"), libc, fo->text);
	folded_free(fo);
	command_expect('F', "ok bytes=0", reply, sizeof(reply));
	dump_to("prefixed-freed", 16384, d, sizeof(d));
	folded_load(d, NULL, fo);
	cr_assert_lt(leaf_bytes(fo, "prefixed_site") +
			     leaf_bytes(fo, "libc_site"),
		     je / 20, "freed blocks stay in the profile:\n%s",
		     fo->text);
	folded_free(fo);
	free(fo);
	assert_untouched(&fx, "after the dumps");
	sampler_off();
	text_take(fx.pid, &t1);
	assert_same_text(&t0, &t1, "after prof off");
	text_free(&t0);
	text_free(&t1);
	assert_untouched(&fx, "after prof off");
}
