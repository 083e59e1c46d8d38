/*
 * dumpdir_create() for a process as it is now: the view the CLI would
 * load (cli/session.c), pinned by a pidfd opened first.  For the unit
 * tests of the dump directory, whose "target" is this process or a
 * child.
 */
#ifndef MEMSNAP_TESTS_DUMPDIR_NOW_H
#define MEMSNAP_TESTS_DUMPDIR_NOW_H

#include "agent/dumpdir.h"
#include "proc/procinfo.h"

#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int dumpdir_create_now(pid_t pid, struct dumpdir **out,
				     char *why, size_t why_size)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), rc;
	struct procinfo pi;
	struct diag err;

	if (procinfo_read(pid, &pi)) {
		/* gone: dumpdir_create() says so */
		memset(&pi, 0, sizeof(pi));
		pi.pid = pid;
	}
	rc = dumpdir_create(&pi, pidfd, out, &err);
	if (rc && why && why_size)
		snprintf(why, why_size, "%.*s", (int)why_size - 1, err.what);
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}

#endif
