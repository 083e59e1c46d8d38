/*
 * What the backends share to call into the target: symbols, integer
 * calls, strings the target hands back, and text the allocator prints.
 */
#include "allocators/allocator_internal.h"
#include "common/fsio.h"
#include "common/util.h"

#include "proc/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Statistics are text of a few KiB to a few MiB; a bigger file is not
 * what the allocator printed. */
#define CAPTURE_MAX (256u << 20)
#define STRING_CHUNK 65536

uint64_t alloc_func_addr(const struct allocator *a, const char *role)
{
	const struct alloc_func *f = allocator_func(a, role);

	return f && f->found ? f->addr : 0;
}

uint64_t alloc_symbol(struct alloc_session *s, const struct allocator *a,
		      const char *name, bool prefixed)
{
	char full[ALLOC_MAX_PREFIX + 64];
	struct symbol sym;

	snprintf(full, sizeof(full), "%s%s", prefixed ? a->prefix : "", name);
	if (!object_lookup(s->os, a->obj, full, 0, &sym))
		return sym.addr;
	return alloc_bound_symbol(s, full);
}

int alloc_bound_in(struct objects *os, const struct detection *det,
		   const char *name, struct symbol *out)
{
	const struct search_order *so = &det->order;
	size_t i;

	for (i = 0; i < so->n; i++)
		if (!object_lookup(os, so->v[i], name, ELFSYM_DYNAMIC_ONLY,
				   out))
			return 0;
	return -ENOENT;
}

int alloc_bound(struct alloc_session *s, const char *name, struct symbol *out)
{
	return alloc_bound_in(s->os, s->det, name, out);
}

uint64_t alloc_bound_symbol(struct alloc_session *s, const char *name)
{
	struct symbol sym;

	return alloc_bound(s, name, &sym) ? 0 : sym.addr;
}

int alloc_call(struct alloc_session *s, uint64_t fn, const uint64_t *args,
	       unsigned int nargs, uint64_t *ret)
{
	struct inject_call c = { .fn = fn, .nargs = nargs };
	struct inject_result r;
	unsigned int i;
	int rc;

	if (!fn)
		return -EOPNOTSUPP;
	if (nargs > INJECT_MAX_ARGS)
		return -EINVAL;
	for (i = 0; i < nargs; i++)
		c.args[i] = (struct inject_arg){ .value = args[i] };
	rc = inject_call(s->inj, &c, &r);
	if (!rc && ret)
		*ret = r.ret;
	return rc;
}

