/*
 * The JVM's performance counters (proc/runtime.h): the hsperfdata file
 * HotSpot maps shared at /tmp/hsperfdata_USER/PID in its own view, the
 * one jstat and jcmd read.  memsnap opens no file for it: the JVM's
 * mapping is read from its memory, through /proc/PID/mem, so nothing of
 * the target's /tmp is resolved.  The layout (HotSpot's perfMemory.hpp
 * and perfData.hpp):
 *
 *   prologue, 32 bytes: magic ca fe c0 c0, byte order (0 big, 1
 *     little), major 2, minor, accessible, used (int32), overflow,
 *     modification time (int64), entry_offset, num_entries (int32)
 *   entries from entry_offset, each: entry_length, name_offset,
 *     vector_length (int32), data_type ('J' a 64-bit counter, 'B' a
 *     byte vector: a string), flags, units, variability (bytes),
 *     data_offset (int32); its name and data inside it
 *
 *   sun.gc.generation.1.space.0.used = 315543552
 *   sun.gc.metaspace.capacity = 327680
 *   java.property.java.vm.version = "17.0.15+6-Debian-1deb12u1"
 *
 * Every offset and length is the target's: each is checked against
 * the entry it is in and the bytes read, and a name must end inside
 * its entry.
 */
#include "proc/runtime.h"

#include "common/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROLOGUE 32u
#define ENTRY_HEAD 20u
#define ENTRIES_MAX 65536u

static const unsigned char magic[4] = { 0xca, 0xfe, 0xc0, 0xc0 };

