#include "proc/procinfo.h"

#include "common/fsio.h"
#include "common/util.h"
#include "proc/procfs.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PF_KTHREAD 0x00200000u

void proc_comm(pid_t pid, char *buf, size_t size)
{
	size_t len;

	if (proc_read_small(pid, "comm", buf, size, &len) || len == 0) {
		snprintf(buf, size, "?");
		return;
	}
	if (buf[len - 1] == '\n')
		buf[len - 1] = '\0';
}

/*
 * /proc/PID/stat: "4242 (a b) S 1 4242 4242 0 -1 4194560 ...": the comm
 * may hold spaces and parentheses, so fields count from the last ')'.
 */
static int parse_stat(const char *buf, struct procinfo *pi)
{
	const char *p = strrchr(buf, ')');
	unsigned long long flags = 0;
	int field;

	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	pi->state = p[2];
	/* After the state: ppid pgrp session tty_nr tpgid flags ...
	 * starttime is field 22. */
	p += 3;
	for (field = 4; field <= 22 && p; field++) {
		while (*p == ' ')
			p++;
		if (field == 9)
			flags = strtoull(p, NULL, 10);
		if (field == 22)
			pi->start_time = strtoull(p, NULL, 10);
		p = strchr(p, ' ');
	}
	if (field <= 22)
		return -EIO;
	pi->kernel_thread = (flags & PF_KTHREAD) != 0;
	return 0;
}

/* "\nKey:\t1\t2\t3\t4" -> the four numbers. */
static int status_ids(const char *status, const char *key, unsigned long v[4])
{
	const char *p = strstr(status, key);

	if (!p || sscanf(p + strlen(key), "%lu %lu %lu %lu", &v[0], &v[1],
			 &v[2], &v[3]) != 4)
		return -EIO;
	return 0;
}

static int status_caps(const char *status, const char *key, uint64_t *out)
{
	const char *p = strstr(status, key);

	if (!p || sscanf(p + strlen(key), "%" SCNx64, out) != 1)
		return -EIO;
	return 0;
}

int proc_creds_parse(const char *status, struct proc_creds *c)
{
	unsigned long u[4], g[4];
	size_t i;

	memset(c, 0, sizeof(*c));
	if (status_ids(status, "\nUid:", u) ||
	    status_ids(status, "\nGid:", g) ||
	    status_caps(status, "\nCapPrm:", &c->cap_prm) ||
	    status_caps(status, "\nCapEff:", &c->cap_eff))
		return -EIO;
	for (i = 0; i < 4; i++) {
		c->uid[i] = (uid_t)u[i];
		c->gid[i] = (gid_t)g[i];
	}
	return 0;
}

