#include "symbols/objects.h"

#include "common/fsio.h"
#include "proc/procfs.h"
#include "common/util.h"
#include "symbols/opener.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool same_file(const struct object *a, const struct map_entry *e)
{
	return a->inode == e->inode && a->dev_major == e->dev_major &&
	       a->dev_minor == e->dev_minor && !strcmp(a->path, e->path);
}

static void add_text(struct object *o, const struct map_entry *e)
{
	if (!o->exec || e->start < o->text_lo)
		o->text_lo = e->start;
	if (!o->exec || e->end > o->text_hi)
		o->text_hi = e->end;
	o->exec = true;
}

int objects_new(const struct maps *m, const struct object_source *src,
		struct objects **out)
{
	struct objects *os = calloc(1, sizeof(*os));
	size_t cap = 0, i;
	long ps = sysconf(_SC_PAGESIZE);

	if (!os)
		return -ENOMEM;
	os->src = *src;
	os->page_size = ps > 0 ? (uint64_t)ps : 4096;
	for (i = 0; i < m->n; i++) {
		const struct map_entry *e = &m->v[i];
		struct object *last = os->n ? &os->v[os->n - 1] : NULL;

		/* Only file mappings: not anonymous, not [vdso] and kin. */
		if (!e->path || e->inode == 0 || map_is_pseudo(e))
			continue;
		/* A second mapping of the same file continues the object,
		 * unless it starts again at offset 0 (a second load). */
		if (last && same_file(last, e) && e->offset != 0) {
			if (e->end > last->hi)
				last->hi = e->end;
			if (e->prot & MAP_PROT_EXEC)
				add_text(last, e);
			continue;
		}
		if (array_grow((void **)&os->v, &cap, os->n + 1,
			       sizeof(*os->v))) {
			objects_free(os);
			return -ENOMEM;
		}
		os->v[os->n++] = (struct object){
			.path = e->path,
			.deleted = e->deleted,
			.dev_major = e->dev_major,
			.dev_minor = e->dev_minor,
			.inode = e->inode,
			.lo = e->start,
			.hi = e->end,
			.map_start = e->start,
			.map_end = e->end,
			.map_offset = e->offset,
		};
		if (e->prot & MAP_PROT_EXEC)
			add_text(&os->v[os->n - 1], e);
	}
	*out = os;
	return 0;
}

void objects_free(struct objects *os)
{
	size_t i;

	if (!os)
		return;
	for (i = 0; i < os->n; i++)
		elfobj_close(os->v[i].elf);
	free(os->v);
	free(os);
}

static bool stat_matches(const struct stat *st, const struct object *obj)
{
	return S_ISREG(st->st_mode) && st->st_ino == obj->inode &&
	       major(st->st_dev) == obj->dev_major &&
	       minor(st->st_dev) == obj->dev_minor;
}

/*
 * The mapped file itself, through /proc/PID/map_files/START-END: the
 * magic link is followed to an O_PATH descriptor (no driver's open
 * runs), which must be a regular file with the maps' device and inode
 * before it is opened (open_regular()).
 */
