/*
 * The .eh_frame of an object without PT_GNU_EH_FRAME, found in its
 * file's section headers (injector/unwind/ehfile.h):
 *
 *   $ readelf -lSW sampler-target-static     (gcc -static, x86-64)
 *     LOAD  0x000000 0x400000 ... R      <- file offset 0: the base
 *     LOAD  0x08e000 0x48e000 ... R
 *     [11] .eh_frame  PROGBITS  4ab2d8 0ab2d8 00d3a8  A
 *
 * The file is the mapped one itself, /proc/PID/map_files/START-END,
 * opened only if it is a regular file with the maps' device and inode
 * (open_regular(): no path the target names is opened).  It is the
 * target's, and read with bounds: the headers' counts and sizes
 * capped, the section inside a PT_LOAD.  What the section holds is
 * read by the unwinder in its sandbox, from memory.
 */
#include "injector/unwind/ehfile.h"

#include "common/fsio.h"
#include "proc/procfs.h"

#include <elf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PHDRS_MAX 64
#define SHDRS_MAX 1024
#define SHSTRTAB_MAX (64u << 10)

#ifndef SHT_X86_64_UNWIND
#define SHT_X86_64_UNWIND 0x70000001
#endif

/* The ELF and program headers at @at, through @fd (>= 0: the file) or
 * @pid's memory (@max bytes there at most).  0, or -1. */
static int headers(int fd, pid_t pid, uint64_t at, uint64_t max,
		   Elf64_Ehdr *e, Elf64_Phdr *ph)
{
	size_t len;

	if (fd >= 0 ? pread_in_full(fd, e, sizeof(*e), 0) != sizeof(*e)
		    : proc_read_mem(pid, at, e, sizeof(*e)))
		return -1;
	if (memcmp(e->e_ident, ELFMAG, SELFMAG) ||
	    e->e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->e_phentsize != sizeof(Elf64_Phdr) || !e->e_phnum ||
	    e->e_phnum > PHDRS_MAX || e->e_phoff > max)
		return -1;
	len = e->e_phnum * sizeof(Elf64_Phdr);
	if (len > max - e->e_phoff)
		return -1;
	if (fd >= 0)
		return pread_in_full(fd, ph, len, (off_t)e->e_phoff) ==
			       (ssize_t)len ? 0 : -1;
	return proc_read_mem(pid, at + e->e_phoff, ph, len) ? -1 : 0;
}

/* Is [@addr, @addr + @len) inside a PT_LOAD's bytes from the file? */
static bool loaded(const Elf64_Phdr *ph, unsigned int n, uint64_t addr,
		   uint64_t len)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr &&
		    ph[i].p_filesz <= ph[i].p_memsz &&
		    addr - ph[i].p_vaddr <= ph[i].p_filesz &&
		    len <= ph[i].p_filesz - (addr - ph[i].p_vaddr))
			return true;
	return false;
}

/* The link-time address and length of the file @fd's .eh_frame, from
 * its section headers.  0, or -1. */
static int section(int fd, const Elf64_Ehdr *e, uint64_t *addr,
		   uint64_t *len)
{
	static const char name[] = ".eh_frame";
	Elf64_Shdr *sh = NULL, *str;
	char *names = NULL;
	unsigned int i;
	int rc = -1;

	if (e->e_shentsize != sizeof(Elf64_Shdr) || !e->e_shnum ||
	    e->e_shnum > SHDRS_MAX || e->e_shstrndx >= e->e_shnum)
		return -1;
	sh = calloc(e->e_shnum, sizeof(*sh));
	if (!sh || e->e_shoff > INT64_MAX ||
	    pread_in_full(fd, sh, e->e_shnum * sizeof(*sh),
			  (off_t)e->e_shoff) !=
		    (ssize_t)(e->e_shnum * sizeof(*sh)))
		goto out;
	str = &sh[e->e_shstrndx];
	if (str->sh_type != SHT_STRTAB || !str->sh_size ||
	    str->sh_size > SHSTRTAB_MAX || str->sh_offset > INT64_MAX)
		goto out;
	names = malloc(str->sh_size + 1);
	if (!names || pread_in_full(fd, names, str->sh_size,
				    (off_t)str->sh_offset) !=
			      (ssize_t)str->sh_size)
		goto out;
	names[str->sh_size] = '\0';
	for (i = 0; i < e->e_shnum; i++) {
		const Elf64_Shdr *s = &sh[i];

		if (s->sh_name >= str->sh_size ||
		    strcmp(names + s->sh_name, name) ||
		    !(s->sh_flags & SHF_ALLOC) ||
		    (s->sh_type != SHT_PROGBITS &&
		     !(s->sh_type == SHT_X86_64_UNWIND &&
		       e->e_machine == EM_X86_64)))
			continue;
		*addr = s->sh_addr;
		*len = s->sh_size;
		rc = 0;
		break;
	}
out:
	free(names);
	free(sh);
	return rc;
}

