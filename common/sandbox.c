/*
 * A child with no rights (common/sandbox.h): fork, shed everything, then
 * run the parser.  The order matters: limits and credentials first,
 * while the child may still change them; no_new_privs and the seccomp
 * filter last, since the filter forbids the calls that came before.
 */
#include "common/sandbox.h"

#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The uid and gid the child takes when memsnap is root: nobody. */
#define SANDBOX_ID 65534

/* Above this, x86-64's x32 calls; no other CPU has numbers that high. */
#define SYSCALL_NR_MAX 0x40000000u

static struct sock_filter stmt(uint16_t code, uint32_t k)
{
	return (struct sock_filter)BPF_STMT(code, k);
}

static struct sock_filter jump(uint16_t code, uint32_t k, uint8_t jt,
			       uint8_t jf)
{
	return (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

#define LOAD(off) stmt(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(off))
#define RET(action) stmt(BPF_RET | BPF_K, (action))
#define NR offsetof(struct seccomp_data, nr)
#define ARCH offsetof(struct seccomp_data, arch)
/* The low 32 bits of argument @i (both CPUs are little-endian). */
#define ARG(i) (offsetof(struct seccomp_data, args) + 8 * (i))

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Calls allowed whatever their arguments. */
static const long plain_calls[] = {
	SYS_read, SYS_write, SYS_brk, SYS_munmap, SYS_mremap, SYS_madvise,
	SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_exit, SYS_exit_group,
};

/* Allowed only without PROT_EXEC in argument 2. */
static const long prot_calls[] = { SYS_mmap, SYS_mprotect };

#define FILTER_MAX (5 + 2 * ARRAY_LEN(plain_calls) + \
		    6 * ARRAY_LEN(prot_calls) + 1)

static int install_filter(uint32_t audit_arch)
{
	struct sock_filter f[FILTER_MAX];
	struct sock_fprog prog;
	size_t n = 0, i;

	f[n++] = LOAD(ARCH);
	f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, audit_arch, 1, 0);
	f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
	f[n++] = LOAD(NR);
	/* x86-64's x32 calls, numbered from 0x40000000 */
	f[n++] = jump(BPF_JMP | BPF_JGE | BPF_K, SYSCALL_NR_MAX,
		      (uint8_t)(2 * ARRAY_LEN(plain_calls) +
				6 * ARRAY_LEN(prot_calls)), 0);
	for (i = 0; i < ARRAY_LEN(plain_calls); i++) {
		f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K,
			      (uint32_t)plain_calls[i], 0, 1);
		f[n++] = RET(SECCOMP_RET_ALLOW);
	}
	for (i = 0; i < ARRAY_LEN(prot_calls); i++) {
		/* this call: A = prot; PROT_EXEC in it: kill, else allow;
		 * another: reload the number and go on */
		f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K,
			      (uint32_t)prot_calls[i], 0, 4);
		f[n++] = LOAD(ARG(2));
		f[n++] = jump(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1);
		f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
		f[n++] = RET(SECCOMP_RET_ALLOW);
		f[n++] = LOAD(NR);
	}
	f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
	prog = (struct sock_fprog){ .len = (unsigned short)n, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
		return -errno;
	return 0;
}

static int close_all_but(int keep)
{
	if (keep > 0 && close_range(0, (unsigned int)keep - 1, 0))
		return -errno;
	if (close_range((unsigned int)keep + 1, ~0u, 0))
		return -errno;
	return 0;
}

static int set_limit(int resource, rlim_t value)
{
	struct rlimit rl = { value, value };

	return setrlimit(resource, &rl) ? -errno : 0;
}

static int drop_credentials(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct none[2];
	uid_t r, e, s;

	if (!geteuid() || !getuid()) {
		if (setgroups(0, NULL) ||
		    setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID) ||
		    setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID))
			return -errno;
		if (getresuid(&r, &e, &s) || r != SANDBOX_ID ||
		    e != SANDBOX_ID || s != SANDBOX_ID)
			return -EPERM;
	}
	/* A non-root memsnap may still hold capabilities (file caps). */
	memset(none, 0, sizeof(none));
	if (syscall(SYS_capset, &h, none))
		return -errno;
	return 0;
}

/* Everything before @serve; any failure ends the child. */
static int enter(int fd, uint32_t audit_arch)
{
	static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	size_t i;
	int rc;

	/* memsnap stops the child itself; a dead memsnap kills it */
	for (i = 0; i < ARRAY_LEN(quiet); i++)
		signal(quiet[i], SIG_IGN);
	signal(SIGPIPE, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		return -errno;
	rc = close_all_but(fd);
	if (!rc)
		rc = set_limit(RLIMIT_CORE, 0);
	if (!rc)
		rc = set_limit(RLIMIT_FSIZE, 0);
	if (!rc)
		rc = set_limit(RLIMIT_NOFILE, (rlim_t)fd + 1);
#if !defined(__SANITIZE_ADDRESS__)
	if (!rc)
		rc = set_limit(RLIMIT_AS, SANDBOX_MEMORY);
#endif
	if (!rc)
		rc = drop_credentials();
	if (!rc)
		rc = set_limit(RLIMIT_NPROC, 0);
	if (!rc)
		rc = install_filter(audit_arch);
	return rc;
}

int sandbox_start(struct sandbox *sb, uint32_t audit_arch,
		  int (*prepare)(void *arg), int (*serve)(int fd, void *arg),
		  void *arg)
{
	int sv[2];
	pid_t pid;

	*sb = (struct sandbox){ .fd = -1 };
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (!pid) {
		if ((prepare && prepare(arg)) || enter(sv[1], audit_arch))
			_exit(127);
		/* _exit: no atexit handler of memsnap's runs in here */
		_exit(serve(sv[1], arg) & 0xff);
	}
	close(sv[1]);
	sb->pid = pid;
	sb->fd = sv[0];
	return 0;
}

bool sandbox_alive(struct sandbox *sb)
{
	pid_t r;

	if (!sb->pid || sb->reaped)
		return false;
	do
		r = waitpid(sb->pid, &sb->status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == sb->pid || (r < 0 && errno == ECHILD))
		sb->reaped = true;
	return !sb->reaped;
}

const char *sandbox_status(struct sandbox *sb, char *buf, size_t size)
{
	if (sandbox_alive(sb))
		snprintf(buf, size, "running");
	else if (WIFSIGNALED(sb->status))
		snprintf(buf, size, "killed by SIG%s",
			 sigabbrev_np(WTERMSIG(sb->status)) ?
				 sigabbrev_np(WTERMSIG(sb->status)) : "?");
	else if (WIFEXITED(sb->status))
		snprintf(buf, size, "exited with status %d",
			 WEXITSTATUS(sb->status));
	else
		snprintf(buf, size, "gone");
	return buf;
}

void sandbox_stop(struct sandbox *sb)
{
	if (sb->fd >= 0)
		close(sb->fd);
	sb->fd = -1;
	if (sb->pid && !sb->reaped) {
		kill(sb->pid, SIGKILL);
		while (waitpid(sb->pid, &sb->status, 0) < 0 && errno == EINTR)
			;
		sb->reaped = true;
	}
}