int alloc_read_string(struct alloc_session *s, uint64_t addr, size_t max,
		      char **out, size_t *len)
{
	size_t have = 0, cap = 0;
	char *buf = NULL, *nul;
	int rc;

	*out = NULL;
	*len = 0;
	for (;;) {
		size_t want = STRING_CHUNK - ((addr + have) % STRING_CHUNK);
		char *nb;

		if (have + want > max)
			want = max - have;
		if (!want) {
			free(buf);
			return -EFBIG;
		}
		if (have + want + 1 > cap) {
			cap = have + want + 1;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		/* Chunks end on STRING_CHUNK boundaries; one that runs past
		 * the end of the mapping is read again up to its page end. */
		rc = proc_read_mem(s->pid, addr + have, buf + have, want);
		if (rc == -EFAULT) {
			size_t page = page_size() - ((addr + have) % page_size());

			want = page < want ? page : want;
			rc = proc_read_mem(s->pid, addr + have, buf + have,
					   want);
		}
		if (rc) {
			free(buf);
			return rc;
		}
		nul = memchr(buf + have, '\0', want);
		if (nul) {
			*len = (size_t)(nul - buf);
			*out = buf;
			return 0;
		}
		have += want;
	}
}

struct inject_session *alloc_inject(struct alloc_session *s)
{
	return s->inj;
}

int alloc_chain(struct alloc_session *s, struct inject_chain *ch,
		const char *str, unsigned int str_arg, uint64_t *ret)
{
	struct inject_call c = { .nargs = 1, .nbufs = 1, .chain_buf = 1 };
	struct inject_result r;
	int rc;

	c.fn = inject_helper(s->inj, INJECT_HELPER_CHAIN);
	if (!c.fn || str_arg > 2)
		return -ENOEXEC;
	ch->abandoned = 0;
	c.bufs[0] = (struct inject_buf){ .in = ch, .len = sizeof(*ch) };
	c.args[0] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	if (str) {
		c.bufs[1] = (struct inject_buf){ .in = str,
						 .len = strlen(str) + 1 };
		c.nbufs = 2;
		c.relocs[0] = (struct inject_reloc){
			.buf = 0, .target = 1,
			.off = offsetof(struct inject_chain, a0) +
			       str_arg * sizeof(uint64_t) };
		c.nrelocs = 1;
	}
	rc = inject_call(s->inj, &c, &r);
	if (!rc && ret)
		*ret = r.ret;
	return rc;
}

int capture_call(struct alloc_session *s, int fd, uint64_t fn, uint64_t a0,
		 uint64_t a1, const char *str)
{
	uint64_t close_fn = inject_helper(s->inj, INJECT_HELPER_SYSCALL);
	struct inject_chain ch = {
		.fn = fn, .a0 = a0, .a1 = a1,
		/* syscall(SYS_close, fd) whatever fn returned */
		.nz_fn = close_fn, .nz_a0 = SYS_close,
		.z_fn = close_fn, .z_a0 = SYS_close,
		.t_a1 = (uint64_t)fd,
		.flags = INJECT_CHAIN_ALWAYS,
	};

	return alloc_chain(s, &ch, str, 2, NULL);
}

/*
 * The capture's file as a memfd of the target's, which memsnap takes a
 * descriptor for: nothing is made in the target's view, so no agent
 * and no writable place are needed.  0 (*@fd the target's descriptor,
 * s->capture_here memsnap's); 1 when this way is closed (the thread's
 * seccomp filters, no pidfd_getfd(), the target's memfd_create()
 * failing), with nothing of memsnap's left in the target; or
 * inject_call()'s error.
 */
static int capture_memfd(struct alloc_session *s, int *fd)
{
	static const char name[] = "memsnap";
	const uint64_t mf_args[2] = { 0, MFD_CLOEXEC }, fd_arg[1] = { 0 };
	struct inject_call c = { 0 };
	struct inject_result r;
	uint64_t tfd;
	int64_t ret;
	int rc, here;

	c.fn = inject_helper(s->inj, INJECT_HELPER_SYSCALL);
	c.errno_kept = true;	/* a raw system call */
	if (!c.fn ||
	    !inject_syscall_allowed(s->inj, SYS_memfd_create, mf_args, 2) ||
	    !inject_syscall_allowed(s->inj, SYS_write, fd_arg, 1) ||
	    !inject_syscall_allowed(s->inj, SYS_close, fd_arg, 1))
		return 1;
	c.bufs[0] = (struct inject_buf){ .in = name, .len = sizeof(name) };
	c.nbufs = 1;
	c.args[0] = (struct inject_arg){ .value = SYS_memfd_create };
	c.args[1] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	c.args[2] = (struct inject_arg){ .value = MFD_CLOEXEC };
	c.nargs = 3;
	rc = inject_call(s->inj, &c, &r);
	if (rc)
		return rc;
	if ((int64_t)r.ret < 0)
		return 1;
	tfd = r.ret;
	here = inject_take_fd(s->inj, (int)tfd);
	/* whatever the target put at that number meanwhile: read only
	 * if it is memory */
	if (here >= 0 && fd_is_memory(here)) {
		s->capture_here = here;
		*fd = (int)tfd;
		return 0;
	}
	if (here >= 0) {
		/* not the memfd: a file the target put there is its own,
		 * and stays open */
		close(here);
		return 1;
	}
	rc = inject_syscall(s->inj, SYS_close, &tfd, 1, &ret);
	return rc ? rc : 1;
}

int capture_dir_start(struct alloc_session *s, struct dumpdir *dir,
		      const char *what)
{
	struct diag err;
	int rc;

	if (!dir)
		return alloc_fail(s, -EOPNOTSUPP, DIAG_UNSUPPORTED,
				  "no memfd for %s, and no directory for it in "
				  "the target's view", what);
	rc = dumpdir_start(dir, &err);
	return rc ? alloc_fail(s, rc, err.kind, "%s", err.what) : 0;
}

int capture_begin(struct alloc_session *s, struct dumpdir *dir,
		  const char *name, int *fd)
{
	const char *path;
	struct inject_call c = { 0 };
	struct inject_result r;
	int rc;

	rc = capture_memfd(s, fd);
	if (rc <= 0)
		return rc;
	rc = capture_dir_start(s, dir, "the allocator's output");
	if (rc)
		return rc;
	rc = dumpdir_set_name(dir, name);
	if (rc)
		return rc;
	path = dumpdir_file(dir);
	c.fn = inject_helper(s->inj, INJECT_HELPER_SYSCALL);
	c.errno_kept = true;	/* a raw system call */
	if (!c.fn)
		return -ENOEXEC;
	{
		/* openat here, write(2) from the callback, close at the
		 * end: each must pass the thread's seccomp filters. */
		const uint64_t open_args[4] = {
			(uint64_t)(int64_t)AT_FDCWD, 0,
			O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0600 };
		const uint64_t fd_arg[1] = { 0 };

		rc = inject_check_syscall(s->inj, SYS_openat, open_args, 4);
		if (!rc)
			rc = inject_check_syscall(s->inj, SYS_write, fd_arg, 1);
		if (!rc)
			rc = inject_check_syscall(s->inj, SYS_close, fd_arg, 1);
		if (rc) {
			return alloc_fail_in(s, rc, "writing its output to a file");
		}
	}
	/* openat(AT_FDCWD, path, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|
	 * O_CLOEXEC, 0600): the directory is memsnap's, 0700, fresh; EXCL
	 * and NOFOLLOW keep anything planted there from being written
	 * through, CLOEXEC keeps it from a child the target execs. */
	c.bufs[0] = (struct inject_buf){ .in = path, .len = strlen(path) + 1 };
	c.nbufs = 1;
	c.args[0] = (struct inject_arg){ .value = SYS_openat };
	c.args[1] = (struct inject_arg){ .value = (uint64_t)(int64_t)AT_FDCWD };
	c.args[2] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = 0 };
	c.args[3] = (struct inject_arg){
		.value = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC };
	c.args[4] = (struct inject_arg){ .value = 0600 };
	c.nargs = 5;
	rc = inject_call(s->inj, &c, &r);
	if (rc)
		return rc;
	if ((int64_t)r.ret < 0)
		return alloc_fail(s, -EREMOTEIO, DIAG_REFUSED,
				  "the target could not create %s: %s", path,
				  strerror((int)-(int64_t)r.ret));
	*fd = (int)r.ret;
	return 0;
}

