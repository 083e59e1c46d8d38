/*
 * The files memsnap opens for report's child (profile/box.h), on its
 * requests (profile/box_wire.h), by memsnap's own rules:
 *
 *   OPEN        a path beneath --root, as the report in memsnap's
 *               process opened it (opener_local_new():
 *               open_regular_in_root(), a regular file only);
 *   DEBUGINFOD  a build-id, with --debuginfod only;
 *   STEADY      a copy libdw may map (fd_steady()), only of a file
 *               memsnap handed over, made once per file: the dump's and
 *               the base's objects, or a child asking again, share it.
 *
 * What is handed over must start as an ELF file: every file a report
 * reads is one, so a child taken over cannot read /etc/shadow beneath a
 * root of "/" (four bytes read, all memsnap parses of it).  Each request
 * has a budget; a request past it, or not of its form, is out of turn.
 */
#include "profile/box_internal.h"

#include "profile/box_wire.h"
#include "common/fsio.h"
#include "common/hidx.h"
#include "common/util.h"
#include "symbols/opener.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What one child may ask for, at most. */
#define OPENS_MAX (1u << 20)
#define STEADY_MAX_CALLS 65536u
#define DEBUGINFOD_MAX 4096u
/* The largest copy memsnap makes for libdw (the symbolizer's own). */
#define STEADY_CAP (2ull << 30)

/* A file handed over, and the copy made of it for libdw, if one was. */
struct served {
	dev_t dev;
	ino_t ino;
	int copy;	/* fd_steady()'s memfd, or -1 */
};

struct report_files {
	struct opener *local;	/* memsnap's own rules */
	bool debuginfod;
	uint32_t opens, steadies, asks;
	struct served *v;	/* every file handed over, once */
	size_t n, cap;
	struct hidx idx;
};

int report_files_new(const char *root, bool debuginfod,
		     struct report_files **out)
{
	struct report_files *f = calloc(1, sizeof(*f));

	if (!f || opener_local_new(root, &f->local)) {
		free(f);
		return -ENOMEM;
	}
	f->debuginfod = debuginfod;
	*out = f;
	return 0;
}

void report_files_free(struct report_files *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->n; i++)
		if (f->v[i].copy >= 0)
			close(f->v[i].copy);
	free(f->v);
	hidx_free(&f->idx);
	opener_local_free(f->local);
	free(f);
}

/* Does @fd start as an ELF file does? */
static bool is_elf(int fd)
{
	unsigned char magic[SELFMAG];

	return pread_in_full(fd, magic, SELFMAG, 0) == SELFMAG &&
	       !memcmp(magic, ELFMAG, SELFMAG);
}

static uint64_t file_hash(dev_t dev, ino_t ino)
{
	uint64_t x = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;

	x ^= x >> 31;
	return x * 0xbf58476d1ce4e5b9ull;
}

static uint64_t hash_of(const void *ctx, size_t i)
{
	const struct report_files *f = ctx;

	return file_hash(f->v[i].dev, f->v[i].ino);
}

/* The slot of @st's file: its entry's, or the empty one where it goes. */
static size_t slot_of(const struct report_files *f, const struct stat *st)
{
	size_t j;

	for (j = hidx_first(&f->idx, file_hash(st->st_dev, st->st_ino));
	     f->idx.slot[j]; j = hidx_next(&f->idx, j)) {
		const struct served *s = &f->v[f->idx.slot[j] - 1];

		if (s->dev == st->st_dev && s->ino == st->st_ino)
			break;
	}
	return j;
}

/* The entry of @st's file, if it was handed over; else NULL. */
static struct served *served(struct report_files *f, const struct stat *st)
{
	size_t j;

	if (!f->idx.cap)
		return NULL;
	j = slot_of(f, st);
	return f->idx.slot[j] ? &f->v[f->idx.slot[j] - 1] : NULL;
}

/* @fd handed over if it is ELF, its file remembered: the answer. */
static int32_t hand_over(struct report_files *f, int fd, int *out)
{
	struct stat st;
	size_t j;

	if (fd < 0)
		return fd;
	if (!is_elf(fd) || fstat(fd, &st)) {
		close(fd);
		return -ENOEXEC;
	}
	if (array_grow((void **)&f->v, &f->cap, f->n + 1, sizeof(*f->v)) ||
	    hidx_need(&f->idx, f->n + 1, 256, hash_of, f)) {
		close(fd);
		return -ENOMEM;
	}
	j = slot_of(f, &st);
	if (!f->idx.slot[j]) {
		f->v[f->n] = (struct served){ st.st_dev, st.st_ino, -1 };
		f->idx.slot[j] = (uint32_t)++f->n;
	}
	*out = fd;
	return 0;
}

/* A descriptor of @copy for the child: the answer. */
static int32_t dup_of(int copy, int *out)
{
	*out = fcntl(copy, F_DUPFD_CLOEXEC, 0);
	return *out < 0 ? -errno : 0;
}

static bool open_path(struct report_files *f, int32_t how, const char *path,
		      size_t len, int32_t *val, int *fd)
{
	char p[PATH_MAX];
	struct stat st;

	if ((how != 0 && how != FSIO_NO_SYMLINKS) || !len ||
	    len >= sizeof(p) || memchr(path, '\0', len) ||
	    ++f->opens > OPENS_MAX)
		return false;
	memcpy(p, path, len);
	p[len] = '\0';
	*val = hand_over(f, f->local->open(f->local, p, (unsigned int)how,
					   &st), fd);
	return true;
}

static bool steady(struct report_files *f, const void *bytes, size_t len,
		   int given, int32_t *val, int *fd)
{
	struct served *s;
	struct stat st;
	uint64_t max;
	int copy;

	if (given < 0 || len != sizeof(max) ||
	    ++f->steadies > STEADY_MAX_CALLS)
		return false;
	/* only a file memsnap handed over comes back */
	if (fstat(given, &st) || !S_ISREG(st.st_mode))
		return false;
	s = served(f, &st);
	if (!s)
		return false;
	if (s->copy >= 0) {
		close(given);
		*val = dup_of(s->copy, fd);
		return true;
	}
	memcpy(&max, bytes, sizeof(max));
	copy = f->local->steady(f->local, given,
				max < STEADY_CAP ? max : STEADY_CAP);
	if (copy == given) {
		close(copy);	/* root's own: the child keeps its own */
		*val = RW_SAME;
	} else if (copy < 0) {
		*val = copy;
	} else {
		s->copy = copy;
		*val = dup_of(copy, fd);
	}
	return true;
}

static bool debuginfod(struct report_files *f, const void *id, size_t len,
		       int32_t *val, int *fd)
{
	if (!len || len > OPENER_ID_MAX || ++f->asks > DEBUGINFOD_MAX)
		return false;
	*val = f->debuginfod ? hand_over(f, f->local->debuginfod(f->local, id,
								 len), fd)
			     : -ENOENT;
	return true;
}

bool report_files_answer(struct report_files *f, uint32_t type, int32_t arg,
			 const void *bytes, size_t len, int given,
			 int32_t *val, int *fd)
{
	bool ok = false;

	*fd = -1;
	*val = -EPROTO;
	if (type == RW_STEADY)
		ok = steady(f, bytes, len, given, val, fd);
	else if (given < 0 && type == RW_OPEN)
		ok = open_path(f, arg, bytes, len, val, fd);
	else if (given < 0 && type == RW_DEBUGINFOD)
		ok = debuginfod(f, bytes, len, val, fd);
	if (!ok && given >= 0)
		close(given);
	return ok;
}
