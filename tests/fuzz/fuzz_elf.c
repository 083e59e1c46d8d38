/*
 * Fuzz the ELF symbol reader (symbols/elf.h) with whatever file a target
 * could map: every query memsnap makes of an object, on crafted bytes.
 *
 *   fuzz-elf             the input is the ELF file
 *   fuzz-elf-debugdata   (-DFUZZ_DEBUGDATA) the input is the MiniDebugInfo
 *                        image: it is xz-compressed into the .gnu_debugdata
 *                        section of a minimal outer ELF made here, so the
 *                        fuzzer mutates the inner file and not the xz
 *                        stream (whose checksums it would never get right)
 *
 * The file is opened from a memfd, as elfobj_open() gets it from
 * /proc/PID/map_files.  Then: type, build-id (every byte read), the
 * build-id's and PT_DYNAMIC's addresses, the load bias for the offsets a
 * mapping could have, name -> symbol for the allocator names detection
 * asks for (all tables and .dynsym only), the suffix scan detection does
 * for "<P>mallctl" with its sibling lookups, every name the tables hold
 * (suffix ""), and address -> symbol back from each of them.
 *
 * Checked: a name lookup returns that very name; .dynsym-only lookups
 * come from .dynsym; a name the suffix scan reports can be looked up; a
 * symbol found by name is found again at its address; an address is only
 * ever named by a symbol that covers it.
 */
#include "symbols/elf.h"

#include "common/util.h"
#include "tests/fuzz/fuzz.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#ifdef FUZZ_DEBUGDATA
#include <lzma.h>
#endif

#define MAX_NAMES 64

static const char *const alloc_names[] = {
	"malloc", "free", "calloc", "mallctl", "je_mallctl", "_rjem_mallctl",
	"mallctlnametomib", "malloc_stats_print", "__libc_malloc",
	"malloc_info", "malloc_trim", "mallinfo2", "tc_malloc",
	"MallocExtension_GetStats", "HeapProfilerStart", "mi_malloc",
	"mi_stats_print_out", "",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* An answer of elfobj_lookup() for @name: that name, a defined symbol,
 * from a table the object has. */
static int check_lookup(struct elfobj *o, const char *name,
			unsigned int flags, struct elfsym *s)
{
	int rc = elfobj_lookup(o, name, flags, s);

	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -ENOMEM);
	if (rc)
		return rc;
	FUZZ_CHECK(s->name && !strcmp(s->name, name));
	FUZZ_CHECK(s->source <= SYMSRC_DEBUGDATA);
	if (flags & ELFSYM_DYNAMIC_ONLY)
		FUZZ_CHECK(s->source == SYMSRC_DYNSYM);
	FUZZ_CHECK(s->type == STT_FUNC || s->type == STT_OBJECT ||
		   s->type == STT_GNU_IFUNC || s->type == STT_NOTYPE);
	return 0;
}

/* What names @vaddr, if anything, covers it. */
static int check_addr(struct elfobj *o, uint64_t vaddr, struct elfsym *s)
{
	int rc = elfobj_addr_lookup(o, vaddr, s);

	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -ENOMEM);
	if (rc)
		return rc;
	FUZZ_CHECK(s->name && s->name[0]);
	FUZZ_CHECK(s->value <= vaddr);
	FUZZ_CHECK(vaddr == s->value || vaddr - s->value < s->size);
	return 0;
}

static bool starts_m(const char *name, void *arg)
{
	(void)arg;
	return name[0] == 'm';
}

/* The fences' span of @vaddr: around it, never wider than allowed. */
static void check_span(struct elfobj *o, uint64_t vaddr)
{
	uint64_t lo, hi, max = 4096;
	int rc = elfobj_span(o, vaddr, starts_m, NULL, max, &lo, &hi);

	FUZZ_CHECK(rc == 0 || rc == -ERANGE || rc == -ENOMEM);
	if (!rc)
		FUZZ_CHECK(lo <= vaddr && vaddr < hi && hi - lo <= 2 * max);
	rc = elfobj_span(o, vaddr, NULL, NULL, max, &lo, &hi);
	FUZZ_CHECK(rc == 0 || rc == -ERANGE || rc == -ENOMEM);
	if (!rc)
		FUZZ_CHECK(lo <= vaddr && vaddr < hi && hi - lo <= 2 * max);
}