static void parse_status(const char *buf, struct procinfo *pi)
{
	const char *line = buf;

	while (line && *line) {
		unsigned long long v;
		unsigned int a, b;

		if (sscanf(line, "Threads: %llu", &v) == 1)
			pi->threads = (unsigned long)v;
		else if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
			pi->rss_bytes = v * 1024;
		else if (sscanf(line, "VmSize: %llu kB", &v) == 1)
			pi->vsz_bytes = v * 1024;
		else if (sscanf(line, "TracerPid: %llu", &v) == 1)
			pi->tracer = (pid_t)v;
		else if (sscanf(line, "Uid: %u %u", &a, &b) == 2) {
			pi->uid = a;
			pi->euid = b;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
}

/* The class and machine of the ELF header at @exe ("/proc/PID/exe"). */
static void exe_ident(const char *exe, struct procinfo *pi)
{
	unsigned char h[EI_NIDENT + 4];
	struct stat st;
	int fd = open_regular(exe, &st);
	ssize_t n = fd >= 0 ? pread(fd, h, sizeof(h), 0) : -1;

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(h) || memcmp(h, ELFMAG, SELFMAG))
		return;
	pi->elf_class = h[EI_CLASS];
	/* e_machine after e_type, in the file's byte order. */
	pi->elf_machine = h[EI_DATA] == ELFDATA2MSB
				  ? (uint16_t)(h[EI_NIDENT + 2] << 8 | h[EI_NIDENT + 3])
				  : (uint16_t)(h[EI_NIDENT + 3] << 8 | h[EI_NIDENT + 2]);
}

const char *procinfo_foreign_abi(unsigned char elf_class, uint16_t elf_machine)
{
	if (elf_class != ELFCLASS32)
		return NULL;
	if (elf_machine == EM_386)
		return "a 32-bit x86 (ia32) process";
	if (elf_machine == EM_X86_64)
		return "an x32 process";
	return "a 32-bit process";
}

int proc_start_time(pid_t pid, uint64_t *out)
{
	struct procinfo pi = { 0 };
	char buf[4096];
	int rc;

	rc = proc_read_small(pid, "stat", buf, sizeof(buf), NULL);
	if (!rc)
		rc = parse_stat(buf, &pi);
	if (!rc)
		*out = pi.start_time;
	return rc;
}

int proc_start_stack(pid_t pid, uint64_t *out)
{
	char buf[4096];
	const char *p;
	int rc, field;

	*out = 0;
	rc = proc_read_small(pid, "stat", buf, sizeof(buf), NULL);
	if (rc)
		return rc;
	/* after the comm's last ')': the state is field 3 */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -EIO;
	p += 2;
	for (field = 3; field < 28 && p; field++) {
		p = strchr(p, ' ');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return -EIO;
	*out = strtoull(p, NULL, 10);
	return 0;
}

int proc_start_time_at(int proc_fd, uint64_t *out)
{
	struct procinfo pi = { 0 };
	char buf[4096];
	ssize_t n;
	int fd = openat(proc_fd, "stat", O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	n = read_in_full(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	rc = parse_stat(buf, &pi);
	if (!rc)
		*out = pi.start_time;
	return rc;
}

/* /proc/PID/stat itself, never a stand-in's. */
static int read_leader_stat(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	n = read_in_full(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return n == -ESRCH ? -ENOENT : (int)n;
	buf[n] = '\0';
	return 0;
}

int procinfo_read(pid_t pid, struct procinfo *pi)
{
	char buf[4096];
	struct stat st;
	ssize_t n;
	int rc;

	memset(pi, 0, sizeof(*pi));
	pi->pid = pid;
	/* The leader's own stat first: unless it is a zombie whose threads
	 * live on, that is the process's, and no stand-in is needed. */
	rc = read_leader_stat(pid, buf, sizeof(buf));
	if (!rc) {
		rc = parse_stat(buf, pi);
		proc_stand_in_find(pid, rc ? 0 : pi->state);
	}
	if (!rc && pi->state == 'Z') {
		memset(pi, 0, sizeof(*pi));
		pi->pid = pid;
		rc = proc_read_small(pid, "stat", buf, sizeof(buf), NULL);
		if (!rc)
			rc = parse_stat(buf, pi);
	}
	if (rc)
		return rc;
	{
		char *status;

		rc = proc_read_status(pid, "status", &status);
		if (rc)
			return rc;
		parse_status(status, pi);
		pi->have_creds = !proc_creds_parse(status, &pi->creds);
		free(status);
	}
	proc_comm(pid, pi->comm, sizeof(pi->comm));
	if (pi->tracer)
		proc_comm(pi->tracer, pi->tracer_comm, sizeof(pi->tracer_comm));

	proc_path(pid, "exe", buf, sizeof(buf));
	n = readlink(buf, pi->exe, sizeof(pi->exe) - 1);
	if (n > 0) {
		pi->exe[n] = '\0';
		if (str_ends_with(pi->exe, " (deleted)")) {
			pi->exe[n - strlen(" (deleted)")] = '\0';
			pi->exe_deleted = true;
		}
	} else {
		pi->exe[0] = '\0';
	}
	exe_ident(buf, pi);
	if (!stat(buf, &st)) {
		pi->exe_stat_ok = true;
		pi->exe_dev_major = major(st.st_dev);
		pi->exe_dev_minor = minor(st.st_dev);
		pi->exe_inode = st.st_ino;
	}
	return 0;
}

/* @len bytes of an aux vector (pairs of 64-bit words). */
static void parse_auxv(const uint64_t *av, size_t len, struct proc_auxv *out)
{
	size_t i;

	for (i = 0; i + 1 < len / sizeof(av[0]); i += 2) {
		if (av[i] == AT_NULL)
			break;
		if (av[i] == AT_PHDR)
			out->phdr = av[i + 1];
		else if (av[i] == AT_BASE)
			out->base = av[i + 1];
		else if (av[i] == AT_SECURE)
			out->secure = av[i + 1] != 0;
	}
}

int proc_auxv_read(pid_t pid, struct proc_auxv *out)
{
	uint64_t av[2 * 128];
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = proc_read_small(pid, "auxv", (char *)av, sizeof(av), &len);
	if (rc)
		return rc;
	parse_auxv(av, len, out);
	return 0;
}

int proc_auxv_read_at(int proc_fd, struct proc_auxv *out)
{
	uint64_t av[2 * 128];
	ssize_t n;
	int fd;

	memset(out, 0, sizeof(*out));
	fd = openat(proc_fd, "auxv", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read_in_full(fd, av, sizeof(av));
	close(fd);
	if (n < 0)
		return (int)n;
	parse_auxv(av, (size_t)n, out);
	return 0;
}
