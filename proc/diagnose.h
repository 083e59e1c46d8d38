#ifndef MEMSNAP_PROC_DIAGNOSE_H
#define MEMSNAP_PROC_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Why memsnap was refused access to @pid, as one clause for the end of
 * an error line ("pid 4242 runs as uid 0; memsnap runs as uid 1000
 * without CAP_SYS_PTRACE").  @attach: the refusal was to ptrace-attach
 * (Yama and existing tracers matter), else to read /proc/PID files.
 * Returns false and leaves @buf empty when nothing explains it.
 */
bool diagnose_access(pid_t pid, bool attach, char *buf, size_t size);

/*
 * Root in a container without CAP_SYS_PTRACE, facing a process of the
 * same uid (@pi, as procinfo_read() gave it) with capabilities it
 * lacks: the kernel shows it that
 * process's maps and refuses everything else.  True with the clause in
 * @buf saying so and how to get the capability.
 */
struct procinfo;
bool diagnose_caps(const struct procinfo *pi, char *buf, size_t size);

/* Does memsnap hold CAP_SYS_PTRACE in its effective set? */
bool have_cap_sys_ptrace(void);

struct diag;

/*
 * What the failure @err (-errno) to read /proc/@pid/@what means, into
 * @d: its kind and one line ("pid 4242: no such process"; for a refusal,
 * diagnose_access()'s reason; for a lack of descriptors, whose).
 */
void diagnose_proc_read(pid_t pid, const char *what, int err, struct diag *d);

#endif
