#ifndef MEMSNAP_ALLOCATORS_DUMPDIR_AGENT_H
#define MEMSNAP_ALLOCATORS_DUMPDIR_AGENT_H

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
 * After fork the agent joins the target's user and mount namespaces and
 * root, takes its groups, uids, gids and capabilities, makes the private
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

#define AGENT_PLACES_MAX 4

/* Where the agent may make its directory, in the order to try. */
struct agent_places {
	const char *path[AGENT_PLACES_MAX];
	bool from_env[AGENT_PLACES_MAX]; /* $TMPDIR: must be the target's */
	size_t n;
};

/*
 * In the agent (agent_become.c): join @pid's mount and user namespaces,
 * chroot to its root, take its groups, uids, gids and capabilities, then
 * PR_SET_DUMPABLE 0 and NO_NEW_PRIVS.  *@fsuid: the target's fsuid (who
 * owns what it writes).  0, or -errno with *@step naming what failed.
 */
int agent_become_target(pid_t pid, uid_t *fsuid, const char **step);

/* Run the agent in the child after fork(); never returns. */
void agent_main(int sock, pid_t pid, const struct agent_places *places)
	__attribute__((noreturn));

#endif
