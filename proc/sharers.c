/*
 * Who else maps a piece of shared memory (proc/smaps.h): the other
 * processes whose maps name the same device and inode, found by reading
 * /proc/N/maps of at most SHARERS_SCAN processes.  For explain's shmem
 * finding: PostgreSQL's postmaster shares its segment with every
 * backend it forked.  Reads only; a process that exits or refuses is
 * passed over.
 */
#include "proc/smaps.h"

#include "proc/maps.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Processes looked at, at most; lines of one maps file read, at most. */
#define SHARERS_SCAN 4096
#define LINES_MAX 65536

/* Does process @pid map (@maj:@min, @ino)? */
static bool maps_it(pid_t pid, uint32_t maj, uint32_t min, uint64_t ino)
{
	char path[64], line[4096 + 128];
	unsigned int n = 0;
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && n++ < LINES_MAX && fgets(line, sizeof(line), f)) {
		struct map_entry e;
		const char *p;
		size_t plen;

		found = !maps_parse_line(line, strcspn(line, "\n"), &e, &p,
					 &plen) &&
			e.inode == ino && e.dev_major == maj &&
			e.dev_minor == min;
	}
	fclose(f);
	return found;
}

static void comm_of(pid_t pid, char *buf, size_t size)
{
	char path[64];
	size_t i;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	buf[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	for (i = 0; buf[i]; i++)
		if (!isprint((unsigned char)buf[i]))
			buf[i] = '?';
}

int proc_sharers(pid_t self, uint32_t maj, uint32_t min, uint64_t ino,
		 struct proc_sharers *out)
{
	struct dirent *de;
	DIR *d;

	memset(out, 0, sizeof(*out));
	if (!ino)
		return -EINVAL;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == self)
			continue;
		if (out->scanned++ >= SHARERS_SCAN) {
			out->cut = true;
			break;
		}
		if (!maps_it((pid_t)pid, maj, min, ino))
			continue;
		if (out->n < PROC_SHARERS_MAX) {
			out->pid[out->n] = (pid_t)pid;
			comm_of((pid_t)pid, out->comm[out->n],
				sizeof(out->comm[0]));
			out->n++;
		}
		out->total++;
	}
	closedir(d);
	return 0;
}
