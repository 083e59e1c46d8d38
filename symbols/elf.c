#include "symbols/elf.h"

#include "common/util.h"
#include "symbols/elf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A MiniDebugInfo section is a few MiB unpacked; refuse zip bombs. */
#define DEBUGDATA_MAX_OUT (128u << 20)
#define DEBUGDATA_MAX_MEMLIMIT (64u << 20)

static bool libelf_ready(void)
{
	static int state; /* 0 unknown, 1 ok, -1 failed */

	if (!state)
		state = elf_version(EV_CURRENT) == EV_NONE ? -1 : 1;
	return state > 0;
}

static void read_build_id_from(struct elfobj *o, Elf_Data *d, uint64_t vaddr,
			       bool has_vaddr)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while (d && off < d->d_size &&
	       (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((char *)d->d_buf + name_off, "GNU", 4))
			continue;
		if (nh.n_descsz == 0 || nh.n_descsz > BUILD_ID_MAX)
			continue;
		memcpy(o->build_id, (char *)d->d_buf + desc_off, nh.n_descsz);
		o->build_id_len = nh.n_descsz;
		o->build_id_vaddr = vaddr + desc_off;
		o->build_id_has_vaddr = has_vaddr;
		return;
	}
}

static void find_build_id(struct elfobj *o)
{
	Elf_Scn *scn = NULL;
	size_t i;

	for (i = 0; i < o->nphdrs && !o->build_id_len; i++) {
		const GElf_Phdr *ph = &o->phdrs[i];
		Elf_Data *d;

		if (ph->p_type != PT_NOTE)
			continue;
		/* libelf checks the chunk lies inside the file. */
		d = elf_getdata_rawchunk(o->elf, (int64_t)ph->p_offset,
					 ph->p_filesz, ELF_T_NHDR);
		read_build_id_from(o, d, ph->p_vaddr, true);
	}
	while (!o->build_id_len && (scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		read_build_id_from(o, elf_getdata(scn, NULL), sh.sh_addr,
				   (sh.sh_flags & SHF_ALLOC) != 0);
	}
}

static void find_sections(struct elfobj *o)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool have_names = elf_getshdrstrndx(o->elf, &shstrndx) == 0;

	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		switch (sh.sh_type) {
		case SHT_DYNSYM:
			if (!o->scn_dynsym)
				o->scn_dynsym = scn;
			break;
		case SHT_SYMTAB:
			if (!o->scn_symtab)
				o->scn_symtab = scn;
			break;
		case SHT_GNU_HASH:
			if (!o->scn_gnuhash)
				o->scn_gnuhash = scn;
			break;
		case SHT_HASH:
			if (!o->scn_hash)
				o->scn_hash = scn;
			break;
		case SHT_GNU_versym:
			if (!o->scn_versym)
				o->scn_versym = scn;
			break;
		case SHT_PROGBITS:
			if (!have_names)
				break;
			name = elf_strptr(o->elf, shstrndx, sh.sh_name);
			if (name && !strcmp(name, ".gnu_debugdata"))
				o->scn_debugdata = scn;
			break;
		}
	}
}

int elfobj_open(int fd, const char *name, struct elfobj **out)
{
	struct elfobj *o;
	size_t i;

	if (!libelf_ready()) {
		close(fd);
		return -ENOSYS;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		close(fd);
		return -ENOMEM;
	}
	o->fd = fd;
	o->name = strdup(name ? name : "?");
	if (!o->name)
		goto fail_nomem;
	o->elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!o->elf || elf_kind(o->elf) != ELF_K_ELF ||
	    !gelf_getehdr(o->elf, &o->ehdr))
		goto fail_noexec;
	if (elf_getphdrnum(o->elf, &o->nphdrs))
		o->nphdrs = 0;
	if (o->nphdrs > 65535)
		goto fail_noexec;
	if (o->nphdrs) {
		o->phdrs = calloc(o->nphdrs, sizeof(*o->phdrs));
		if (!o->phdrs)
			goto fail_nomem;
		for (i = 0; i < o->nphdrs; i++)
			if (!gelf_getphdr(o->elf, (int)i, &o->phdrs[i]))
				goto fail_noexec;
	}
	find_sections(o);
	find_build_id(o);
	*out = o;
	return 0;

fail_noexec:
	elfobj_close(o);
	return -ENOEXEC;
fail_nomem:
	elfobj_close(o);
	return -ENOMEM;
}

