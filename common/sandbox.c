/*
 * A child with no rights (common/sandbox.h): fork, shed everything, then
 * run the parser.  The order matters: limits and credentials first,
 * while the child may still change them; no_new_privs and the seccomp
 * filter last, since the filter forbids the calls that came before.
 */
#include "common/sandbox.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
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
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

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

/* An extra call: its number, its argument, each value, kill, allow. */
#define CALL_LEN(c) ((c)->arg < 0 || (c)->fail ? 2u : 4u + (c)->nok)
#define FILTER_MAX (6 + 2 * ARRAY_LEN(plain_calls) + \
		    6 * ARRAY_LEN(prot_calls) + SANDBOX_CALLS_MAX * 8 + 1)

/* Does @o fit in a filter? */
static bool opts_fit(const struct sandbox_opts *o)
{
	size_t i;

	if (!o)
		return true;
	if (o->ncalls > SANDBOX_CALLS_MAX || (o->ncalls && !o->calls))
		return false;
	for (i = 0; i < o->ncalls; i++)
		if (o->calls[i].nok > ARRAY_LEN(o->calls[i].ok) ||
		    o->calls[i].arg > 5 || o->calls[i].fail < 0 ||
		    o->calls[i].fail > 4095 ||
		    (o->calls[i].arg >= 0 && !o->calls[i].fail &&
		     !o->calls[i].nok))
			return false;
	return true;
}

/* @c's instructions at @f; how many. */
static size_t put_call(struct sock_filter *f, const struct sandbox_call *c)
{
	size_t n = 0;
	unsigned int j;

	if (c->fail) {
		f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)c->nr, 0, 1);
		f[n++] = RET(SECCOMP_RET_ERRNO |
			     ((uint32_t)c->fail & SECCOMP_RET_DATA));
		return n;
	}
	if (c->arg < 0) {
		f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)c->nr, 0, 1);
		f[n++] = RET(SECCOMP_RET_ALLOW);
		return n;
	}
	/* another call: on to the next, with its number still in A */
	f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)c->nr, 0,
		      (uint8_t)(CALL_LEN(c) - 1));
	f[n++] = LOAD(ARG(c->arg));
	for (j = 0; j < c->nok; j++)
		f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, c->ok[j],
			      (uint8_t)(c->nok - j), 0);
	f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
	f[n++] = RET(SECCOMP_RET_ALLOW);
	return n;
}

static int install_filter(uint32_t audit_arch, const struct sandbox_opts *o)
{
	struct sock_filter f[FILTER_MAX];
	struct sock_fprog prog;
	size_t n = 0, i;

	f[n++] = LOAD(ARCH);
	f[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, audit_arch, 1, 0);
	f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
	f[n++] = LOAD(NR);
	/* x86-64's x32 calls, numbered from 0x40000000 */
	f[n++] = jump(BPF_JMP | BPF_JGE | BPF_K, SYSCALL_NR_MAX, 0, 1);
	f[n++] = RET(SECCOMP_RET_KILL_PROCESS);
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
	for (i = 0; o && i < o->ncalls; i++)
		n += put_call(f + n, &o->calls[i]);
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

/* Is this process run by valgrind?  (Its client request: 0 natively.) */
static bool under_valgrind(void)
{
#ifdef RUNNING_ON_VALGRIND
	return RUNNING_ON_VALGRIND != 0;
#else
	return false;
#endif
}

/* Everything before @serve; any failure ends the child. */
static int enter(int fd, uint32_t audit_arch, const struct sandbox_opts *o)
{
	static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	rlim_t files = o && o->files > (unsigned long)fd + 1
			       ? (rlim_t)o->files : (rlim_t)fd + 1;
	bool vg = under_valgrind();
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
	if (!rc && !vg)
		rc = set_limit(RLIMIT_FSIZE, 0);
	if (!rc && !vg)
		rc = set_limit(RLIMIT_NOFILE, files);
#if !defined(__SANITIZE_ADDRESS__)
	if (!rc && !(o && o->memory == SANDBOX_NO_LIMIT))
		rc = set_limit(RLIMIT_AS, o && o->memory ? (rlim_t)o->memory
							 : SANDBOX_MEMORY);
#endif
	if (!rc)
		rc = drop_credentials();
	if (!rc)
		rc = set_limit(RLIMIT_NPROC, 0);
	if (!rc && vg && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		rc = -errno;
	if (!rc && !vg)
		rc = install_filter(audit_arch, o);
	return rc;
}

void sandbox_exit(int status)
{
	/* no atexit handler of memsnap's runs in here; and not _exit():
	 * before each call to a function that does not return, ASan asks
	 * for the alternate signal stack, a call the filter kills (the
	 * compiler must not learn that this one does not return either) */
	syscall(SYS_exit_group, status);
}

/* The ELF header of memsnap's own executable, which the link editor
 * maps with its first segment. */
extern const ElfW(Ehdr) __ehdr_start;

uint32_t sandbox_native_audit(void)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;

	return eh->e_machine |
	       (eh->e_ident[EI_CLASS] == ELFCLASS64 ? __AUDIT_ARCH_64BIT : 0) |
	       (eh->e_ident[EI_DATA] == ELFDATA2LSB ? __AUDIT_ARCH_LE : 0);
}

int sandbox_start(struct sandbox *sb, uint32_t audit_arch,
		  int (*prepare)(void *arg), int (*serve)(int fd, void *arg),
		  void *arg)
{
	return sandbox_start_with(sb, audit_arch, NULL, prepare, serve, arg);
}

int sandbox_start_with(struct sandbox *sb, uint32_t audit_arch,
		       const struct sandbox_opts *opts,
		       int (*prepare)(void *arg),
		       int (*serve)(int fd, void *arg), void *arg)
{
	int sv[2];
	pid_t pid;

	*sb = (struct sandbox){ .fd = -1 };
	if (!opts_fit(opts))
		return -EINVAL;
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
		int status = 127;

		if (!(prepare && prepare(arg)) &&
		    !enter(sv[1], audit_arch, opts))
			status = serve(sv[1], arg) & 0xff;
		sandbox_exit(status);
		_exit(status);	/* not reached */
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

bool sandbox_wait(struct sandbox *sb, int ms)
{
	int pidfd;

	if (!sandbox_alive(sb))
		return sb->pid != 0;
	pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int n;

		do
			n = poll(&p, 1, ms);
		while (n < 0 && errno == EINTR);
		close(pidfd);
		if (n <= 0)
			return !sandbox_alive(sb);
	}
	while (waitpid(sb->pid, &sb->status, 0) < 0 && errno == EINTR)
		;
	sb->reaped = true;
	return true;
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
