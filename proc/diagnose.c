#include "proc/diagnose.h"

#include "common/diag.h"

#include "proc/procinfo.h"
#include "proc/procfs.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAP_SYS_PTRACE_BIT 19

bool have_cap_sys_ptrace(void)
{
	char *buf;
	const char *p;
	bool has;

	if (proc_read_status(getpid(), "status", &buf))
		return false;
	p = strstr(buf, "\nCapEff:");
	has = p && ((strtoull(p + 8, NULL, 16) >> CAP_SYS_PTRACE_BIT) & 1);
	free(buf);
	return has;
}

/* The capability set @field ("CapPrm") of process @pid: false when it
 * cannot be read. */
static bool cap_set(pid_t pid, const char *field, uint64_t *set)
{
	char *buf, key[16];
	const char *p;

	if (proc_read_status(pid, "status", &buf))
		return false;
	snprintf(key, sizeof(key), "\n%s:", field);
	p = strstr(buf, key);
	if (p)
		*set = strtoull(p + strlen(key), NULL, 16);
	free(buf);
	return p != NULL;
}

/* Is memsnap refused what needs ptrace's read access to @pid (its
 * namespace links; a process's maps are shown more freely)? */
static bool read_refused(pid_t pid)
{
	char path[48];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	return stat(path, &st) && (errno == EACCES || errno == EPERM);
}

bool diagnose_caps(const struct procinfo *pi, char *buf, size_t size)
{
	uint64_t theirs, mine;

	buf[0] = '\0';
	/* another user's process: diagnose_access() says that first */
	if (pi->uid != geteuid() || pi->euid != geteuid() ||
	    !cap_set(getpid(), "CapEff", &mine) ||
	    ((mine >> CAP_SYS_PTRACE_BIT) & 1) ||
	    !cap_set(pi->pid, "CapPrm", &theirs) || !(theirs & ~mine) ||
	    !read_refused(pi->pid))
		return false;
	snprintf(buf, size,
		 "pid %d holds capabilities memsnap does not (CapPrm %#llx, "
		 "memsnap's CapEff %#llx), and memsnap has no CAP_SYS_PTRACE: "
		 "the kernel lets it read the maps and nothing else; give "
		 "memsnap CAP_SYS_PTRACE (kubectl debug --profile=sysadmin, "
		 "docker or podman run --cap-add=SYS_PTRACE, or run it "
		 "on the host as root)",
		 (int)pi->pid, (unsigned long long)theirs,
		 (unsigned long long)mine);
	return true;
}

/* Yama's ptrace_scope, or -1 when Yama is not there. */
static int yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &scope) != 1)
		scope = -1;
	fclose(f);
	return scope;
}

bool diagnose_access(pid_t pid, bool attach, char *buf, size_t size)
{
	struct procinfo pi;
	char dir[48];
	struct stat st;
	bool cap = have_cap_sys_ptrace();
	uid_t me = geteuid();
	int scope;

	buf[0] = '\0';
	if (attach && pid == getpid()) {
		snprintf(buf, size,
			 "pid %d is memsnap itself: a process cannot trace itself",
			 (int)pid);
		return true;
	}
	if (procinfo_read(pid, &pi))
		return false;
	if (attach && pi.tracer) {
		snprintf(buf, size, "pid %d is already traced by pid %d (%s)",
			 (int)pid, (int)pi.tracer, pi.tracer_comm);
		return true;
	}
	if (!cap && (pi.uid != me || pi.euid != me)) {
		snprintf(buf, size,
			 "pid %d runs as uid %u; memsnap runs as uid %u without CAP_SYS_PTRACE (run as uid %u or as root)",
			 (int)pid, (unsigned int)pi.euid, (unsigned int)me,
			 (unsigned int)pi.euid);
		return true;
	}
	if (diagnose_caps(&pi, buf, size))
		return true;
	/* A non-dumpable process's /proc files (not its directory) belong
	 * to root. */
	snprintf(dir, sizeof(dir), "/proc/%d/stat", (int)pid);
	if (!cap && !stat(dir, &st) && st.st_uid != pi.euid) {
		snprintf(buf, size,
			 "pid %d is not dumpable (setuid or prctl(PR_SET_DUMPABLE, 0)): only root or CAP_SYS_PTRACE may inspect it",
			 (int)pid);
		return true;
	}
	scope = yama_scope();
	if (attach && scope == 1 && !cap) {
		snprintf(buf, size,
			 "kernel.yama.ptrace_scope is 1: only a parent may attach (run as root, or sysctl kernel.yama.ptrace_scope=0)");
		return true;
	}
	if (attach && scope == 2 && !cap) {
		snprintf(buf, size,
			 "kernel.yama.ptrace_scope is 2: only CAP_SYS_PTRACE may attach (run as root)");
		return true;
	}
	if (attach && scope == 3) {
		snprintf(buf, size,
			 "kernel.yama.ptrace_scope is 3: ptrace attach is disabled until reboot");
		return true;
	}
	snprintf(buf, size,
		 "a security module (AppArmor, SELinux) or a container boundary may be denying access");
	return true;
}

void diagnose_proc_read(pid_t pid, const char *what, int err, struct diag *d)
{
	struct rlimit rl = { 0 };
	char why[512];

	d->kind = diag_kind_of(err);
	d->hint[0] = '\0';
	switch (err) {
	case -ENOENT:
	case -ESRCH:
		snprintf(d->what, sizeof(d->what), "pid %d: no such process",
			 (int)pid);
		return;
	case -EACCES:
	case -EPERM:
		diagnose_access(pid, false, why, sizeof(why));
		snprintf(d->what, sizeof(d->what), "pid %d: /proc/%d/%s: %s: %s",
			 (int)pid, (int)pid, what, strerror(-err), why);
		return;
	case -ENFILE:
		snprintf(d->what, sizeof(d->what),
			 "pid %d: %s: the system is out of open files",
			 (int)pid, strerror(-err));
		return;
	case -EMFILE:
		getrlimit(RLIMIT_NOFILE, &rl);
		snprintf(d->what, sizeof(d->what),
			 "pid %d: %s in memsnap (ulimit -n is %llu; memsnap keeps "
			 "one open per object file the process maps)", (int)pid,
			 strerror(-err), (unsigned long long)rl.rlim_cur);
		return;
	default:
		snprintf(d->what, sizeof(d->what), "pid %d: /proc/%d/%s: %s",
			 (int)pid, (int)pid, what, strerror(-err));
		return;
	}
}