int elfobj_open_path(const char *path, struct elfobj **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return elfobj_open(fd, path, out);
}

void elfobj_close(struct elfobj *o)
{
	if (!o)
		return;
	if (o->debugdata_elf)
		elf_end(o->debugdata_elf);
	free(o->debugdata);
	if (o->elf)
		elf_end(o->elf);
	if (o->fd >= 0)
		close(o->fd);
	free(o->index);
	free(o->phdrs);
	free(o->name);
	free(o);
}

int elfobj_fd(const struct elfobj *o)
{
	return o->fd;
}

unsigned int elfobj_type(const struct elfobj *o)
{
	return o->ehdr.e_type;
}

int elfobj_build_id(const struct elfobj *o, const unsigned char **id,
		    size_t *len)
{
	if (!o->build_id_len)
		return -ENOENT;
	*id = o->build_id;
	*len = o->build_id_len;
	return 0;
}

int elfobj_build_id_vaddr(const struct elfobj *o, uint64_t *vaddr)
{
	if (!o->build_id_len || !o->build_id_has_vaddr)
		return -ENOENT;
	*vaddr = o->build_id_vaddr;
	return 0;
}

int elfobj_bias(const struct elfobj *o, uint64_t map_start,
		uint64_t map_offset, uint64_t page_size, uint64_t *bias)
{
	uint64_t mask = ~(page_size - 1);
	size_t i;

	for (i = 0; i < o->nphdrs; i++) {
		const GElf_Phdr *ph = &o->phdrs[i];

		if (ph->p_type != PT_LOAD || (ph->p_offset & mask) != map_offset)
			continue;
		*bias = map_start - (ph->p_vaddr & mask);
		return 0;
	}
	return -ENOENT;
}

int elfobj_section(const struct elfobj *o, const char *name, uint64_t *vaddr,
		   uint64_t *size)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(o->elf, &shstrndx))
		return -ENOENT;
	while ((scn = elf_nextscn(o->elf, scn))) {
		const char *sname;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
			continue;
		sname = elf_strptr(o->elf, shstrndx, sh.sh_name);
		if (sname && !strcmp(sname, name)) {
			*vaddr = sh.sh_addr;
			*size = sh.sh_size;
			return 0;
		}
	}
	return -ENOENT;
}

int elfobj_dynamic(const struct elfobj *o, uint64_t *vaddr, uint64_t *size)
{
	size_t i;

	for (i = 0; i < o->nphdrs; i++) {
		if (o->phdrs[i].p_type != PT_DYNAMIC)
			continue;
		*vaddr = o->phdrs[i].p_vaddr;
		*size = o->phdrs[i].p_memsz;
		return 0;
	}
	return -ENOENT;
}

/*
 * Unpack .gnu_debugdata (an xz stream holding a small ELF file with a
 * .symtab) into memory.  Bounded in output size and decoder memory.
 */
int elf_unpack_debugdata(struct elfobj *o)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	Elf_Data *in = elf_rawdata(o->scn_debugdata, NULL);
	size_t cap = 0, len = 0;
	char *buf = NULL;
	lzma_ret ret;
	int rc = -ENOEXEC;

	if (!in || !in->d_buf || !in->d_size)
		return -ENOEXEC;
	if (lzma_stream_decoder(&strm, DEBUGDATA_MAX_MEMLIMIT, 0) != LZMA_OK)
		return -ENOMEM;
	strm.next_in = in->d_buf;
	strm.avail_in = in->d_size;
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 64 * 1024;
			char *nb;

			if (ncap > DEBUGDATA_MAX_OUT)
				goto out;
			nb = realloc(buf, ncap);
			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		strm.next_out = (uint8_t *)buf + len;
		strm.avail_out = cap - len;
		ret = lzma_code(&strm, LZMA_FINISH);
		len = cap - strm.avail_out;
		if (ret == LZMA_STREAM_END)
			break;
		if (ret != LZMA_OK)
			goto out;
	}
	o->debugdata_elf = elf_memory(buf, len);
	if (!o->debugdata_elf || elf_kind(o->debugdata_elf) != ELF_K_ELF) {
		if (o->debugdata_elf)
			elf_end(o->debugdata_elf);
		o->debugdata_elf = NULL;
		goto out;
	}
	o->debugdata = buf;
	buf = NULL;
	rc = 0;
out:
	lzma_end(&strm);
	free(buf);
	return rc;
}
