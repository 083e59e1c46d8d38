#include "injector/ptrace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void tracee_hold(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

void tracee_release(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static int pt(enum __ptrace_request req, pid_t tid, void *addr, void *data)
{
	errno = 0;
	if (ptrace(req, tid, addr, data) == -1 && errno)
		return -errno;
	return 0;
}

static void init(struct tracee *t, pid_t pid, pid_t tid)
{
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->memfd = -1;
}

void tracee_adopt(struct tracee *t, pid_t pid, pid_t tid)
{
	init(t, pid, tid);
	t->seized = true;
}

static int seize(struct tracee *t, pid_t pid, pid_t tid, long opts)
{
	int rc;

	init(t, pid, tid);
	rc = pt(PTRACE_SEIZE, tid, NULL, (void *)opts);
	if (rc)
		return rc;
	t->seized = true;
	return pt(PTRACE_INTERRUPT, tid, NULL, NULL);
}

#define SEIZE_OPTS \
	(PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC)

int tracee_seize(struct tracee *t, pid_t pid, pid_t tid)
{
	return seize(t, pid, tid, SEIZE_OPTS);
}

int tracee_seize_clones(struct tracee *t, pid_t pid, pid_t tid)
{
	return seize(t, pid, tid, SEIZE_OPTS | PTRACE_O_TRACECLONE);
}

int tracee_eventmsg(struct tracee *t, unsigned long *msg)
{
	return pt(PTRACE_GETEVENTMSG, t->tid, NULL, msg);
}

static enum stop_kind classify(int status, int *sig)
{
	int event = (unsigned int)status >> 16;

	*sig = 0;
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return STOP_GONE;
	if (!WIFSTOPPED(status))
		return STOP_OTHER_EVENT;
	*sig = WSTOPSIG(status);
	switch (event) {
	case 0:
		if (*sig == (SIGTRAP | 0x80))
			return STOP_SYSCALL;
		return STOP_SIGNAL;
	case PTRACE_EVENT_STOP:
		/* With SEIZE, a group-stop reports the stop signal. */
		if (*sig == SIGSTOP || *sig == SIGTSTP || *sig == SIGTTIN ||
		    *sig == SIGTTOU)
			return STOP_GROUP;
		return STOP_EVENT;
	case PTRACE_EVENT_EXIT:
		return STOP_EXIT;
	case PTRACE_EVENT_EXEC:
		return STOP_EXEC;
	case PTRACE_EVENT_CLONE:
		return STOP_CLONE;
	default:
		return STOP_OTHER_EVENT;
	}
}

int tracee_wait(struct tracee *t, uint64_t deadline_us,
		volatile int *interrupted, struct stop *st)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		int status;
		pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
		struct timespec ts;
		uint64_t now, left;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ECHILD ? -ESRCH : -errno;
		if (r == t->tid) {
			t->stops++;
			st->status = status;
			st->kind = classify(status, &st->sig);
			if (st->kind == STOP_GONE)
				t->seized = false;
			return 0;
		}
		if (interrupted && *interrupted)
			return -EINTR;
		now = now_us();
		if (deadline_us && now >= deadline_us)
			return -ETIMEDOUT;
		/*
		 * Wake at least every 100 ms: a SIGCHLD may have been taken
		 * by a wait for another tracee, and a signal handler that
		 * ran just before sigtimedwait() would otherwise be missed.
		 */
		left = deadline_us ? deadline_us - now : 100000;
		if (left > 100000)
			left = 100000;
		ts.tv_sec = (time_t)(left / 1000000);
		ts.tv_nsec = (long)(left % 1000000) * 1000;
		sigtimedwait(&chld, NULL, &ts);
	}
}

int tracee_interrupt(struct tracee *t)
{
	return pt(PTRACE_INTERRUPT, t->tid, NULL, NULL);
}

int tracee_cont(struct tracee *t, int sig)
{
	return pt(PTRACE_CONT, t->tid, NULL, (void *)(long)sig);
}

int tracee_syscall(struct tracee *t, int sig)
{
	return pt(PTRACE_SYSCALL, t->tid, NULL, (void *)(long)sig);
}

int tracee_step(struct tracee *t)
{
	return pt(PTRACE_SINGLESTEP, t->tid, NULL, NULL);
}

int tracee_detach(struct tracee *t, int sig)
{
	int rc = 0;

	if (t->memfd >= 0) {
		close(t->memfd);
		t->memfd = -1;
	}
	if (t->seized) {
		rc = pt(PTRACE_DETACH, t->tid, NULL, (void *)(long)sig);
		t->seized = false;
	}
	return rc;
}

int tracee_getregset(struct tracee *t, int type, void *buf, size_t *len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = *len };
	int rc = pt(PTRACE_GETREGSET, t->tid, (void *)(long)type, &iov);

	if (!rc)
		*len = iov.iov_len;
	return rc;
}

int tracee_setregset(struct tracee *t, int type, const void *buf,
		     size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return pt(PTRACE_SETREGSET, t->tid, (void *)(long)type, &iov);
}

int tracee_getsigmask(struct tracee *t, uint64_t *mask)
{
	return pt(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(*mask), mask);
}

int tracee_setsigmask(struct tracee *t, uint64_t mask)
{
	return pt(PTRACE_SETSIGMASK, t->tid, (void *)sizeof(mask), &mask);
}

int tracee_seccomp_filter(struct tracee *t, unsigned long index, void *buf,
			  size_t count)
{
	long n;

	/* The count of instructions; with a NULL buffer, just the count. */
	n = ptrace(PTRACE_SECCOMP_GET_FILTER, t->tid, (void *)index,
		   count ? buf : NULL);
	if (n < 0)
		return -errno;
	if (count && (size_t)n > count)
		return -E2BIG;
	return (int)n;
}

int tracee_getsiginfo(struct tracee *t, void *buf)
{
	return pt(PTRACE_GETSIGINFO, t->tid, NULL, buf);
}

static int mem_fd(struct tracee *t)
{
	char path[64];

	if (t->memfd >= 0)
		return t->memfd;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/mem", (int)t->pid,
		 (int)t->tid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	return t->memfd >= 0 ? t->memfd : -errno;
}

/* pread/pwrite on /proc/PID/task/TID/mem; an unmapped page is -EFAULT. */
static int mem_rw(struct tracee *t, uint64_t addr, void *buf, size_t len,
		  bool write)
{
	int fd = mem_fd(t);
	ssize_t n;

	if (fd < 0)
		return fd;
	if (addr > (uint64_t)LLONG_MAX)
		return -EFAULT;
	n = write ? pwrite(fd, buf, len, (off_t)addr)
		  : pread(fd, buf, len, (off_t)addr);
	if (n < 0)
		return errno == EIO ? -EFAULT : -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int tracee_read(struct tracee *t, uint64_t addr, void *buf, size_t len)
{
	return mem_rw(t, addr, buf, len, false);
}

int tracee_write(struct tracee *t, uint64_t addr, const void *buf,
		 size_t len)
{
	return mem_rw(t, addr, (void *)buf, len, true);
}
