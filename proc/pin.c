/*
 * A process pinned by its pidfd and start time (proc/pin.h).
 */
#include "proc/pin.h"

#include "proc/procfs.h"
#include "proc/procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int proc_pin_begin(pid_t pid, struct proc_pin *p)
{
	int fd;

	*p = PROC_PIN_NONE;
	if (pid <= 0)
		return -ESRCH;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0 && errno == ESRCH)
		return -ESRCH;
	/* ENOSYS before Linux 5.3, EINVAL for a thread that leads no
	 * group: the start time alone then */
	p->pid = pid;
	p->pidfd = fd >= 0 ? fd : -1;
	return 0;
}

int proc_pin_open(pid_t pid, struct proc_pin *p)
{
	int rc = proc_pin_begin(pid, p);

	if (rc)
		return rc;
	rc = proc_start_time(pid, &p->start_time);
	if (!rc)
		rc = proc_pin_check(p);
	if (rc) {
		proc_pin_close(p);
		return rc == -ENOENT ? -ESRCH : rc;
	}
	return 0;
}

int proc_pin_check(const struct proc_pin *p)
{
	uint64_t t;

	if (p->pidfd >= 0) {
		/* EPERM: it is there, only not ours to signal */
		if (syscall(SYS_pidfd_send_signal, p->pidfd, 0, NULL, 0) &&
		    errno == ESRCH)
			return -ESRCH;
		return 0;
	}
	if (proc_start_time(p->pid, &t) || t != p->start_time)
		return -ESRCH;
	return 0;
}

int proc_pin_dir(const struct proc_pin *p)
{
	char path[96];
	uint64_t t;
	int fd, rc;

	rc = proc_path(p->pid, "", path, sizeof(path));
	if (rc)
		return rc;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? -ESRCH : -errno;
	/* without a pidfd: the start time read through the directory, the
	 * process it holds */
	if (p->pidfd >= 0 ? proc_pin_check(p)
			  : proc_start_time_at(fd, &t) || t != p->start_time) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

int proc_pin_dup(const struct proc_pin *p, struct proc_pin *copy)
{
	*copy = *p;
	if (p->pidfd < 0)
		return 0;
	copy->pidfd = fcntl(p->pidfd, F_DUPFD_CLOEXEC, 0);
	if (copy->pidfd < 0) {
		*copy = PROC_PIN_NONE;
		return -errno;
	}
	return 0;
}

void proc_pin_close(struct proc_pin *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	*p = PROC_PIN_NONE;
}
