/*
 * Separate debuginfo for the symbolizer's modules (symbols/
 * symbolizer_internal.h), found by memsnap itself, never by libdwfl or
 * libdw.
 *
 * libdwfl's own finder (dwfl_standard_find_debuginfo) builds paths from
 * bytes of the object (its build-id, its .gnu_debuglink name, which may
 * hold "../") and open()s them: following every symlink, absolute ones
 * against memsnap's own root, and FIFOs and devices included (a FIFO
 * there blocks for ever).  With `report --root /proc/PID/root` the
 * target makes those paths.  libdw, for its part, opens the
 * .gnu_debugaltlink path (absolute, any file of the machine) when a
 * DWARF form first points into that supplementary file.
 *
 * Here every candidate is a path beneath the root, opened through the
 * symbolizer's opener (symbols/opener.h: open_regular_in_root(), inside
 * the root, nothing but a regular file; in report's sandbox memsnap does
 * that on the parser's request), and checked before libdwfl sees it:
 * the build-id when the object has one, else the .gnu_debuglink CRC, as
 * libdwfl does.  The same candidates as libdwfl's with the path
 * ":.debug:ROOT/usr/lib/debug":
 *
 *   ROOT/usr/lib/debug/.build-id/xx/yyyy.debug        by build-id
 *   DIR/LINK, DIR/.debug/LINK                         beside the object
 *   ROOT/usr/lib/debug/DIR/LINK, then DIR shortened one leading
 *   directory at a time, down to ROOT/usr/lib/debug/LINK
 *
 * where DIR is the object's directory and LINK the .gnu_debuglink name,
 * a file name (one with a '/' is not looked for), or "BASE.debug" and
 * BASE when there is none.  Then debuginfod, by build-id, when the
 * environment asks for it (`report --debuginfod`), through the opener
 * too: its cache is the caller's and its names are made of the
 * build-id's hex.
 *
 * The supplementary (dwz) file is found the same way, by its build-id,
 * by the .gnu_debugaltlink path beneath the root (relative to the
 * debug file's directory), and as ROOT/usr/lib/debug/.dwz/ALTBASE, and
 * handed to libdw with dwarf_setalt() before any DIE is read.  A DWARF
 * whose supplementary file is not found is not read at all: reading it
 * would make libdw look for the file by itself.  (libdw's other
 * lookups, of split DWARF .dwo files, are only made for
 * dwarf_get_units() and dwarf_cu_info() asked for a unit's sub-DIE,
 * which memsnap never asks.)
 */
#include "symbols/symbolizer_internal.h"

#include "common/fsio.h"
#include "symbols/elf.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define DEBUG_DIR "/usr/lib/debug"
#define BUILD_ID_MIN 3	/* libdwfl's bounds for a build-id path */
#define BUILD_ID_MAX 64
/* A .gnu_debuglink CRC reads the whole file: not past this. */
#define CRC_MAX_BYTES (4ull << 30)

/* What a candidate must be: the build-id's, else the CRC's (if any). */
struct want {
	const unsigned char *id;
	size_t id_len;
	bool crc_check;
	GElf_Word crc;
	const struct stat *not;	/* not this file (the object itself) */
	char found[PATH_MAX];	/* where it was, beneath the root ("":
				 * debuginfod's cache) */
};

static bool crc_matches(int fd, const struct stat *st, GElf_Word want)
{
	unsigned char buf[65536];
	uLong crc = crc32(0, Z_NULL, 0);
	off_t off = 0;

	if ((unsigned long long)st->st_size > CRC_MAX_BYTES)
		return false;
	for (;;) {
		ssize_t n = pread_in_full(fd, buf, sizeof(buf), off);

		if (n < 0)
			return false;
		if (!n)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
		/* a file that grows while it is read */
		if ((unsigned long long)off > CRC_MAX_BYTES)
			return false;
	}
	return (GElf_Word)crc == want;
}

static bool id_matches(int fd, const struct want *w)
{
	const unsigned char *id;
	struct elfobj *o;
	size_t len;
	bool ok;
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (dup < 0 || elfobj_open(dup, "debuginfo", &o))
		return false;	/* elfobj_open() closed @dup */
	ok = !elfobj_build_id(o, &id, &len) && len == w->id_len &&
	     !memcmp(id, w->id, len);
	elfobj_close(o);
	return ok;
}

/* @path beneath the root, if it is what @w wants; an fd or -errno. */
static int try_file(const struct symbolizer *s, const char *path,
		    struct want *w)
{
	struct stat st;
	int fd = s->op->open(s->op, path, 0, &st);
	bool ok;

