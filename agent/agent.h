#ifndef MEMSNAP_AGENT_AGENT_H
#define MEMSNAP_AGENT_AGENT_H

#include "proc/pin.h"
#include "proc/procinfo.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The agent: a child of memsnap that does every file operation in the
 * target's filesystem view with the target's credentials (docs/DESIGN.md,
 * "Files in the target's view").  dumpdir.c starts it and talks to it
 * over a SOCK_SEQPACKET pair; this is the wire format, private to the two.
 *
 * After fork the agent opens /proc/PID and proves it is the process
 * memsnap looked at (pin.c), joins the target's user and mount
 * namespaces and root, takes its groups, uids, gids and capabilities
 * (the same as when memsnap looked, or it refuses), makes the private
 * directory and answers one request per message until REMOVE or EOF,
 * when it removes the directory and exits.  memsnap itself never opens,
 * creates or removes anything by a path of the target's view.
 */

enum agent_op {
	AGENT_OPEN = 1,	  /* name: the file; reply: size and an fd */
	AGENT_EXPLAIN,	  /* name: the file; reply: text (maybe empty) */
	AGENT_REMOVE,	  /* reply: rc; then the agent exits */
};

struct agent_req {
	uint32_t op;
	char name[64];
};

/*
 * The first reply (after start) carries the place and the directory's
 * name as "PLACE\0NAME\0" in text, or, with rc < 0, why each place failed.
 */
struct agent_rep {
	int32_t rc;
	uint64_t size;
	char text[1536];
};

/*
 * The process the agent is for, as memsnap looked at it (cli/session.c's
 * view): pinned (proc/pin.h) by a pidfd opened before anything of it was
 * read, or without one by its start time; @creds are what the view read.
 */
struct agent_target {
	struct proc_pin pin;
	struct proc_creds creds;
};

/* What the agent learnt of the target, through its pinned /proc/PID,
 * before becoming it. */
struct agent_who {
	uid_t fsuid;		/* who owns what the target writes */
	bool secure;		/* agent_environment(): secure mode */
	char tmpdir[512];	/* its $TMPDIR: absolute, no "..", "" if none
				   or @secure */
};

#define AGENT_PLACES_MAX 4

/* Where the agent may make its directory, in the order to try. */
struct agent_places {
	const char *path[AGENT_PLACES_MAX];
	bool from_env[AGENT_PLACES_MAX]; /* $TMPDIR: must be the target's */
	size_t n;
};

/*
 * In the agent (pin.c): /proc/PID of @t, proven to be @t's
 * (proc_pin_dir()).  The directory fd, or -ESRCH (@t exited; its pid
 * may name another process now) or -errno, with the reason in @why.
 */
int agent_pin(const struct agent_target *t, char *why, size_t size);

/*
 * In the agent (pin.c): are @now (read through the pinned
 * directory) the credentials @t had when memsnap looked?  0, or -ESTALE
 * with what changed in @why ("the process changed its credentials since
 * memsnap looked at it (euid 65534, now 0)").
 */
int agent_same_creds(const struct agent_target *t,
		     const struct proc_creds *now, char *why, size_t size);

/*
 * In the agent (pin.c): whether the target runs in secure mode
 * (AT_SECURE, or real and effective ids that differ, or an aux vector
 * that cannot be read), and otherwise its $TMPDIR, through @proc_fd.
 * Its loader ignored TMPDIR in secure mode: so does the agent.
 */
void agent_environment(int proc_fd, const struct proc_creds *c,
		       struct agent_who *who);

/*
 * In the agent (become.c): through @proc_fd (agent_pin()), check
 * the target still has @t's credentials, learn its environment
 * (agent_environment()), then join its mount and user namespaces,
 * chroot to its root, take its groups, uids, gids and capabilities,
 * then PR_SET_DUMPABLE 0 and NO_NEW_PRIVS.  0, or -errno with why in
 * @why: -ESTALE, its credentials changed.
 */
int agent_become_target(int proc_fd, const struct agent_target *t,
			struct agent_who *who, char *why, size_t size);

/* Run the agent for @t in the child after fork(); never returns. */
void agent_main(int sock, const struct agent_target *t)
	__attribute__((noreturn));

#endif
