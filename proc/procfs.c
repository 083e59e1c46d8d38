#include "proc/procfs.h"
#include "common/fsio.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* "... ) Z ..." of /proc/@pid/@rel: the state letter, or 0. */
static char state_of(const char *path)
{
	char buf[512];
	const char *p;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * The stand-in of the one process whose main thread was found exited
 * (proc_stand_in_find()): a run of memsnap reads one process.
 */
static pid_t stand_in_pid, stand_in_tid;

void proc_stand_in_find(pid_t pid, char leader_state)
{
	char path[64];
	struct dirent *e;
	pid_t tid = pid;
	DIR *d;

	if (leader_state == 'Z') {
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		d = opendir(path);
		while (d && (e = readdir(d))) {
			pid_t t = (pid_t)atoi(e->d_name);
			char st;

			if (t <= 0 || t == pid)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%d/stat",
				 (int)pid, (int)t);
			st = state_of(path);
			if (st && st != 'Z' && st != 'X') {
				tid = t;
				break;
			}
		}
		if (d)
			closedir(d);
	}
	if (tid != pid || stand_in_pid == pid) {
		stand_in_pid = pid;
		stand_in_tid = tid;
	}
}

pid_t proc_stand_in(pid_t pid)
{
	return pid == stand_in_pid && stand_in_tid ? stand_in_tid : pid;
}

int proc_path(pid_t pid, const char *rel, char *buf, size_t size)
{
	bool per_thread = !strncmp(rel, "task", 4) &&
			  (rel[4] == '/' || !rel[4]);
	pid_t tid = per_thread ? pid : proc_stand_in(pid);
	int n = tid == pid ? snprintf(buf, size, "/proc/%d/%s", (int)pid, rel)
			   : snprintf(buf, size, "/proc/%d/task/%d/%s",
				      (int)pid, (int)tid, rel);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int proc_open(pid_t pid, const char *rel, int flags)
{
	char path[64 + PATH_MAX];
	int fd;

	if (proc_path(pid, rel, path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int proc_read_small(pid_t pid, const char *rel, char *buf, size_t size,
		    size_t *len)
{
	size_t got = 0;
	ssize_t n;
	int fd, rc = 0;

	if (size == 0)
		return -EINVAL;
	fd = proc_open(pid, rel, O_RDONLY);
	if (fd < 0)
		return fd;
	n = read_in_full(fd, buf, size - 1);
	if (n < 0)
		rc = (int)n;
	else
		got = (size_t)n;
	close(fd);
	/* A process that died between open and read gives ESRCH. */
	if (rc == -ESRCH)
		rc = -ENOENT;
	buf[got] = '\0';
	if (len)
		*len = got;
	return rc;
}

int proc_read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr,
				.iov_len = len };
	ssize_t n;

	if (len == 0)
		return 0;
	n = process_vm_readv(proc_stand_in(pid), &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int proc_read_pieces(pid_t pid, const struct proc_piece *from,
		     const struct proc_piece *to, size_t n)
{
	struct iovec local[PROC_PIECES_MAX], remote[PROC_PIECES_MAX];
	size_t i, len = 0;
	ssize_t got;

	if (n > PROC_PIECES_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (from[i].len != to[i].len)
			return -EINVAL;
		remote[i].iov_base = (void *)(uintptr_t)from[i].addr;
		remote[i].iov_len = from[i].len;
		local[i].iov_base = (void *)(uintptr_t)to[i].addr;
		local[i].iov_len = to[i].len;
		len += from[i].len;
	}
	if (!len)
		return 0;
	got = process_vm_readv(proc_stand_in(pid), local, n, remote, n, 0);
	if (got < 0)
		return -errno;
	return (size_t)got == len ? 0 : -EFAULT;
}

int proc_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t size)
{
	size_t got = 0;

	while (got < size) {
		/* Never cross a page boundary in one read. */
		size_t chunk = page_size() - ((addr + got) & (page_size() - 1));
		char *nul;
		int rc;

		if (chunk > size - got)
			chunk = size - got;
		rc = proc_read_mem(pid, addr + got, buf + got, chunk);
		if (rc)
			return rc;
		nul = memchr(buf + got, '\0', chunk);
		if (nul)
			return 0;
		got += chunk;
	}
	if (size)
		buf[size - 1] = '\0';
	return -ENAMETOOLONG;
}

#define STATUS_MAX (1u << 20)

int proc_read_status(pid_t pid, const char *rel, char **out)
{
	char *buf = malloc(STATUS_MAX);
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!buf)
		return -ENOMEM;
	rc = proc_read_small(pid, rel, buf, STATUS_MAX, &len);
	if (!rc && len >= STATUS_MAX - 1)
		rc = -EFBIG;
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* @var in the environment block @env of @len bytes, as proc_getenv(). */
static int env_lookup(const char *env, size_t len, const char *var, char *buf,
		      size_t size)
{
	size_t off, n, vlen = strlen(var);
	int rc = 0;

	buf[0] = '\0';
	/* "K=V\0K=V\0...", the last one maybe cut: never past @len; the
	 * last definition wins */
	for (off = 0; off < len; off += n + 1) {
		n = strnlen(env + off, len - off);
		if (n <= vlen || strncmp(env + off, var, vlen) ||
		    env[off + vlen] != '=')
			continue;
		buf[0] = '\0';
		rc = n - vlen - 1 < size ? 0 : -ENOSPC;
		if (!rc)
			memcpy(buf, env + off + vlen + 1, n - vlen);
	}
	return rc;
}

int proc_getenv(pid_t pid, const char *var, char *buf, size_t size)
{
	static char env[64 * 1024];
	static size_t len;
	static pid_t env_pid;
	int rc;

	buf[0] = '\0';
	if (env_pid != pid) {
		rc = proc_read_small(pid, "environ", env, sizeof(env), &len);
		if (rc)
			return rc;
		env_pid = pid;
	}
	return env_lookup(env, len, var, buf, size);
}

int proc_getenv_at(int proc_fd, const char *var, char *buf, size_t size)
{
	static char env[64 * 1024];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	fd = openat(proc_fd, "environ", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read_in_full(fd, env, sizeof(env));
	close(fd);
	if (n < 0)
		return (int)n;
	return env_lookup(env, (size_t)n, var, buf, size);
}