	if (fd < 0)
		return fd;
	if (w->not && st.st_dev == w->not->st_dev &&
	    st.st_ino == w->not->st_ino)
		ok = false;	/* the object itself by another name */
	else if (w->id_len)
		ok = id_matches(fd, w);
	else
		ok = !w->crc_check || crc_matches(fd, &st, w->crc);
	if (!ok) {
		close(fd);
		return -ESTALE;
	}
	snprintf(w->found, sizeof(w->found), "%s", path);
	return fd;
}

/* DEBUG_DIR/.build-id/xx/yyyy.debug */
static int try_build_id(const struct symbolizer *s, struct want *w)
{
	char path[sizeof(DEBUG_DIR "/.build-id/xx/.debug") + 2 * BUILD_ID_MAX];
	int n;
	size_t i;

	if (w->id_len < BUILD_ID_MIN || w->id_len > BUILD_ID_MAX)
		return -ENOENT;
	n = snprintf(path, sizeof(path), DEBUG_DIR "/.build-id/%02x/",
		     w->id[0]);
	for (i = 1; i < w->id_len; i++)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x",
			      w->id[i]);
	snprintf(path + n, sizeof(path) - (size_t)n, ".debug");
	return try_file(s, path, w);
}

/* debuginfod by build-id, when `report --debuginfod` asked for it. */
static int try_debuginfod(struct symbolizer *s, struct want *w)
{
	int fd;

	if (!w->id_len)
		return -ENOENT;
	fd = s->op->debuginfod(s->op, w->id, w->id_len);
	if (fd < 0)
		return fd;
	if (!id_matches(fd, w)) {
		close(fd);
		return -ESTALE;
	}
	w->found[0] = '\0';
	return fd;
}

/* Is @link a file name, as a .gnu_debuglink must be? */
static bool file_name_only(const char *link)
{
	return *link && !strchr(link, '/') && strcmp(link, ".") &&
	       strcmp(link, "..");
}

/* @dir/@sub/@file beneath the root (@sub may be NULL). */
static int try_in(const struct symbolizer *s, const char *dir,
		  const char *sub, const char *file, struct want *w)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s%s%s", dir, sub ? sub : "",
			 sub ? "/" : "", file);

	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	return try_file(s, path, w);
}

/* The .gnu_debuglink candidates, in libdwfl's order. */
static int try_links(const struct symbolizer *s, const char *obj_path,
		     const char *link, struct want *w)
{
	const char *slash = strrchr(obj_path, '/');
	const char *base = slash ? slash + 1 : obj_path;
	char dir[PATH_MAX], made[NAME_MAX + 1];
	const char *sub;
	bool made_up = !link;
	int fd;

	if (!slash || (size_t)(slash - obj_path) >= sizeof(dir))
		return -ENOENT;
	memcpy(dir, obj_path, (size_t)(slash - obj_path));
	dir[slash - obj_path] = '\0';
	if (made_up) {
		if ((size_t)snprintf(made, sizeof(made), "%s.debug", base) >=
		    sizeof(made))
			return -ENOENT;
		link = made;
	}
	if (!file_name_only(link) || !file_name_only(base))
		return -ENOENT;
	fd = try_in(s, dir, NULL, link, w);
	if (fd < 0)
		fd = try_in(s, dir, ".debug", link, w);
	if (fd < 0 && made_up)
		fd = try_in(s, dir, ".debug", base, w);
	/* "/usr/lib/x": DEBUG_DIR/usr/lib/x, then lib/x, then x */
	for (sub = dir[0] == '/' ? dir : NULL; fd < 0 && sub;
	     sub = strchr(sub + 1, '/')) {
		fd = try_in(s, DEBUG_DIR, sub + 1, link, w);
		if (fd < 0 && made_up)
			fd = try_in(s, DEBUG_DIR, sub + 1, base, w);
	}
	if (fd < 0)
		fd = try_in(s, DEBUG_DIR, NULL, link, w);
	if (fd < 0 && made_up)
		fd = try_in(s, DEBUG_DIR, NULL, base, w);
	return fd;
}