/* Is the target's descriptor @tfd still the memfd memsnap holds?  (Its
 * code ran since: a descriptor it put at that number is its own.) */
static bool capture_still_ours(struct alloc_session *s, int tfd)
{
	int there = inject_take_fd(s->inj, tfd);
	struct stat a, b;
	bool same;

	if (there < 0)
		return false;
	same = s->capture_here >= 0 && !fstat(there, &a) &&
	       !fstat(s->capture_here, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
	close(there);
	return same;
}

/* The target's descriptor @tfd closed there if it is still the memfd,
 * and memsnap's for the memfd dropped. */
static int capture_drop(struct alloc_session *s, int tfd)
{
	uint64_t arg = (uint64_t)tfd;
	bool ours = capture_still_ours(s, tfd);
	int64_t ret;

	if (s->capture_here >= 0)
		close(s->capture_here);
	s->capture_here = -1;
	return ours ? inject_syscall(s->inj, SYS_close, &arg, 1, &ret) : 0;
}

int capture_name_begin(struct alloc_session *s, char *path, size_t size,
		       int *tfd)
{
	const uint64_t acc_args[3] = { (uint64_t)(int64_t)AT_FDCWD, 0, W_OK };
	struct inject_call c = { 0 };
	struct inject_result r;
	int rc = capture_memfd(s, tfd);

	if (rc)
		return rc;
	snprintf(path, size, "/proc/thread-self/fd/%d", *tfd);
	c.fn = inject_helper(s->inj, INJECT_HELPER_SYSCALL);
	c.errno_kept = true;	/* a raw system call */
	if (inject_syscall_allowed(s->inj, SYS_faccessat, acc_args, 3)) {
		/* faccessat(AT_FDCWD, path, W_OK): the name leads to a
		 * file the thread may write, in its own view */
		c.bufs[0] = (struct inject_buf){ .in = path,
						 .len = strlen(path) + 1 };
		c.nbufs = 1;
		c.args[0] = (struct inject_arg){ .value = SYS_faccessat };
		c.args[1] = (struct inject_arg){
			.value = (uint64_t)(int64_t)AT_FDCWD };
		c.args[2] = (struct inject_arg){ .kind = INJECT_ARG_BUF,
						 .buf = 0 };
		c.args[3] = (struct inject_arg){ .value = W_OK };
		c.nargs = 4;
		rc = inject_call(s->inj, &c, &r);
		if (rc)
			return rc;
		if (!r.ret)
			return 0;
	}
	rc = capture_drop(s, *tfd);
	return rc ? rc : 1;
}

int capture_name_end(struct alloc_session *s, int tfd, int fd)
{
	struct stat st;
	int rc = 0;

	/* the profile stays in the memfd while memsnap holds it */
	if (fd >= 0 && s->capture_here >= 0 &&
	    dup3(s->capture_here, fd, O_CLOEXEC) < 0)
		rc = -errno;
	else if (fd >= 0 && (fstat(fd, &st) || !st.st_size))
		rc = alloc_fail(s, -EPROTO, DIAG_FAILED,
				"the allocator said it wrote the profile, and "
				"its memfd is empty");
	return capture_drop(s, tfd) ?: rc;
}

/* @size bytes of @fd from its start, or fewer if it shrank meanwhile
 * or cannot be read: what is there. */
static int read_fd(int fd, uint64_t size, char **out, size_t *len)
{
	char *buf = malloc((size_t)size + 1);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	n = pread_in_full(fd, buf, (size_t)size, 0);
	*len = n > 0 ? (size_t)n : 0;
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

/* The file the target wrote, read here. */
static int read_back(struct dumpdir *dir, char **out, size_t *len)
{
	uint64_t size = 0;
	int fd, rc;

	fd = dumpdir_open_result(dir, &size);
	if (fd < 0)
		return fd;
	rc = size > CAPTURE_MAX ? -EFBIG : read_fd(fd, size, out, len);
	close(fd);
	return rc;
}

/* What the target wrote to the memfd, read through memsnap's
 * descriptor for it, which is closed. */
static int read_memfd(struct alloc_session *s, char **out, size_t *len)
{
	int fd = s->capture_here, rc;
	struct stat st;

	s->capture_here = -1;
	if (fstat(fd, &st))
		rc = -errno;
	else if ((uint64_t)st.st_size > CAPTURE_MAX)
		rc = -EFBIG;
	else
		rc = read_fd(fd, (uint64_t)st.st_size, out, len);
	close(fd);
	return rc;
}

int capture_end(struct alloc_session *s, struct dumpdir *dir, int fd,
		bool closed, char **out, size_t *len)
{
	uint64_t arg = (uint64_t)fd;
	int64_t ret;
	int rc = 0;

	*out = NULL;
	*len = 0;
	/* a memfd's number the target took over meanwhile is its own */
	if (!closed && (s->capture_here < 0 || capture_still_ours(s, fd))) {
		rc = inject_syscall(s->inj, SYS_close, &arg, 1, &ret);
		if (rc)
			return rc;
	}
	if (s->capture_here >= 0)
		return read_memfd(s, out, len);
	return read_back(dir, out, len);
}