static int on_got_slot(void *arg, const char *name, uint64_t vaddr, bool plt)
{
	(void)arg;
	(void)vaddr;
	(void)plt;
	FUZZ_CHECK(name && name[0]);
	return 0;
}

/* detect.c's scan: each "<P>mallctl", then <P>'s siblings. */
static int on_mallctl(void *arg, const char *name)
{
	static const char *const siblings[] = { "mallctlnametomib",
						"malloc_stats_print" };
	struct elfobj *o = arg;
	size_t plen, i;
	struct elfsym s;
	char full[256];

	FUZZ_CHECK(ends_with(name, "mallctl"));
	plen = strlen(name) - strlen("mallctl");
	for (i = 0; i < 2; i++) {
		if ((size_t)snprintf(full, sizeof(full), "%.*s%s", (int)plen,
				     name, siblings[i]) >= sizeof(full))
			return 0;
		check_lookup(o, full, 0, &s);
	}
	return 0;
}

struct names {
	char *v[MAX_NAMES];
	size_t n;
};

static int collect(void *arg, const char *name)
{
	struct names *ns = arg;

	FUZZ_CHECK(name && name[0]);
	ns->v[ns->n] = strdup(name);
	FUZZ_CHECK(ns->v[ns->n] != NULL);
	return ++ns->n == MAX_NAMES; /* and see that stopping early works */
}

/* Name -> symbol -> address -> symbol, for a name the tables hold. */
static void round_trip(struct elfobj *o, const char *name)
{
	struct elfsym s, a;
	int rc;

	/* suffix scan and lookup agree on what is defined */
	rc = check_lookup(o, name, 0, &s);
	FUZZ_CHECK(rc == 0 || rc == -ENOMEM);
	if (rc)
		return;
	check_span(o, s.value);
	rc = check_addr(o, s.value, &a);
	/* in the address index unless a size-0 untyped label */
	if (s.type != STT_NOTYPE || s.size)
		FUZZ_CHECK((rc == 0 && a.value == s.value) || rc == -ENOMEM);
	if (s.size && s.value + s.size > s.value) {
		check_addr(o, s.value + s.size - 1, &a);
		check_addr(o, s.value + s.size, &a);
	}
	if (s.value)
		check_addr(o, s.value - 1, &a);
}

static void exercise(struct elfobj *o, const uint8_t *data, size_t size)
{
	static const uint64_t page_sizes[] = { 4096, 65536 };
	const unsigned char *id;
	struct names ns = { .n = 0 };
	struct elfsym s;
	uint64_t v, w;
	unsigned int sources, i, k;
	int rc;
	size_t len, j;

	(void)elfobj_type(o);
	if (!elfobj_build_id(o, &id, &len)) {
		unsigned int sum = 0;

		FUZZ_CHECK(len > 0 && len <= 64);
		for (j = 0; j < len; j++)
			sum += id[j];
		(void)sum;
	}
	(void)elfobj_build_id_vaddr(o, &v);
	(void)elfobj_dynamic(o, &v, &w);
	for (i = 0; i < ARRAY_SIZE(page_sizes); i++)
		for (k = 0; k < 8; k++)
			(void)elfobj_bias(o, 0x7f0000000000ull,
					  k * page_sizes[i], page_sizes[i], &v);

	/* .dynsym first, alone, as find_malloc() does through the link map */
	for (i = 0; i < ARRAY_SIZE(alloc_names); i++)
		check_lookup(o, alloc_names[i], ELFSYM_DYNAMIC_ONLY, &s);
	for (i = 0; i < ARRAY_SIZE(alloc_names); i++)
		check_lookup(o, alloc_names[i], 0, &s);
	elfobj_each_suffix(o, "mallctl", on_mallctl, o);
	rc = elfobj_each_got_slot(o, on_got_slot, NULL);
	FUZZ_CHECK(rc == 0 || rc == -E2BIG);
	(void)elfobj_relro(o, &v, &w);
	sources = elfobj_sources(o);
	FUZZ_CHECK(sources < 8);

	elfobj_each_suffix(o, "", collect, &ns);
	for (j = 0; j < ns.n; j++) {
		round_trip(o, ns.v[j]);
		free(ns.v[j]);
	}

	check_addr(o, 0, &s);
	check_addr(o, UINT64_MAX, &s);
	if (size >= 8) {
		memcpy(&v, data + size - 8, sizeof(v));
		check_addr(o, v, &s);
	}
}

