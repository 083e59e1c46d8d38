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

#endif