static uint32_t get32(const unsigned char *p, bool le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
		  : (uint32_t)p[3] | (uint32_t)p[2] << 8 |
			    (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static uint64_t get64(const unsigned char *p, bool le)
{
	uint64_t a = get32(p, le), b = get32(p + 4, le);

	return le ? b << 32 | a : a << 32 | b;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* @s starts with @prefix: what follows, or NULL. */
static const char *after(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(s, prefix, n) ? NULL : s + n;
}

/* Digits, then a dot: what follows the dot, or NULL. */
static const char *index_dot(const char *s)
{
	const char *p = s;

	while (*p >= '0' && *p <= '9' && p - s < 4)
		p++;
	return p > s && *p == '.' ? p + 1 : NULL;
}

/* What the counters add up to, while they are read. */
struct sums {
	uint64_t committed, used, max_sum, max_max;
	bool heap, meta_used, meta_committed;
};

/* "sun.gc.generation.N.capacity", ".maxCapacity",
 * "sun.gc.generation.N.space.M.used". */
static void generation(const char *name, uint64_t v, struct sums *s)
{
	const char *p = after(name, "sun.gc.generation."), *q;

	if (!p || !(p = index_dot(p)))
		return;
	if (!strcmp(p, "capacity")) {
		s->committed = sat_add(s->committed, v);
		s->heap = true;
	} else if (!strcmp(p, "maxCapacity")) {
		s->max_sum = sat_add(s->max_sum, v);
		if (v > s->max_max)
			s->max_max = v;
	} else if ((q = after(p, "space.")) && (q = index_dot(q)) &&
		   !strcmp(q, "used")) {
		s->used = sat_add(s->used, v);
	}
}

static void counter(const char *name, uint64_t v, struct runtime_stats *st,
		    struct sums *s)
{
	if (!strcmp(name, "sun.gc.metaspace.used")) {
		st->metaspace_used = v;
		s->meta_used = true;
	} else if (!strcmp(name, "sun.gc.metaspace.capacity")) {
		st->metaspace_committed = v;
		s->meta_committed = true;
	} else {
		generation(name, v, s);
	}
}

/* A string counter's bytes, cleaned of control bytes, into @out. */
static void text(const unsigned char *p, size_t n, char *out, size_t size)
{
	size_t i;

	for (i = 0; i < n && p[i] && i + 1 < size; i++)
		out[i] = p[i] < 0x20 || p[i] >= 0x7f ? '?' : (char)p[i];
	out[i] = '\0';
}

int hsperf_parse(const void *buf, size_t len, struct runtime_info *rt)
{
	const unsigned char *b = buf;
	struct runtime_stats st = { 0 };
	struct sums s = { 0 };
	char version[sizeof(rt->version)] = "";
	char args[sizeof(rt->settings)] = "";
	uint32_t used, off, count, i;
	bool le;

	if (len < PROLOGUE || memcmp(b, magic, 4) || b[4] > 1 || b[5] != 2)
		return -EINVAL;
	le = b[4] == 1;
	used = get32(b + 8, le);
	if (used < PROLOGUE || used > len)
		used = (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
	off = get32(b + 24, le);
	count = get32(b + 28, le);
	if (off < PROLOGUE || off > used)
		return -EINVAL;
	for (i = 0; i < count && i < ENTRIES_MAX; i++) {
		const unsigned char *e = b + off;
		uint32_t elen, name_off, vlen, data_off;
		const char *name;

		if (used - off < ENTRY_HEAD)
			break;
		elen = get32(e, le);
		name_off = get32(e + 4, le);
		vlen = get32(e + 8, le);
		data_off = get32(e + 16, le);
		if (elen < ENTRY_HEAD || elen > used - off)
			break;
		off += elen;
		if (name_off < ENTRY_HEAD || name_off >= elen ||
		    !memchr(e + name_off, '\0', elen - name_off) ||
		    data_off < ENTRY_HEAD || data_off >= elen)
			continue;
		name = (const char *)e + name_off;
		if (e[12] == 'J' && !vlen && elen - data_off >= 8)
			counter(name, get64(e + data_off, le), &st, &s);
		else if (e[12] == 'B' && vlen && vlen <= elen - data_off &&
			 !strcmp(name, "java.property.java.vm.version"))
			text(e + data_off, vlen, version, sizeof(version));
		else if (e[12] == 'B' && vlen && vlen <= elen - data_off &&
			 !strcmp(name, "sun.gc.policy.name"))
			text(e + data_off, vlen, st.collector,
			     sizeof(st.collector));
		else if (e[12] == 'B' && vlen && vlen <= elen - data_off &&
			 !strcmp(name, "java.rt.vmArgs"))
			text(e + data_off, vlen, args, sizeof(args));
	}
	/* a heap is its generations' capacities: without them, none */
	st.have_heap = s.heap;
	if (s.heap) {
		st.heap_committed = s.committed;
		st.heap_used = s.used;
		/* G1's generations each count the whole heap as their
		 * most */
		st.heap_max = !strcmp(st.collector, "GarbageFirst")
				      ? s.max_max
				      : s.max_sum;
	}
	st.have_metaspace = s.meta_used && s.meta_committed;
	rt->st.have_heap = st.have_heap;
	rt->st.heap_used = st.heap_used;
	rt->st.heap_committed = st.heap_committed;
	rt->st.heap_max = st.heap_max;
	rt->st.have_metaspace = st.have_metaspace;
	rt->st.metaspace_used = st.metaspace_used;
	rt->st.metaspace_committed = st.metaspace_committed;
	memcpy(rt->st.collector, st.collector, sizeof(st.collector));
	if (version[0])
		memcpy(rt->version, version, sizeof(version));
	if (args[0])	/* -Xmx512m, -XX:MaxRAMPercentage=...: its bounds */
		memcpy(rt->settings, args, sizeof(args));
	return 0;
}

/* ".../hsperfdata_USER/DIGITS": the JVM's counters file. */
static bool hsperf_path(const char *path)
{
	const char *base = strrchr(path, '/'), *dir, *p;

	if (!base || !base[1] || base == path)
		return false;
	for (p = base + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	for (dir = base - 1; dir > path && dir[-1] != '/'; dir--)
		;
	return !strncmp(dir, "hsperfdata_", 11) && dir + 11 < base;
}

int hsperf_read_at(int proc_fd, const struct maps *maps,
		   struct runtime_info *rt)
{
	const struct map_entry *e = NULL;
	unsigned char *buf;
	ssize_t got;
	size_t i, len;
	int fd, rc;

	for (i = 0; i < maps->n && !e; i++)
		if (maps->v[i].path && maps->v[i].shared &&
		    (maps->v[i].prot & MAP_PROT_READ) && !maps->v[i].offset &&
		    hsperf_path(maps->v[i].path))
			e = &maps->v[i];
	if (!e)
		return -ENOENT;
	len = e->end - e->start > HSPERF_MAX ? HSPERF_MAX
					     : (size_t)(e->end - e->start);
	if (e->start > (uint64_t)INT64_MAX)
		return -EINVAL;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	fd = openat(proc_fd, "mem", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		free(buf);
		return rc;
	}
	got = pread_in_full(fd, buf, len, (off_t)e->start);
	close(fd);
	rc = got < 0 ? (int)got : hsperf_parse(buf, (size_t)got, rt);
	free(buf);
	return rc;
}