int sym_find_debuginfo(Dwfl_Module *mod, void **userdata,
		       const char *modname, Dwarf_Addr base,
		       const char *file_name, const char *debuglink_file,
		       GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct module *m = userdata ? *userdata : NULL;
	struct want w = { .crc = debuglink_crc };
	struct symbolizer *s;
	struct stat self;
	GElf_Addr vaddr;
	int n, fd;

	(void)modname;
	(void)base;
	(void)file_name;
	if (!m || m->mod != mod)
		return -1;
	s = m->s;
	/*
	 * libdwfl asks again for the supplementary file, naming it in
	 * @debuglink_file: that one is found by sym_dwarf_usable(), before
	 * any DIE is read.
	 */
	if (debuglink_file &&
	    (!m->link || strcmp(debuglink_file, m->link) ||
	     debuglink_crc != m->link_crc))
		return -1;
	if (m->debug_missing)
		return -1;
	n = dwfl_module_build_id(mod, &w.id, &vaddr);
	w.id_len = n > 0 ? (size_t)n : 0;
	w.crc_check = debuglink_file && debuglink_crc;
	if (!fstat(elfobj_fd(m->obj->elf), &self))
		w.not = &self;
	fd = try_build_id(s, &w);
	if (fd < 0)
		fd = try_links(s, m->obj->path, debuglink_file, &w);
	if (fd < 0)
		fd = try_debuginfod(s, &w);
	if (fd < 0) {
		/* libdwfl asks once for the symbol table, once for DWARF */
		m->debug_missing = true;
		errno = 0;
		return -1;
	}
	/* libdwfl maps it: a file its owner can cut would be SIGBUS */
	fd = s->op->steady(s->op, fd, STEADY_MAX);
	if (fd < 0) {
		m->debug_missing = true;
		errno = -fd;
		return -1;
	}
	free(m->debug_path);
	m->debug_path = w.found[0] ? strdup(w.found) : NULL;
	/* for messages only: libdwfl reads the descriptor */
	if (w.found[0] && !*debuginfo_file_name &&
	    asprintf(debuginfo_file_name, "%s%s", s->root ? s->root : "",
		     w.found) < 0)
		*debuginfo_file_name = NULL;
	return fd;
}

int sym_find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		 Dwarf_Addr base, char **file_name, Elf **elfp)
{
	(void)mod;
	(void)userdata;
	(void)modname;
	(void)base;
	/* every module comes with its descriptor (dwfl_report_elf()); a
	 * name left here would be open()ed by libdwfl */
	free(*file_name);
	*file_name = NULL;
	*elfp = NULL;
	return -1;
}

/* The supplementary file of @dw (named @alt, build-id @id) as libdw's
 * alternate Dwarf; 0 or -errno. */
static int find_alt(struct symbolizer *s, struct module *m, const char *alt,
		    const unsigned char *id, size_t id_len)
{
	struct want w = { .id = id, .id_len = id_len };
	const char *from = m->debug_path ? m->debug_path : m->obj->path;
	const char *slash = strrchr(alt, '/');
	const char *nested;
	const void *nested_id;
	char path[PATH_MAX];
	int fd;

	fd = try_build_id(s, &w);
	if (fd < 0 && alt[0] == '/')
		fd = try_file(s, alt, &w);
	if (fd < 0 && alt[0] != '/' && strrchr(from, '/') &&
	    (size_t)snprintf(path, sizeof(path), "%.*s/%s",
			     (int)(strrchr(from, '/') - from), from, alt) <
		    sizeof(path))
		fd = try_file(s, path, &w);
	if (fd < 0)
		fd = try_in(s, DEBUG_DIR, ".dwz", slash ? slash + 1 : alt, &w);
	if (fd < 0)
		fd = try_debuginfod(s, &w);
	if (fd < 0)
		return fd;
	m->alt_fd = fd;
	/* read, not mapped: a file truncated under us is an error, not
	 * SIGBUS */
	m->alt_elf = elf_begin(fd, ELF_C_READ, NULL);
	m->alt = m->alt_elf ? dwarf_begin_elf(m->alt_elf, DWARF_C_READ, NULL)
			    : NULL;
	/* a supplementary file of its own would be libdw's to find */
	if (!m->alt ||
	    dwelf_dwarf_gnu_debugaltlink(m->alt, &nested, &nested_id) > 0)
		return -ENOEXEC;
	return 0;
}

bool sym_dwarf_usable(struct symbolizer *s, struct module *m)
{
	const char *alt;
	const void *id;
	Dwarf_Addr bias;
	Dwarf *dw;
	ssize_t n;

	if (m->dwarf_checked)
		return m->dwarf_ok;
	m->dwarf_checked = true;
	dw = dwfl_module_getdwarf(m->mod, &bias);
	if (!dw)
		return false;
	n = dwelf_dwarf_gnu_debugaltlink(dw, &alt, &id);
	if (n > 0) {
		if (find_alt(s, m, alt, id, (size_t)n))
			return false;
		dwarf_setalt(dw, m->alt);
	}
	m->dwarf_ok = true;
	return true;
}

void sym_module_free(struct module *m)
{
	if (m->alt)
		dwarf_end(m->alt);
	if (m->alt_elf)
		elf_end(m->alt_elf);
	if (m->alt_fd >= 0)
		close(m->alt_fd);
	free(m->debug_path);
	free(m->syms);
}
