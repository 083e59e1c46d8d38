/*
 * Reading what proc/smaps.c parses: everything of the process through
 * one directory fd of /proc/PID that the caller proved to be it, so no
 * path is opened by number here; the system's THP mode and page size.
 * The threads' stacks are proc/stacks.c's.
 */
#include "proc/smaps.h"
#include "proc/procfs.h"

#include "common/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char thp_path[] = "/sys/kernel/mm/transparent_hugepage/enabled";
static const char hpage_path[] =
	"/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";

/* Up to @size - 1 bytes of the system's file @path, NUL-ended: its
 * length, or -1. */
static ssize_t read_sys(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read_in_full(fd, buf, size - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* @rel under @dir_fd whole, NUL-ended, at most @max bytes (-EFBIG). */
static int read_whole(int dir_fd, const char *rel, size_t max, char **out,
		      size_t *len)
{
	size_t cap = 64 << 10, n = 0;
	char *buf = NULL;
	int fd, rc = 0;

	*out = NULL;
	*len = 0;
	fd = openat(dir_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t got;

		if (n + 1 >= cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			if (cap > max + 1)
				cap = max + 1;
			if (n + 1 >= cap) {
				rc = -EFBIG;
				break;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
		}
		got = read(fd, buf + n, cap - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = -errno;
			break;
		}
		if (!got)
			break;
		n += (size_t)got;
	}
	close(fd);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int proc_rollup_read_at(int proc_fd, uint64_t *rss, uint64_t *anon_huge)
{
	char *text = NULL;
	size_t len;
	int rc;

	rc = read_whole(proc_fd, "smaps_rollup", 64 << 10, &text, &len);
	if (!rc)
		rc = smaps_rollup_field(text, len, "Rss", rss);
	if (!rc)
		rc = smaps_rollup_field(text, len, "AnonHugePages", anon_huge);
	free(text);
	return rc;
}

uint64_t proc_huge_page(void)
{
	char buf[64];

	return read_sys(hpage_path, buf, sizeof(buf)) > 0
		       ? huge_page_parse(buf)
		       : 0;
}

int proc_smaps_read(pid_t pid, struct proc_memory *m)
{
	int fd = proc_open(pid, ".", O_RDONLY | O_DIRECTORY), rc;
	char *text = NULL;
	size_t len;

	memset(m, 0, sizeof(*m));
	if (fd < 0)
		return fd;
	rc = read_whole(fd, "smaps", SMAPS_MAX_BYTES, &text, &len);
	close(fd);
	if (!rc)
		rc = smaps_parse(text, len, m);
	free(text);
	if (rc)
		proc_memory_free(m);
	return rc;
}

int proc_memory_read_at(int proc_fd, struct proc_memory *m)
{
	char *text = NULL, thp[128];
	size_t len;
	ssize_t n;
	long ps;
	int rc, mem_fd;

	memset(m, 0, sizeof(*m));
	rc = read_whole(proc_fd, "status", 1u << 20, &text, &len);
	if (rc)
		return rc;
	m->have_status = !proc_mem_status_parse(text, len, &m->st);
	free(text);
	rc = read_whole(proc_fd, "smaps", SMAPS_MAX_BYTES, &text, &len);
	if (rc)
		return rc;
	rc = smaps_parse(text, len, m);
	free(text);
	if (rc) {
		proc_memory_free(m);
		return rc;
	}
	ps = sysconf(_SC_PAGESIZE);
	m->page_size = ps > 0 ? (uint64_t)ps : 4096;
	/* what the threads and glibc's heaps say of themselves */
	mem_fd = openat(proc_fd, "mem", O_RDONLY | O_CLOEXEC);
	proc_memory_read_stacks(proc_fd, mem_fd, m);
	proc_memory_vouch_arenas(m, mem_fd);
	if (mem_fd >= 0)
		close(mem_fd);
	n = read_sys(thp_path, thp, sizeof(thp));
	if (n > 0)
		thp_mode_parse(thp, (size_t)n, m->thp, sizeof(m->thp));
	m->huge_page = proc_huge_page();
	return 0;
}
