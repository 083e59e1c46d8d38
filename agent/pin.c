/*
 * The agent's hold on the target (see agent/agent.h): the
 * /proc/PID it reads is proven to be the process memsnap looked at
 * (proc/pin.h), with the credentials it had then, and its environment
 * is trusted only where its own loader trusted it.
 */
#include "agent/agent.h"

#include "common/util.h"
#include "proc/procfs.h"
#include "proc/procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int agent_pin(const struct agent_target *t, char *why, size_t size)
{
	int fd = proc_pin_dir(&t->pin);

	if (fd == -ESRCH)
		snprintf(why, size, "%s", PROC_PIN_GONE);
	else if (fd < 0)
		snprintf(why, size, "opening /proc/%d: %s", (int)t->pin.pid,
			 strerror(-fd));
	return fd;
}

int agent_same_creds(const struct agent_target *t,
		     const struct proc_creds *now, char *why, size_t size)
{
	static const char *const ids[] = { "uid", "euid", "suid", "fsuid" };
	static const char *const gids[] = { "gid", "egid", "sgid", "fsgid" };
	const struct proc_creds *was = &t->creds;
	char what[128];
	size_t i;

	for (i = 0; i < 4; i++) {
		if (now->uid[i] != was->uid[i]) {
			snprintf(what, sizeof(what), "%s %u, now %u", ids[i],
				 (unsigned)was->uid[i], (unsigned)now->uid[i]);
			goto changed;
		}
		if (now->gid[i] != was->gid[i]) {
			snprintf(what, sizeof(what), "%s %u, now %u", gids[i],
				 (unsigned)was->gid[i], (unsigned)now->gid[i]);
			goto changed;
		}
	}
	if (now->cap_prm == was->cap_prm && now->cap_eff == was->cap_eff)
		return 0;
	snprintf(what, sizeof(what),
		 "capabilities %" PRIx64 "/%" PRIx64 ", now %" PRIx64
		 "/%" PRIx64 " (permitted/effective)",
		 was->cap_prm, was->cap_eff, now->cap_prm, now->cap_eff);
changed:
	snprintf(why, size,
		 "the process changed its credentials since memsnap looked at it (%s)",
		 what);
	return -ESTALE;
}

void agent_environment(int proc_fd, const struct proc_creds *c,
		       struct agent_who *who)
{
	struct proc_auxv av;
	char v[512];

	who->tmpdir[0] = '\0';
	/* A set-user-ID, set-group-ID or capability-gaining exec: the
	 * environment is its real user's, and the loader dropped TMPDIR
	 * from it (glibc's unsecure variables).  Unreadable: assume so. */
	who->secure = proc_auxv_read_at(proc_fd, &av) || av.secure ||
		      c->uid[0] != c->uid[1] || c->gid[0] != c->gid[1];
	if (who->secure || proc_getenv_at(proc_fd, "TMPDIR", v, sizeof(v)))
		return;
	if (v[0] == '/' && strlen(v) < sizeof(who->tmpdir) &&
	    !strstr(v, "/../") && !str_ends_with(v, "/.."))
		snprintf(who->tmpdir, sizeof(who->tmpdir), "%s", v);
}