int unwind_ehfile_section(int fd, uint64_t size, uint64_t *vaddr0,
			  uint64_t *addr, uint64_t *len)
{
	Elf64_Phdr ph[PHDRS_MAX];
	Elf64_Ehdr e;
	int i;

	if (headers(fd, 0, 0, size, &e, ph) || section(fd, &e, addr, len))
		return -1;
	for (i = 0; i < e.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0)
			break;
	if (i == e.e_phnum || *len < 8 || *len > UNWIND_EHFRAME_MAX ||
	    !loaded(ph, e.e_phnum, *addr, *len))
		return -1;
	*vaddr0 = ph[i].p_vaddr;
	return 0;
}

/* The .eh_frame of the object mapped first at @m0, if it has no
 * PT_GNU_EH_FRAME.  0, or -1. */
static int object_ehframe(pid_t pid, const struct mapline *m0,
			  struct unwind_ehframe *out)
{
	Elf64_Phdr ph[PHDRS_MAX];
	Elf64_Ehdr e;
	char path[96];
	struct stat st;
	uint64_t vaddr0, addr, len, base;
	int fd, i, rc = -1;

	/* as loaded: the unwinder uses PT_GNU_EH_FRAME where there is one,
	 * and most objects have it (no file opened for them) */
	if (headers(-1, pid, m0->start, m0->end - m0->start, &e, ph))
		return -1;
	for (i = 0; i < e.e_phnum; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			return -1;
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
		 (int)pid, m0->start, m0->end);
	fd = open_regular(path, &st);
	if (fd < 0)
		return -1;
	if (st.st_ino != m0->inode || major(st.st_dev) != m0->dev_major ||
	    minor(st.st_dev) != m0->dev_minor ||
	    unwind_ehfile_section(fd, (uint64_t)st.st_size, &vaddr0, &addr,
				  &len))
		goto out;
	/* where file offset 0 went */
	base = m0->start - vaddr0;
	if (base + addr + len < base + addr)
		goto out;
	*out = (struct unwind_ehframe){ .object = m0->start,
					.addr = base + addr, .len = len };
	rc = 0;
out:
	close(fd);
	return rc;
}

size_t unwind_ehframes_find(pid_t pid, const struct mapline *v, size_t n,
			    struct unwind_ehframe *out)
{
	size_t i, k = 0;
	uint64_t last = 0;

	for (i = 0; i < n && k < UNWIND_EHFRAMES; i++) {
		const struct mapline *m = &v[i], *m0 = m;

		if (m->perms[2] != 'x' || !m->inode)
			continue;
		/* the object's first mapping (file offset 0): the same
		 * file just below, offsets going down */
		while (m0->offset && m0 > v && m0[-1].inode == m0->inode &&
		       m0[-1].dev_major == m0->dev_major &&
		       m0[-1].dev_minor == m0->dev_minor &&
		       m0[-1].offset < m0->offset)
			m0--;
		if (m0->offset || m0->start == last)
			continue;
		last = m0->start;
		if (!object_ehframe(pid, m0, &out[k]))
			k++;
	}
	return k;
}