static int open_map_file(const struct objects *os, const struct object *obj)
{
	char rel[96];
	struct stat st;
	int fd;

	snprintf(rel, sizeof(rel), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
		 (int)os->src.pid, obj->map_start, obj->map_end);
	fd = open_regular(rel, &st);
	if (fd >= 0 && !stat_matches(&st, obj)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/*
 * The maps' path beneath the process's root (live) or the caller's
 * (a dump): no symlink is followed, since the kernel wrote the path
 * with every link resolved, and only a regular file is opened.
 */
static int open_from_root(const struct objects *os, const struct object *obj,
			  struct stat *st)
{
	char rootpath[96];
	int dirfd, fd;

	if (os->src.pid <= 0 && os->src.opener)
		return os->src.opener->open(os->src.opener, obj->path,
					    FSIO_NO_SYMLINKS, st);
	if (os->src.pid <= 0)
		return os->src.root_fd < 0
			       ? -ENOENT
			       : open_regular_in_root(os->src.root_fd,
						      obj->path,
						      FSIO_NO_SYMLINKS, st);
	if (proc_path(os->src.pid, "root", rootpath, sizeof(rootpath)))
		return -ENAMETOOLONG;
	dirfd = open(rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	fd = open_regular_in_root(dirfd, obj->path, FSIO_NO_SYMLINKS, st);
	close(dirfd);
	return fd;
}

/* Does the build-id in the target's memory equal the file's? */
static bool build_id_in_memory(const struct objects *os,
			       const struct object *obj)
{
	const unsigned char *id;
	unsigned char mem[64];
	uint64_t vaddr;
	size_t len;

	if (elfobj_build_id(obj->elf, &id, &len) ||
	    elfobj_build_id_vaddr(obj->elf, &vaddr) || len > sizeof(mem))
		return false;
	if (proc_read_mem(os->src.pid, obj->bias + vaddr, mem, len))
		return false;
	return !memcmp(mem, id, len);
}

int object_open(struct objects *os, struct object *obj)
{
	struct stat st;
	bool check_build_id = false;
	int fd = -ENOENT, rc;

	if (obj->tried)
		return obj->err;
	obj->tried = true;

	if (os->src.pid > 0) {
		fd = open_map_file(os, obj);
		obj->via = "map_files";
	}
	if (fd < 0) {
		int first = fd;

		fd = open_from_root(os, obj, &st);
		obj->via = os->src.pid > 0 ? "root" : "path";
		/* On disk is not necessarily what is mapped: the file may
		 * have been replaced, or a union mount shows other numbers. */
		if (fd >= 0 && os->src.pid > 0 && !stat_matches(&st, obj))
			check_build_id = true;
		if (fd < 0 && first != -ENOENT && fd == -ENOENT)
			fd = first;
	}
	if (fd < 0) {
		obj->err = fd;
		return fd;
	}
	rc = elfobj_open(fd, obj->path, &obj->elf);
	if (!rc)
		rc = elfobj_bias(obj->elf, obj->map_start, obj->map_offset,
				 os->page_size, &obj->bias);
	/* no segment where the maps put it: another file than the one
	 * mapped (-ENOENT is for a missing file) */
	if (rc == -ENOENT)
		rc = -ESTALE;
	if (!rc && check_build_id && !build_id_in_memory(os, obj))
		rc = -ESTALE;
	if (rc) {
		elfobj_close(obj->elf);
		obj->elf = NULL;
		obj->err = rc;
	}
	return rc;
}

struct object *objects_find(const struct objects *os, uint64_t addr)
{
	size_t lo = 0, hi = os->n;

	/* The last object starting at or below addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (os->v[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= os->v[lo - 1].hi)
		return NULL;
	return &os->v[lo - 1];
}

struct object *objects_find_inode(const struct objects *os,
				  uint32_t dev_major, uint32_t dev_minor,
				  uint64_t inode)
{
	size_t i;

	for (i = 0; i < os->n; i++)
		if (os->v[i].inode == inode &&
		    os->v[i].dev_major == dev_major &&
		    os->v[i].dev_minor == dev_minor)
			return &os->v[i];
	return NULL;
}

int object_lookup(struct objects *os, struct object *obj, const char *name,
		  unsigned int flags, struct symbol *out)
{
	struct elfsym s;
	int rc;

	rc = object_open(os, obj);
	if (rc)
		return rc;
	rc = elfobj_lookup(obj->elf, name, flags, &s);
	if (rc)
		return rc;
	*out = (struct symbol){
		.obj = obj,
		.name = s.name,
		.addr = obj->bias + s.value,
		.size = s.size,
		.type = s.type,
		.source = s.source,
	};
	return 0;
}

int object_span(struct objects *os, struct object *obj, uint64_t addr,
		bool (*member)(const char *name, void *arg), void *arg,
		uint64_t max, uint64_t *lo, uint64_t *hi)
{
	int rc = object_open(os, obj);

	if (!rc)
		rc = elfobj_span(obj->elf, addr - obj->bias, member, arg, max,
				 lo, hi);
	if (rc)
		return rc;
	*lo += obj->bias;
	*hi += obj->bias;
	return 0;
}

struct got_walk {
	const struct object *obj;
	int (*fn)(void *arg, const char *name, uint64_t slot, bool plt);
	void *arg;
};

static int got_cb(void *arg, const char *name, uint64_t vaddr, bool plt)
{
	struct got_walk *w = arg;
	uint64_t slot = w->obj->bias + vaddr;

	/* A slot outside the object's own mappings is not one of its. */
	if (slot < w->obj->lo || slot > w->obj->hi - 8 || (slot & 7))
		return 0;
	return w->fn(w->arg, name, slot, plt);
}

int object_each_got_slot(struct objects *os, struct object *obj,
			 int (*fn)(void *arg, const char *name, uint64_t slot,
				   bool plt),
			 void *arg)
{
	struct got_walk w = { .obj = obj, .fn = fn, .arg = arg };
	int rc = object_open(os, obj);

	return rc ? rc : elfobj_each_got_slot(obj->elf, got_cb, &w);
}

int object_relro(struct objects *os, struct object *obj, uint64_t *lo,
		 uint64_t *hi)
{
	uint64_t vaddr, size;
	int rc = object_open(os, obj);

	if (!rc)
		rc = elfobj_relro(obj->elf, &vaddr, &size);
	if (rc)
		return rc;
	/* The loader protects whole pages: from the page of the start to
	 * the page boundary below the end (glibc's _dl_protect_relro). */
	*lo = (obj->bias + vaddr) & ~(os->page_size - 1);
	*hi = (obj->bias + vaddr + size) & ~(os->page_size - 1);
	return *lo < *hi ? 0 : -ENOENT;
}

int objects_symbolize(struct objects *os, uint64_t addr, struct symbol *out)
{
	struct object *obj = objects_find(os, addr);
	struct elfsym s;

	if (!obj)
		return -ENOENT;
	*out = (struct symbol){ .obj = obj };
	if (object_open(os, obj)) {
		/* Unreadable file: still name the object, by file offset. */
		out->offset = addr - obj->map_start + obj->map_offset;
		return 0;
	}
	if (elfobj_addr_lookup(obj->elf, addr - obj->bias, &s)) {
		out->offset = addr - obj->bias;
		return 0;
	}
	out->name = s.name;
	out->addr = obj->bias + s.value;
	out->size = s.size;
	out->offset = addr - out->addr;
	out->type = s.type;
	out->source = s.source;
	return 0;
}

int objects_auxv(struct objects *os, const struct proc_auxv **out)
{
	if (!os->auxv_read) {
		os->auxv_rc = os->src.pid > 0
				      ? proc_auxv_read(os->src.pid, &os->auxv)
				      : -ENOENT;
		os->auxv_read = true;
	}
	*out = &os->auxv;
	return os->auxv_rc;
}
