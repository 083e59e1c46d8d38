/*
 * symbols/elf on crafted, broken and hostile ELF files: whatever a target
 * has mapped is untrusted input.  Each case must give an error or "not
 * found" -- no crash, no hang, no read outside the file (run this under
 * SANITIZE=address,undefined as well).
 *
 * The base image is a small but complete ELF64 shared object made here:
 * .dynsym with .gnu.hash, .hash and .gnu.version, .symtab, a build-id
 * note, and a .gnu_debugdata (xz) holding a second such image.  A test
 * first proves the base image works (so a corruption that "fails" is
 * really a corruption), then breaks one thing at a time.
 */
#include "symbols/elf.h"

#include <criterion/criterion.h>

#include <elf.h>
#include <errno.h>
#include <lzma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
	S_NULL,
	S_TEXT,
	S_DYNSYM,
	S_DYNSTR,
	S_GNUHASH,
	S_HASH,
	S_VERSYM,
	S_SYMTAB,
	S_STRTAB,
	S_NOTE,
	S_DEBUGDATA,
	S_SHSTRTAB,
	NSEC,
};

#define IMG_MAX (256 * 1024)
#define NSYMS 6 /* with the null symbol */
#define NBUCKETS 3
#define TEXT_ADDR 0x1000

struct img {
	unsigned char *buf;
	size_t len;
	size_t off[NSEC];	/* file offset of each section's data */
	size_t shoff;
};

/* Dynamic symbols, in .dynsym order after sorting by hash bucket. */
struct dsym {
	const char *name;
	uint64_t value, size;
	unsigned char type;
};

static const struct dsym base_syms[NSYMS - 1] = {
	{ "je_mallctl", TEXT_ADDR + 0x00, 0x40, STT_FUNC },
	{ "je_mallctlnametomib", TEXT_ADDR + 0x40, 0x40, STT_FUNC },
	{ "je_malloc_stats_print", TEXT_ADDR + 0x80, 0x40, STT_FUNC },
	{ "mallctl_int", TEXT_ADDR + 0xc0, 0x20, STT_FUNC },
	{ "je_malloc_conf", 0x2000, 8, STT_OBJECT },
};

static const unsigned char build_id[20] = {
	0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13,
	14, 15, 16,
};