#ifdef FUZZ_DEBUGDATA
/*
 * An outer ELF64 holding @xz as .gnu_debugdata and nothing else, so that
 * every symbol lookup reaches the inner file:
 *
 *   Ehdr | xz | .shstrtab | Shdr[3] (null, .gnu_debugdata, .shstrtab)
 */
static unsigned char *wrap(const uint8_t *xz, size_t xzlen, size_t *outlen)
{
	static const char shstr[] = "\0.gnu_debugdata\0.shstrtab";
	size_t str_at = sizeof(Elf64_Ehdr) + xzlen;
	size_t sh_at = (str_at + sizeof(shstr) + 7) & ~(size_t)7;
	size_t total = sh_at + 3 * sizeof(Elf64_Shdr);
	unsigned char *img = calloc(1, total);
	Elf64_Ehdr eh = {
		.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64,
			     ELFDATA2LSB, EV_CURRENT },
		.e_type = ET_DYN,
		.e_machine = EM_X86_64,
		.e_version = EV_CURRENT,
		.e_shoff = sh_at,
		.e_ehsize = sizeof(Elf64_Ehdr),
		.e_shentsize = sizeof(Elf64_Shdr),
		.e_shnum = 3,
		.e_shstrndx = 2,
	};
	Elf64_Shdr sh[3] = {
		[1] = { .sh_name = 1, .sh_type = SHT_PROGBITS,
			.sh_offset = sizeof(Elf64_Ehdr), .sh_size = xzlen,
			.sh_addralign = 1 },
		[2] = { .sh_name = 16, .sh_type = SHT_STRTAB,
			.sh_offset = str_at, .sh_size = sizeof(shstr),
			.sh_addralign = 1 },
	};

	FUZZ_CHECK(img != NULL);
	memcpy(img, &eh, sizeof(eh));
	memcpy(img + sizeof(eh), xz, xzlen);
	memcpy(img + str_at, shstr, sizeof(shstr));
	memcpy(img + sh_at, sh, sizeof(sh));
	*outlen = total;
	return img;
}

/* xz with a small dictionary: cheap enough to run on every input. */
static uint8_t *compress(const uint8_t *data, size_t size, size_t *outlen)
{
	lzma_options_lzma opt;
	lzma_filter filters[2] = {
		{ .id = LZMA_FILTER_LZMA2, .options = &opt },
		{ .id = LZMA_VLI_UNKNOWN },
	};
	size_t cap = lzma_stream_buffer_bound(size), pos = 0;
	uint8_t *out = malloc(cap ? cap : 1);

	FUZZ_CHECK(out != NULL);
	FUZZ_CHECK(!lzma_lzma_preset(&opt, 0));
	opt.dict_size = LZMA_DICT_SIZE_MIN;
	FUZZ_CHECK(lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC32, NULL,
					     data, size, out, &pos,
					     cap) == LZMA_OK);
	*outlen = pos;
	return out;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elfobj *o;
	int fd, rc;
#ifdef FUZZ_DEBUGDATA
	size_t xzlen, imglen;
	uint8_t *xz = compress(data, size, &xzlen);
	unsigned char *img = wrap(xz, xzlen, &imglen);

	fd = fuzz_memfd(img, imglen);
	free(img);
	free(xz);
#else
	fd = fuzz_memfd(data, size);
#endif
	rc = elfobj_open(fd, "fuzz", &o);
	FUZZ_CHECK(rc == 0 || rc == -ENOEXEC || rc == -ENOMEM);
	if (rc)
		return 0;
	exercise(o, data, size);
	elfobj_close(o);
	return 0;
}
