#ifndef MEMSNAP_PROC_CGROUP_H
#define MEMSNAP_PROC_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

/*
 * The memory limit that applies to process @pid: the smallest
 * memory.max of its cgroup (v2) and every cgroup above it, as this
 * process sees /sys/fs/cgroup; on a v1 (or hybrid) host the memory
 * controller's memory.limit_in_bytes the same way.  *@limit 0 when
 * none applies ("max" everywhere).  0, or -errno: -ENOENT without
 * either hierarchy there (or another cgroup namespace that hides the
 * path), or what reading /proc/PID/cgroup gave.
 *
 *   /proc/4242/cgroup:   0::/system.slice/redis-server.service
 *   /sys/fs/cgroup/system.slice/redis-server.service/memory.max: 1073741824
 *   /proc/4242/cgroup:   4:memory:/process_api/1b88   (v1)
 *   /sys/fs/cgroup/memory/process_api/1b88/memory.limit_in_bytes
 */
int proc_memory_limit(pid_t pid, uint64_t *limit);

/* The same through @proc_fd, a directory fd of /proc/PID that names the
 * process for sure (its "cgroup" read there, not by number). */
int proc_memory_limit_at(int proc_fd, uint64_t *limit);

/*
 * The path of the cgroup of the process of @proc_fd (as above) in the
 * hierarchy that holds its memory limit: the unified one's
 * ("/system.slice/redis-server.service"), else the v1 memory
 * controller's, as this process's cgroup namespace shows it: a cgroup
 * outside its root is "/../../kubepods.slice/...", a name to show, not
 * a path to open.  0, or -ENOENT (none: @path ""), or what reading
 * "cgroup" gave.
 */
int proc_cgroup_at(int proc_fd, char *path, size_t size);

#endif