static uint32_t gnu_hash_of(const char *s)
{
	uint32_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

static uint32_t sysv_hash_of(const char *s)
{
	uint32_t h = 0, g;

	while (*s) {
		h = (h << 4) + (unsigned char)*s++;
		g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static size_t put(struct img *m, const void *p, size_t n)
{
	size_t at = (m->len + 7) & ~(size_t)7;

	cr_assert_leq(at + n, IMG_MAX);
	memset(m->buf + m->len, 0, at - m->len);
	memcpy(m->buf + at, p, n);
	m->len = at + n;
	return at;
}

static void *xz(const void *in, size_t len, size_t *outlen)
{
	size_t cap = len + len / 2 + 4096, pos = 0;
	uint8_t *out = malloc(cap);

	cr_assert_not_null(out);
	cr_assert_eq(lzma_easy_buffer_encode(0, LZMA_CHECK_CRC32, NULL, in,
					     len, out, &pos, cap),
		     LZMA_OK);
	*outlen = pos;
	return out;
}

/*
 * Build the base image into @m.  @debugdata (may be NULL) goes into
 * .gnu_debugdata as it is.
 */
static void build(struct img *m, const void *debugdata, size_t ddlen)
{
	static const char shstr[] =
		"\0.text\0.dynsym\0.dynstr\0.gnu.hash\0.hash\0.gnu.version\0"
		".symtab\0.strtab\0.note.gnu.build-id\0.gnu_debugdata\0"
		".shstrtab";
	static const char *const secname[NSEC] = {
		"", ".text", ".dynsym", ".dynstr", ".gnu.hash", ".hash",
		".gnu.version", ".symtab", ".strtab", ".note.gnu.build-id",
		".gnu_debugdata", ".shstrtab",
	};
	struct dsym order[NSYMS - 1];
	Elf64_Sym dynsym[NSYMS], symtab[NSYMS + 1];
	char dynstr[512], strtab[512];
	size_t dynstr_len = 1, strtab_len = 1, i, k, n = 0;
	uint32_t gh[4 + 2 + NBUCKETS + NSYMS], sh[2 + NBUCKETS + NSYMS];
	uint16_t versym[NSYMS];
	unsigned char text[0x100], note[12 + 4 + sizeof(build_id)];
	Elf64_Ehdr eh;
	Elf64_Phdr ph[2];
	Elf64_Shdr shdr[NSEC];
	uint32_t nsz = 4, dsz = sizeof(build_id), ntype = NT_GNU_BUILD_ID;

	memset(m->buf, 0, IMG_MAX);
	m->len = sizeof(eh) + sizeof(ph);

	/* .dynsym sorted by bucket, as .gnu.hash requires. */
	for (k = 0; k < NBUCKETS; k++)
		for (i = 0; i < NSYMS - 1; i++)
			if (gnu_hash_of(base_syms[i].name) % NBUCKETS == k)
				order[n++] = base_syms[i];
	memset(dynsym, 0, sizeof(dynsym));
	memset(dynstr, 0, sizeof(dynstr));
	for (i = 0; i < NSYMS - 1; i++) {
		Elf64_Sym *s = &dynsym[i + 1];

		s->st_name = (uint32_t)dynstr_len;
		dynstr_len += (size_t)sprintf(dynstr + dynstr_len, "%s",
					      order[i].name) + 1;
		s->st_value = order[i].value;
		s->st_size = order[i].size;
		s->st_info = ELF64_ST_INFO(STB_GLOBAL, order[i].type);
		s->st_shndx = S_TEXT;
	}
	/* "mallctl" stored as the tail of "je_mallctl", as linkers do:
	 * one more name, no more bytes. */

	/* .gnu.hash: nbuckets, symoffset 1, one bloom word (all ones). */
	memset(gh, 0, sizeof(gh));
	gh[0] = NBUCKETS;
	gh[1] = 1;
	gh[2] = 1;
	gh[3] = 6;
	gh[4] = gh[5] = 0xffffffffu;
	for (i = 0; i < NSYMS - 1; i++) {
		uint32_t h = gnu_hash_of(order[i].name);
		uint32_t b = h % NBUCKETS;
		bool last = i + 1 == NSYMS - 1 ||
			    gnu_hash_of(order[i + 1].name) % NBUCKETS != b;

		if (!gh[6 + b])
			gh[6 + b] = (uint32_t)(i + 1);
		gh[6 + NBUCKETS + i] = (h & ~1u) | (last ? 1u : 0u);
	}
	/* .hash: buckets then chains, prepending. */
	memset(sh, 0, sizeof(sh));
	sh[0] = NBUCKETS;
	sh[1] = NSYMS;
	for (i = 1; i < NSYMS; i++) {
		uint32_t b = sysv_hash_of(order[i - 1].name) % NBUCKETS;

		sh[2 + NBUCKETS + i] = sh[2 + b];
		sh[2 + b] = (uint32_t)i;
	}
	for (i = 0; i < NSYMS; i++)
		versym[i] = i ? 1 : 0;

	/* .symtab: the same plus a local function. */
	memset(symtab, 0, sizeof(symtab));
	memset(strtab, 0, sizeof(strtab));
	for (i = 1; i < NSYMS; i++) {
		symtab[i] = dynsym[i];
		symtab[i].st_name = (uint32_t)strtab_len;
		strtab_len += (size_t)sprintf(strtab + strtab_len, "%s",
					      order[i - 1].name) + 1;
	}
	symtab[NSYMS].st_name = (uint32_t)strtab_len;
	strtab_len += (size_t)sprintf(strtab + strtab_len, "local_fn") + 1;
	symtab[NSYMS].st_value = TEXT_ADDR + 0xe0;
	symtab[NSYMS].st_size = 0x10;
	symtab[NSYMS].st_info = ELF64_ST_INFO(STB_LOCAL, STT_FUNC);
	symtab[NSYMS].st_shndx = S_TEXT;

	memcpy(note, &nsz, 4);
	memcpy(note + 4, &dsz, 4);
	memcpy(note + 8, &ntype, 4);
	memcpy(note + 12, "GNU", 4);
	memcpy(note + 16, build_id, sizeof(build_id));
	memset(text, 0xcc, sizeof(text));

	memset(m->off, 0, sizeof(m->off));
	m->off[S_TEXT] = put(m, text, sizeof(text));
	m->off[S_DYNSYM] = put(m, dynsym, sizeof(dynsym));
	m->off[S_DYNSTR] = put(m, dynstr, dynstr_len);
	m->off[S_GNUHASH] = put(m, gh, sizeof(gh));
	m->off[S_HASH] = put(m, sh, sizeof(sh));
	m->off[S_VERSYM] = put(m, versym, sizeof(versym));
	m->off[S_SYMTAB] = put(m, symtab, sizeof(symtab));
	m->off[S_STRTAB] = put(m, strtab, strtab_len);
	m->off[S_NOTE] = put(m, note, sizeof(note));
	m->off[S_DEBUGDATA] = debugdata ? put(m, debugdata, ddlen) : m->len;
	m->off[S_SHSTRTAB] = put(m, shstr, sizeof(shstr));

	memset(shdr, 0, sizeof(shdr));
	for (i = 1; i < NSEC; i++) {
		const char *p = shstr + 1;

		while (strcmp(p, secname[i]))
			p += strlen(p) + 1;
		shdr[i].sh_name = (uint32_t)(p - shstr);
		shdr[i].sh_offset = m->off[i];
		shdr[i].sh_addralign = 8;
	}
#define SEC(idx, type, size, link, ent, flags)                       \
	do {                                                         \
		shdr[idx].sh_type = (type);                          \
		shdr[idx].sh_size = (size);                          \
		shdr[idx].sh_link = (link);                          \
		shdr[idx].sh_entsize = (ent);                        \
		shdr[idx].sh_flags = (flags);                        \
	} while (0)
	SEC(S_TEXT, SHT_PROGBITS, sizeof(text), 0, 0, SHF_ALLOC | SHF_EXECINSTR);
	SEC(S_DYNSYM, SHT_DYNSYM, sizeof(dynsym), S_DYNSTR, sizeof(Elf64_Sym),
	    SHF_ALLOC);
	SEC(S_DYNSTR, SHT_STRTAB, dynstr_len, 0, 0, SHF_ALLOC);
	SEC(S_GNUHASH, SHT_GNU_HASH, sizeof(gh), S_DYNSYM, 0, SHF_ALLOC);
	SEC(S_HASH, SHT_HASH, sizeof(sh), S_DYNSYM, 4, SHF_ALLOC);
	SEC(S_VERSYM, SHT_GNU_versym, sizeof(versym), S_DYNSYM, 2, SHF_ALLOC);
	SEC(S_SYMTAB, SHT_SYMTAB, sizeof(symtab), S_STRTAB, sizeof(Elf64_Sym),
	    0);
	SEC(S_STRTAB, SHT_STRTAB, strtab_len, 0, 0, 0);
	SEC(S_NOTE, SHT_NOTE, sizeof(note), 0, 0, SHF_ALLOC);
	SEC(S_DEBUGDATA, SHT_PROGBITS, debugdata ? ddlen : 0, 0, 0, 0);
	SEC(S_SHSTRTAB, SHT_STRTAB, sizeof(shstr), 0, 0, 0);
#undef SEC
	shdr[S_TEXT].sh_addr = TEXT_ADDR;
	shdr[S_NOTE].sh_addr = 0x300;
	shdr[S_DYNSYM].sh_info = 1;
	shdr[S_SYMTAB].sh_info = NSYMS;
	m->shoff = put(m, shdr, sizeof(shdr));

	memset(ph, 0, sizeof(ph));
	ph[0].p_type = PT_LOAD;
	ph[0].p_flags = PF_R | PF_X;
	ph[0].p_filesz = ph[0].p_memsz = m->len;
	ph[0].p_align = 0x1000;
	ph[1].p_type = PT_NOTE;
	ph[1].p_flags = PF_R;
	ph[1].p_offset = m->off[S_NOTE];
	ph[1].p_vaddr = 0x300;
	ph[1].p_filesz = ph[1].p_memsz = sizeof(note);
	ph[1].p_align = 4;

	memset(&eh, 0, sizeof(eh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = m->shoff;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 2;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = NSEC;
	eh.e_shstrndx = S_SHSTRTAB;
	memcpy(m->buf, &eh, sizeof(eh));
	memcpy(m->buf + sizeof(eh), ph, sizeof(ph));
}

static struct img *new_img(void)
{
	struct img *m = calloc(1, sizeof(*m));

	cr_assert_not_null(m);
	m->buf = calloc(1, IMG_MAX);
	cr_assert_not_null(m->buf);
	return m;
}

static void free_img(struct img *m)
{
	free(m->buf);
	free(m);
}

/* The base image with an inner image (no debugdata of its own) packed
 * into its .gnu_debugdata. */
static struct img *base_with_debugdata(void)
{
	static struct img *cached;
	struct img *m = new_img();

	if (!cached) {
		struct img *inner = new_img();
		size_t ddlen;
		void *dd;

		cached = new_img();
		build(inner, NULL, 0);
		dd = xz(inner->buf, inner->len, &ddlen);
		build(cached, dd, ddlen);
		free(dd);
		free_img(inner);
	}
	memcpy(m->buf, cached->buf, IMG_MAX);
	memcpy(m->off, cached->off, sizeof(m->off));
	m->len = cached->len;
	m->shoff = cached->shoff;
	return m;
}

static Elf64_Shdr *shdr_of(struct img *m, int idx)
{
	return (Elf64_Shdr *)(void *)(m->buf + m->shoff +
				      (size_t)idx * sizeof(Elf64_Shdr));
}

static uint32_t *words_of(struct img *m, int idx)
{
	return (uint32_t *)(void *)(m->buf + m->off[idx]);
}

static int open_bytes(const void *buf, size_t len, struct elfobj **o)
{
	int fd = memfd_create("hostile-elf", MFD_CLOEXEC);
	const char *p = buf;
	size_t left = len;

	cr_assert_geq(fd, 0);
	while (left) {
		ssize_t n = write(fd, p, left);

		cr_assert_gt(n, 0);
		p += n;
		left -= (size_t)n;
	}
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	return elfobj_open(fd, "hostile", o);
}

static int count_cb(void *arg, const char *name)
{
	/* The name must be a readable C string. */
	*(size_t *)arg += strlen(name) + 1;
	return 0;
}

/* Everything a caller may do with an object; only allowed results. */
static void exercise(const void *buf, size_t len)
{
	static const char *const names[] = {
		"je_mallctl", "je_mallctlnametomib", "je_malloc_stats_print",
		"mallctl", "mallctl_int", "je_malloc_conf", "local_fn",
		"nothere", "",
	};
	static const uint64_t addrs[] = {
		0, TEXT_ADDR, TEXT_ADDR + 0x41, TEXT_ADDR + 0xe8, 0x2000,
		0x2100, UINT64_MAX,
	};
	const unsigned char *id;
	struct elfobj *o = NULL;
	struct elfsym s;
	uint64_t v, sz, bias;
	size_t i, idlen, count = 0;
	int rc;

	rc = open_bytes(buf, len, &o);
	cr_assert(rc == 0 || rc == -ENOEXEC || rc == -ENOMEM,
		  "elfobj_open: %d", rc);
	if (rc)
		return;
	(void)elfobj_type(o);
	rc = elfobj_build_id(o, &id, &idlen);
	cr_assert(rc == 0 || rc == -ENOENT);
	if (!rc) {
		cr_assert(idlen > 0 && idlen <= 64);
		for (i = 0; i < idlen; i++)
			count += id[i];
	}
	rc = elfobj_build_id_vaddr(o, &v);
	cr_assert(rc == 0 || rc == -ENOENT);
	rc = elfobj_bias(o, 0x7f0000000000ull, 0, 4096, &bias);
	cr_assert(rc == 0 || rc == -ENOENT);
	rc = elfobj_dynamic(o, &v, &sz);
	cr_assert(rc == 0 || rc == -ENOENT);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		rc = elfobj_lookup(o, names[i], ELFSYM_DYNAMIC_ONLY, &s);
		cr_assert(rc == 0 || rc == -ENOENT || rc == -ENOMEM);
		if (!rc)
			cr_assert_str_eq(s.name, names[i]);
		rc = elfobj_lookup(o, names[i], 0, &s);
		cr_assert(rc == 0 || rc == -ENOENT || rc == -ENOMEM);
		if (!rc)
			cr_assert_str_eq(s.name, names[i]);
	}
	rc = elfobj_each_suffix(o, "mallctl", count_cb, &count);
	cr_assert_eq(rc, 0);
	rc = elfobj_each_suffix(o, "", count_cb, &count);
	cr_assert_eq(rc, 0);
	for (i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		rc = elfobj_addr_lookup(o, addrs[i], &s);
		cr_assert(rc == 0 || rc == -ENOENT || rc == -ENOMEM);
		if (!rc) {
			cr_assert_not_null(s.name);
			count += strlen(s.name);
			cr_assert(addrs[i] == s.value ||
				  addrs[i] - s.value < s.size);
		}
	}
	(void)elfobj_sources(o);
	elfobj_close(o);
}

/* ---- the base image is good ---------------------------------------------- */

Test(elf_hostile, base_image_is_valid)
{
	struct img *m = base_with_debugdata();
	struct elfobj *o;
	struct elfsym s;
	const unsigned char *id;
	size_t len;

	cr_assert_eq(open_bytes(m->buf, m->len, &o), 0);
	cr_assert_eq(elfobj_lookup(o, "je_mallctl", ELFSYM_DYNAMIC_ONLY, &s),
		     0);
	cr_assert_eq(s.value, TEXT_ADDR);
	cr_assert_eq(s.source, SYMSRC_DYNSYM);
	cr_assert_eq(elfobj_lookup(o, "je_malloc_conf", 0, &s), 0);
	cr_assert_eq(s.size, 8);
	cr_assert_eq(elfobj_lookup(o, "local_fn", 0, &s), 0);
	cr_assert_eq(s.source, SYMSRC_SYMTAB);
	cr_assert_eq(elfobj_lookup(o, "mallctl", 0, &s), -ENOENT);
	cr_assert_eq(elfobj_addr_lookup(o, TEXT_ADDR + 0x41, &s), 0);
	cr_assert_str_eq(s.name, "je_mallctlnametomib");
	cr_assert_eq(elfobj_addr_lookup(o, TEXT_ADDR + 0xf8, &s), -ENOENT);
	cr_assert_eq(elfobj_build_id(o, &id, &len), 0);
	cr_assert_eq(len, sizeof(build_id));
	cr_assert_eq(memcmp(id, build_id, len), 0);
	cr_assert_eq(elfobj_sources(o), 7u);
	elfobj_close(o);
	free_img(m);
}

/* Without .symtab, the local comes from .gnu_debugdata. */
Test(elf_hostile, base_debugdata_used)
{
	struct img *m = base_with_debugdata();
	struct elfobj *o;
	struct elfsym s;

	shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
	cr_assert_eq(open_bytes(m->buf, m->len, &o), 0);
	cr_assert_eq(elfobj_lookup(o, "local_fn", 0, &s), 0);
	cr_assert_eq(s.source, SYMSRC_DEBUGDATA);
	cr_assert_eq(s.value, TEXT_ADDR + 0xe0);
	elfobj_close(o);
	free_img(m);
}

/* Each hash table alone finds every name. */
Test(elf_hostile, base_each_hash_table)
{
	int drop;

	for (drop = 0; drop < 3; drop++) {
		struct img *m = base_with_debugdata();
		struct elfobj *o;
		struct elfsym s;
		size_t i;

		if (drop == 0 || drop == 2)
			shdr_of(m, S_GNUHASH)->sh_type = SHT_PROGBITS;
		if (drop == 1 || drop == 2)
			shdr_of(m, S_HASH)->sh_type = SHT_PROGBITS;
		cr_assert_eq(open_bytes(m->buf, m->len, &o), 0);
		for (i = 0; i < NSYMS - 1; i++) {
			cr_assert_eq(elfobj_lookup(o, base_syms[i].name,
						   ELFSYM_DYNAMIC_ONLY, &s),
				     0, "%s (drop %d)", base_syms[i].name,
				     drop);
			cr_assert_eq(s.value, base_syms[i].value);
		}
		elfobj_close(o);
		free_img(m);
	}
}

/* ---- truncation, bit flips ----------------------------------------------- */

Test(elf_hostile, truncated_everywhere, .timeout = 120)
{
	struct img *m = base_with_debugdata();
	size_t len;

	for (len = 0; len < m->len; len++)
		exercise(m->buf, len);
	free_img(m);
}

Test(elf_hostile, random_corruption, .timeout = 240)
{
	struct img *m = base_with_debugdata();
	unsigned char *copy = malloc(m->len);
	uint64_t x = 0x9e3779b97f4a7c15ull; /* fixed seed: reproducible */
	int iter;

	cr_assert_not_null(copy);
	for (iter = 0; iter < 4000; iter++) {
		int flips = 1 + iter % 8, k;

		memcpy(copy, m->buf, m->len);
		for (k = 0; k < flips; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* Half of them in the headers, where it hurts:
			 * ELF and program headers, or section headers. */
			if (k % 2)
				copy[(x >> 8) % m->len] = (unsigned char)x;
			else if (iter % 2)
				copy[(x >> 8) % (sizeof(Elf64_Ehdr) +
						 2 * sizeof(Elf64_Phdr))] =
					(unsigned char)x;
			else
				copy[m->shoff + (x >> 8) % (NSEC *
							    sizeof(Elf64_Shdr))] =
					(unsigned char)x;
		}
		exercise(copy, m->len);
	}
	free(copy);
	free_img(m);
}

/* ---- targeted damage ---------------------------------------------------- */

typedef void (*damage_fn)(struct img *m);

static void each_section_field(damage_fn setup, int field, uint64_t value)
{
	int idx;

	for (idx = 1; idx < NSEC; idx++) {
		struct img *m = base_with_debugdata();
		Elf64_Shdr *sh;

		if (setup)
			setup(m);
		sh = shdr_of(m, idx);
		switch (field) {
		case 0: sh->sh_size = value; break;
		case 1: sh->sh_offset = value; break;
		case 2: sh->sh_link = (uint32_t)value; break;
		case 3: sh->sh_entsize = value; break;
		case 4: sh->sh_info = (uint32_t)value; break;
		case 5: sh->sh_type = (uint32_t)value; break;
		}
		exercise(m->buf, m->len);
		free_img(m);
	}
}

Test(elf_hostile, bogus_section_headers, .timeout = 120)
{
	static const uint64_t values[] = {
		0, 1, 3, 7, 23, 24, 25, 0x7fffffff, 0xffffffff,
		0x100000000ull, 0x7fffffffffffffffull, UINT64_MAX,
		UINT64_MAX - 23, IMG_MAX, NSEC, NSEC + 1,
	};
	int field;
	size_t v;

	for (field = 0; field < 6; field++)
		for (v = 0; v < sizeof(values) / sizeof(values[0]); v++)
			each_section_field(NULL, field, values[v]);
	/* Section types swapped around. */
	each_section_field(NULL, 5, SHT_DYNSYM);
	each_section_field(NULL, 5, SHT_SYMTAB);
	each_section_field(NULL, 5, SHT_GNU_HASH);
	each_section_field(NULL, 5, SHT_HASH);
	each_section_field(NULL, 5, SHT_NOTE);
	each_section_field(NULL, 5, SHT_GNU_versym);
	each_section_field(NULL, 5, SHT_NOBITS);
}

Test(elf_hostile, bogus_elf_header)
{
	static const struct {
		size_t off, size;
		uint64_t value;
	} cases[] = {
		{ offsetof(Elf64_Ehdr, e_shoff), 8, UINT64_MAX },
		{ offsetof(Elf64_Ehdr, e_shoff), 8, 1 },
		{ offsetof(Elf64_Ehdr, e_shoff), 8, IMG_MAX - 10 },
		{ offsetof(Elf64_Ehdr, e_phoff), 8, UINT64_MAX - 8 },
		{ offsetof(Elf64_Ehdr, e_phoff), 8, 3 },
		{ offsetof(Elf64_Ehdr, e_shnum), 2, 0xffff },
		{ offsetof(Elf64_Ehdr, e_shnum), 2, 0 },
		{ offsetof(Elf64_Ehdr, e_phnum), 2, 0xffff },
		{ offsetof(Elf64_Ehdr, e_phnum), 2, 0 },
		{ offsetof(Elf64_Ehdr, e_shstrndx), 2, 0xffff },
		{ offsetof(Elf64_Ehdr, e_shstrndx), 2, NSEC },
		{ offsetof(Elf64_Ehdr, e_shstrndx), 2, S_DYNSYM },
		{ offsetof(Elf64_Ehdr, e_shentsize), 2, 1 },
		{ offsetof(Elf64_Ehdr, e_phentsize), 2, 0xffff },
		{ EI_CLASS, 1, ELFCLASS32 },
		{ EI_CLASS, 1, 7 },
		{ EI_DATA, 1, ELFDATA2MSB },
		{ EI_VERSION, 1, 9 },
		{ 0, 1, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct img *m = base_with_debugdata();

		memcpy(m->buf + cases[i].off, &cases[i].value, cases[i].size);
		exercise(m->buf, m->len);
		free_img(m);
	}
}

Test(elf_hostile, gnu_hash_tables, .timeout = 60)
{
	/* word index, value */
	static const struct {
		int word;
		uint32_t value;
	} cases[] = {
		{ 0, 0xffffffffu },	/* nbuckets huge */
		{ 0, 0 },		/* no buckets */
		{ 1, 0xffffffffu },	/* symoffset beyond the table */
		{ 1, 0 },
		{ 2, 0xffffffffu },	/* bloom size huge */
		{ 2, 0x80000000u },
		{ 2, 0 },
		{ 3, 0xff },		/* bloom shift */
		{ 6, 0xffffffffu },	/* a bucket pointing nowhere */
		{ 7, NSYMS },
		{ 8, 1 },
		{ 9, 0 },		/* chains never end */
		{ 10, 0 },
		{ 11, 0 },
		{ 12, 0 },
		{ 13, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct img *m = base_with_debugdata();

		words_of(m, S_GNUHASH)[cases[i].word] = cases[i].value;
		exercise(m->buf, m->len);
		free_img(m);
	}
	/* Every chain word without its end bit, and no .hash to fall
	 * back on: the walk must stop at the end of .dynsym. */
	{
		struct img *m = base_with_debugdata();
		uint32_t *w = words_of(m, S_GNUHASH);

		for (i = 0; i < NSYMS - 1; i++)
			w[6 + NBUCKETS + i] &= ~1u;
		shdr_of(m, S_HASH)->sh_type = SHT_PROGBITS;
		exercise(m->buf, m->len);
		free_img(m);
	}
	/* The table cut to its header. */
	{
		struct img *m = base_with_debugdata();

		shdr_of(m, S_GNUHASH)->sh_size = 16;
		exercise(m->buf, m->len);
		shdr_of(m, S_GNUHASH)->sh_size = 5;
		exercise(m->buf, m->len);
		free_img(m);
	}
}

Test(elf_hostile, sysv_hash_loops, .timeout = 60)
{
	size_t i;

	/* Every chain pointing at itself, or at the next. */
	for (i = 0; i < 2; i++) {
		struct img *m = base_with_debugdata();
		uint32_t *w = words_of(m, S_HASH);
		size_t k;

		shdr_of(m, S_GNUHASH)->sh_type = SHT_PROGBITS;
		for (k = 0; k < NSYMS; k++)
			w[2 + NBUCKETS + k] =
				(uint32_t)(i ? (k + 1) % NSYMS + 1 : k);
		for (k = 0; k < NBUCKETS; k++)
			w[2 + k] = 1;
		exercise(m->buf, m->len);
		free_img(m);
	}
	/* nbucket, nchain at their extremes. */
	for (i = 0; i < 6; i++) {
		struct img *m = base_with_debugdata();
		uint32_t *w = words_of(m, S_HASH);

		shdr_of(m, S_GNUHASH)->sh_type = SHT_PROGBITS;
		w[i % 2] = i < 2 ? 0 : i < 4 ? 0xffffffffu : 0x40000000u;
		exercise(m->buf, m->len);
		free_img(m);
	}
	/* Buckets out of range. */
	{
		struct img *m = base_with_debugdata();
		uint32_t *w = words_of(m, S_HASH);

		shdr_of(m, S_GNUHASH)->sh_type = SHT_PROGBITS;
		w[2] = w[3] = w[4] = 0xfffffff0u;
		exercise(m->buf, m->len);
		free_img(m);
	}
}

Test(elf_hostile, string_tables)
{
	int t;

	for (t = 0; t < 2; t++) {
		int sec = t ? S_STRTAB : S_DYNSTR;
		struct img *m = base_with_debugdata();
		Elf64_Shdr *sh = shdr_of(m, sec);

		/* No NUL anywhere: every name runs off the end. */
		memset(m->buf + m->off[sec], 'A', sh->sh_size);
		exercise(m->buf, m->len);
		/* Names pointing past the table. */
		free_img(m);
		m = base_with_debugdata();
		{
			Elf64_Sym *s = (Elf64_Sym *)(void *)(
				m->buf + m->off[t ? S_SYMTAB : S_DYNSYM]);
			size_t k;

			for (k = 1; k < NSYMS; k++)
				s[k].st_name = k % 2 ? 0xffffffffu
						     : (uint32_t)shdr_of(m, sec)->sh_size;
		}
		exercise(m->buf, m->len);
		free_img(m);
		/* The table cut so the last name has no NUL. */
		m = base_with_debugdata();
		shdr_of(m, sec)->sh_size -= 1;
		exercise(m->buf, m->len);
		if (sec == S_STRTAB) {
			/* "local_fn" is the last name: it now runs past the
			 * end of .strtab (into a NUL of the next section),
			 * so .symtab must not name it. */
			struct elfobj *o;
			struct elfsym s;

			cr_assert_eq(open_bytes(m->buf, m->len, &o), 0);
			if (!elfobj_lookup(o, "local_fn", 0, &s))
				cr_assert_neq(s.source, SYMSRC_SYMTAB);
			if (!elfobj_addr_lookup(o, TEXT_ADDR + 0xe0, &s))
				cr_assert_neq(s.source, SYMSRC_SYMTAB);
			elfobj_close(o);
		}
		free_img(m);
	}
}

Test(elf_hostile, symbols_odd)
{
	struct img *m = base_with_debugdata();
	Elf64_Sym *s = (Elf64_Sym *)(void *)(m->buf + m->off[S_DYNSYM]);
	size_t k;

	/* Sizes that wrap, section indexes out of range, odd types. */
	for (k = 1; k < NSYMS; k++) {
		s[k].st_size = UINT64_MAX - k;
		s[k].st_value = UINT64_MAX - 0x10 * k;
		s[k].st_shndx = (uint16_t)(k % 2 ? SHN_XINDEX : 0xfff0);
		s[k].st_info = (unsigned char)(k * 37);
	}
	exercise(m->buf, m->len);
	free_img(m);

	/* .gnu.version shorter than .dynsym, and hidden everywhere. */
	m = base_with_debugdata();
	shdr_of(m, S_VERSYM)->sh_size = 3;
	exercise(m->buf, m->len);
	free_img(m);
	m = base_with_debugdata();
	memset(m->buf + m->off[S_VERSYM], 0xff, NSYMS * 2);
	exercise(m->buf, m->len);
	free_img(m);
}

Test(elf_hostile, notes)
{
	static const uint32_t hdrs[][3] = {
		{ 4, 0xffffffffu, NT_GNU_BUILD_ID },
		{ 0xffffffffu, 20, NT_GNU_BUILD_ID },
		{ 4, 0, NT_GNU_BUILD_ID },
		{ 4, 65, NT_GNU_BUILD_ID },
		{ 4, 21, NT_GNU_BUILD_ID }, /* runs past the note */
		{ 3, 20, NT_GNU_BUILD_ID },
		{ 0, 0, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(hdrs) / sizeof(hdrs[0]); i++) {
		struct img *m = base_with_debugdata();

		memcpy(m->buf + m->off[S_NOTE], hdrs[i], sizeof(hdrs[i]));
		exercise(m->buf, m->len);
		free_img(m);
	}
	/* The PT_NOTE segment outside the file. */
	{
		struct img *m = base_with_debugdata();
		Elf64_Phdr *ph = (Elf64_Phdr *)(void *)(m->buf +
							sizeof(Elf64_Ehdr));

		ph[1].p_offset = UINT64_MAX - 4;
		exercise(m->buf, m->len);
		ph[1].p_offset = m->off[S_NOTE];
		ph[1].p_filesz = UINT64_MAX;
		exercise(m->buf, m->len);
		ph[1].p_offset = m->off[S_NOTE] + 1; /* misaligned */
		ph[1].p_filesz = 32;
		exercise(m->buf, m->len);
		free_img(m);
	}
}

/* .gnu_debugdata: garbage, a truncated stream, a hostile inner ELF, and
 * a small stream that unpacks to more than memsnap accepts. */
Test(elf_hostile, debugdata, .timeout = 120)
{
	struct img *inner = new_img(), *m = new_img();
	unsigned char garbage[512];
	size_t i, ddlen;
	void *dd;

	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(i * 131 + 7);
	build(m, garbage, sizeof(garbage));
	shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
	exercise(m->buf, m->len);

	/* Valid xz, cut short. */
	build(inner, NULL, 0);
	dd = xz(inner->buf, inner->len, &ddlen);
	build(m, dd, ddlen / 2);
	shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
	exercise(m->buf, m->len);
	free(dd);

	/* Valid xz of a hostile inner ELF (no NUL in its strings, hash
	 * words broken). */
	build(inner, NULL, 0);
	memset(inner->buf + inner->off[S_STRTAB], 'B',
	       shdr_of(inner, S_STRTAB)->sh_size);
	shdr_of(inner, S_SYMTAB)->sh_size = UINT64_MAX / 2;
	dd = xz(inner->buf, inner->len, &ddlen);
	build(m, dd, ddlen);
	shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
	exercise(m->buf, m->len);
	free(dd);

	/* Valid xz of something that is not ELF. */
	dd = xz(garbage, sizeof(garbage), &ddlen);
	build(m, dd, ddlen);
	shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
	exercise(m->buf, m->len);
	free(dd);

	/* 160 MiB of zeros in a few KiB: must be refused, not unpacked. */
	{
		size_t big = 160u << 20;
		unsigned char *zeros = calloc(1, big);
		struct elfobj *o;
		struct elfsym s;

		cr_assert_not_null(zeros);
		memcpy(zeros, inner->buf, 64); /* an ELF header, then zeros */
		dd = xz(zeros, big, &ddlen);
		free(zeros);
		cr_assert_lt(ddlen, IMG_MAX / 2);
		build(m, dd, ddlen);
		free(dd);
		shdr_of(m, S_SYMTAB)->sh_type = SHT_PROGBITS;
		cr_assert_eq(open_bytes(m->buf, m->len, &o), 0);
		cr_assert_eq(elfobj_lookup(o, "local_fn", 0, &s), -ENOENT);
		cr_assert_eq(elfobj_sources(o) & 4u, 0);
		elfobj_close(o);
	}
	free_img(inner);
	free_img(m);
}

Test(elf_hostile, not_elf)
{
	static const char *const texts[] = {
		"", "\x7f", "\x7f" "ELF", "#!/bin/sh\necho hi\n",
		"!<arch>\nfoo/            0           0     0     644     4         `\nabcd",
	};
	size_t i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct elfobj *o;

		cr_assert_eq(open_bytes(texts[i], strlen(texts[i]), &o),
			     -ENOEXEC, "%zu", i);
	}
}
