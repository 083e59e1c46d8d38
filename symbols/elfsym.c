/*
 * The ELF reader's symbol side (see symbols/elf_internal.h): .dynsym,
 * .symtab and MiniDebugInfo's symbols, lookup by name through the GNU
 * or SysV hash or a scan, and by address through a sorted index.
 */
#include "symbols/elf.h"

#include "common/util.h"
#include "symbols/elf_internal.h"

#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

/* ---- symbol tables ---------------------------------------------------- */

static size_t sym_entsize(Elf *elf)
{
	return gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
}

/* Fill @t from section @scn of @elf: symbols and their string table. */
static bool load_symtab(struct symtab *t, Elf *elf, Elf_Scn *scn)
{
	GElf_Shdr sh, strsh;
	Elf_Scn *strscn;
	Elf_Data *sd;
	size_t ent = sym_entsize(elf);

	if (!scn || !ent || !gelf_getshdr(scn, &sh))
		return false;
	strscn = elf_getscn(elf, sh.sh_link);
	if (!strscn || !gelf_getshdr(strscn, &strsh) ||
	    strsh.sh_type != SHT_STRTAB)
		return false;
	t->syms = elf_getdata(scn, NULL);
	sd = elf_getdata(strscn, NULL);
	if (!t->syms || !sd || !t->syms->d_buf || !sd->d_buf)
		return false;
	t->count = t->syms->d_size / ent;
	t->strs = sd->d_buf;
	t->strs_len = sd->d_size;
	t->elf = elf;
	return t->count > 0;
}

static void load_dynsym_extras(struct elfobj *o, struct symtab *t)
{
	size_t dynsym_ndx = elf_ndxscn(o->scn_dynsym);
	GElf_Shdr sh;
	Elf_Data *d;

	if (o->scn_versym && (d = elf_getdata(o->scn_versym, NULL)) &&
	    d->d_buf && d->d_size / sizeof(GElf_Versym) == t->count)
		t->versym = d->d_buf;
	/* A hash table only counts if it indexes this .dynsym. */
	if (o->scn_gnuhash && gelf_getshdr(o->scn_gnuhash, &sh) &&
	    sh.sh_link == dynsym_ndx &&
	    (d = elf_getdata(o->scn_gnuhash, NULL)) && d->d_buf) {
		t->gnuhash = d->d_buf;
		t->gnuhash_words = d->d_size / 4;
	}
	if (o->scn_hash && gelf_getshdr(o->scn_hash, &sh) &&
	    sh.sh_link == dynsym_ndx && sh.sh_entsize != 8 &&
	    (d = elf_getdata(o->scn_hash, NULL)) && d->d_buf) {
		t->sysvhash = d->d_buf;
		t->sysvhash_words = d->d_size / 4;
	}
}

static Elf_Scn *find_scn_type(Elf *elf, GElf_Word type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	return NULL;
}

/* The table for @src, loaded on first use; NULL when the object has none. */
static struct symtab *get_tab(struct elfobj *o, enum sym_source src)
{
	struct symtab *t = &o->tabs[src];

	if (t->tried)
		return t->present ? t : NULL;
	t->tried = true;
	switch (src) {
	case SYMSRC_DYNSYM:
		t->present = load_symtab(t, o->elf, o->scn_dynsym);
		if (t->present)
			load_dynsym_extras(o, t);
		break;
	case SYMSRC_SYMTAB:
		t->present = load_symtab(t, o->elf, o->scn_symtab);
		break;
	case SYMSRC_DEBUGDATA:
		if (o->scn_debugdata && !elf_unpack_debugdata(o))
			t->present = load_symtab(
				t, o->debugdata_elf,
				find_scn_type(o->debugdata_elf, SHT_SYMTAB));
		break;
	}
	return t->present ? t : NULL;
}

struct symtab *elf_dynsym(struct elfobj *o)
{
	return get_tab(o, SYMSRC_DYNSYM);
}

/* The NUL-terminated name at @off in @t's string table, or NULL. */
const char *symtab_str(const struct symtab *t, size_t off)
{
	if (off >= t->strs_len ||
	    !memchr(t->strs + off, '\0', t->strs_len - off))
		return NULL;
	return t->strs + off;
}

static bool sym_defined(const GElf_Sym *s)
{
	unsigned int type = GELF_ST_TYPE(s->st_info);

	if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS)
		return false;
	return type == STT_FUNC || type == STT_OBJECT ||
	       type == STT_GNU_IFUNC || type == STT_NOTYPE;
}

/* Fill @out from symbol @i of @t if it is defined and named; else false. */
static bool sym_get(const struct symtab *t, enum sym_source src, size_t i,
		    struct elfsym *out)
{
	GElf_Sym s;
	const char *name;

	if (i >= t->count || !gelf_getsym(t->syms, (int)i, &s) ||
	    !sym_defined(&s) || !(name = symtab_str(t, s.st_name)) || !*name)
		return false;
	out->name = name;
	out->value = s.st_value;
	out->size = s.st_size;
	out->type = GELF_ST_TYPE(s.st_info);
	out->bind = GELF_ST_BIND(s.st_info);
	out->source = src;
	return true;
}

/* Lower is better: global/weak default versions first. */
static int sym_rank(const struct symtab *t, size_t i, const struct elfsym *s)
{
	int r = s->bind == STB_LOCAL ? 4 : 0;

	if (t->versym && (t->versym[i] & 0x8000))
		r += 2;
	return r;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

static uint32_t sysv_hash(const char *s)
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

/* Keep @i as the answer if it beats the best so far. */
static void consider(const struct symtab *t, enum sym_source src, size_t i,
		     const char *name, struct elfsym *best, int *best_rank)
{
	struct elfsym s;
	int r;

	if (!sym_get(t, src, i, &s) || strcmp(s.name, name))
		return;
	r = sym_rank(t, i, &s);
	if (r < *best_rank) {
		*best = s;
		*best_rank = r;
	}
}

/*
 * .gnu.hash: [nbuckets, symoffset, bloom_size, bloom_shift], the bloom
 * words (ELF class sized), nbuckets bucket words, then one chain word per
 * symbol from symoffset on; the low bit of a chain word ends the chain.
 */
static bool gnuhash_lookup(const struct symtab *t, unsigned int cls,
			   const char *name, struct elfsym *best, int *rank)
{
	const uint32_t *w = t->gnuhash;
	uint64_t nbuckets, symoffset, bloom_words, buckets_at, chain_at;
	uint32_t h = gnu_hash(name);
	size_t i;

	if (t->gnuhash_words < 4)
		return false;
	nbuckets = w[0];
	symoffset = w[1];
	bloom_words = (uint64_t)w[2] * (cls == ELFCLASS64 ? 2 : 1);
	buckets_at = 4 + bloom_words;
	chain_at = buckets_at + nbuckets;
	if (!nbuckets || chain_at > t->gnuhash_words)
		return false;
	i = w[buckets_at + h % nbuckets];
	if (i < symoffset)
		return true; /* a valid table says: not here */
	for (; i < t->count; i++) {
		uint64_t c = chain_at + (i - symoffset);
		uint32_t h2;

		if (c >= t->gnuhash_words)
			break;
		h2 = w[c];
		if ((h2 | 1) == (h | 1))
			consider(t, SYMSRC_DYNSYM, i, name, best, rank);
		if (h2 & 1)
			break;
	}
	return true;
}

/* .hash: [nbucket, nchain, buckets..., chains...]; bounded walk. */
static bool sysvhash_lookup(const struct symtab *t, const char *name,
			    struct elfsym *best, int *rank)
{
	const uint32_t *w = t->sysvhash;
	uint64_t nbucket, nchain, steps = 0;
	uint32_t i;

	if (t->sysvhash_words < 2)
		return false;
	nbucket = w[0];
	nchain = w[1];
	if (!nbucket || 2 + nbucket + nchain > t->sysvhash_words)
		return false;
	for (i = w[2 + sysv_hash(name) % nbucket];
	     i != 0 && i < nchain && steps++ <= nchain;
	     i = w[2 + nbucket + i])
		consider(t, SYMSRC_DYNSYM, i, name, best, rank);
	return true;
}

static void linear_lookup(const struct symtab *t, enum sym_source src,
			  const char *name, struct elfsym *best, int *rank)
{
	size_t i;

	for (i = 1; i < t->count; i++)
		consider(t, src, i, name, best, rank);
}

int elfobj_lookup(struct elfobj *o, const char *name, unsigned int flags,
		  struct elfsym *out)
{
	unsigned int cls = o->ehdr.e_ident[EI_CLASS];
	int src, nsrc = (flags & ELFSYM_DYNAMIC_ONLY) ? 1 : 3;

	for (src = 0; src < nsrc; src++) {
		struct symtab *t = get_tab(o, (enum sym_source)src);
		int rank = 1 << 30;
		bool hashed = false;

		if (!t)
			continue;
		if (src == SYMSRC_DYNSYM && t->gnuhash)
			hashed = gnuhash_lookup(t, cls, name, out, &rank);
		if (src == SYMSRC_DYNSYM && !hashed && t->sysvhash)
			hashed = sysvhash_lookup(t, name, out, &rank);
		if (!hashed)
			linear_lookup(t, (enum sym_source)src, name, out,
				      &rank);
		if (rank < (1 << 30))
			return 0;
	}
	return -ENOENT;
}

/*
 * Names ending in @suffix.  In a hashed .dynsym, find them in the string
 * table (memmem) and confirm each through the hash: a handful of probes
 * instead of a walk over tens of thousands of symbols.  The linker may
 * store "mallctl" as the tail of "je_mallctl", so every tail of a hit
 * that still ends in @suffix is a candidate name.
 */
static int dynsym_each_suffix(struct elfobj *o, struct symtab *t,
			      const char *suffix,
			      int (*fn)(void *, const char *), void *arg)
{
	size_t slen = strlen(suffix) + 1; /* with the NUL */
	const char *p = t->strs, *end = t->strs + t->strs_len;

	while (p < end) {
		const char *hit = memmem(p, (size_t)(end - p), suffix, slen);
		const char *start, *c;

		if (!hit)
			break;
		/* Only tails with a short prefix: never walk back further. */
		start = hit;
		while (start > t->strs && start[-1] != '\0' &&
		       hit - start < ELF_SUFFIX_MAX_PREFIX)
			start--;
		for (c = start; c <= hit; c++) {
			struct elfsym s;
			int rc;

			if (elfobj_lookup(o, c, ELFSYM_DYNAMIC_ONLY, &s))
				continue;
			rc = fn(arg, s.name);
			if (rc)
				return rc;
		}
		p = hit + slen;
	}
	return 0;
}

int elfobj_each_suffix(struct elfobj *o, const char *suffix,
		       int (*fn)(void *arg, const char *name), void *arg)
{
	int src;

	for (src = 0; src < 3; src++) {
		struct symtab *t = get_tab(o, (enum sym_source)src);
		size_t i;
		int rc;

		if (!t)
			continue;
		if (src == SYMSRC_DYNSYM && (t->gnuhash || t->sysvhash)) {
			rc = dynsym_each_suffix(o, t, suffix, fn, arg);
			if (rc)
				return rc;
			continue;
		}
		for (i = 1; i < t->count; i++) {
			struct elfsym s;

			if (!sym_get(t, (enum sym_source)src, i, &s) ||
			    !str_ends_with(s.name, suffix) ||
			    strlen(s.name) - strlen(suffix) >
				    ELF_SUFFIX_MAX_PREFIX)
				continue;
			rc = fn(arg, s.name);
			if (rc)
				return rc;
		}
	}
	return 0;
}

unsigned int elfobj_sources(struct elfobj *o)
{
	unsigned int bits = 0;
	int src;

	for (src = 0; src < 3; src++)
		if (get_tab(o, (enum sym_source)src))
			bits |= 1u << src;
	return bits;
}

/* ---- address to symbol ------------------------------------------------ */

static int bind_rank(unsigned char bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

/* By address; at one address the best name first. */
static int cmp_addr_ent(const void *a, const void *b)
{
	const struct addr_ent *x = a, *y = b;

	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	if (bind_rank(x->bind) != bind_rank(y->bind))
		return bind_rank(x->bind) - bind_rank(y->bind);
	if (x->source != y->source)
		return x->source - y->source;
	return strcmp(x->name, y->name);
}

static int build_index(struct elfobj *o)
{
	size_t cap = 0, n = 0, i, j;
	struct addr_ent *v = NULL;
	int src, rc;

	for (src = 0; src < 3; src++) {
		struct symtab *t = get_tab(o, (enum sym_source)src);

		if (!t)
			continue;
		for (i = 1; i < t->count; i++) {
			struct elfsym s;

			if (!sym_get(t, (enum sym_source)src, i, &s))
				continue;
			if (s.type == STT_NOTYPE && !s.size)
				continue;
			rc = array_grow((void **)&v, &cap, n + 1, sizeof(*v));
			if (rc) {
				free(v);
				return rc;
			}
			v[n++] = (struct addr_ent){
				.value = s.value, .size = s.size,
				.name = s.name, .type = s.type,
				.bind = s.bind, .source = (unsigned char)src,
			};
		}
	}
	if (n)
		sort(v, n, sizeof(*v), cmp_addr_ent);
	/* One entry per address: the best name, which sorted first. */
	for (i = 0, j = 0; i < n; i++)
		if (j == 0 || v[i].value != v[j - 1].value)
			v[j++] = v[i];
	o->index = v;
	o->nindex = j;
	return 0;
}

/* *@at: the first entry of the address index above @vaddr. */
static int index_above(struct elfobj *o, uint64_t vaddr, size_t *at)
{
	size_t lo = 0, hi;
	int rc;

	if (!o->index_built) {
		rc = build_index(o);
		if (rc)
			return rc;
		o->index_built = true;
	}
	hi = o->nindex;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->index[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return 0;
}

static bool is_code(const struct addr_ent *e)
{
	return e->type == STT_FUNC || e->type == STT_GNU_IFUNC;
}

/* Another translation unit's exported function: where a span ends. */
static bool is_border(const struct addr_ent *e,
		      bool (*member)(const char *name, void *arg), void *arg)
{
	return is_code(e) && e->bind != STB_LOCAL &&
	       !(member && member(e->name, arg));
}

int elfobj_span(struct elfobj *o, uint64_t vaddr,
		bool (*member)(const char *name, void *arg), void *arg,
		uint64_t max, uint64_t *lo, uint64_t *hi)
{
	size_t first, k;
	int rc = index_above(o, vaddr, &first);

	if (rc)
		return rc;
	for (k = first; k < o->nindex && !is_border(&o->index[k], member, arg);
	     k++)
		if (o->index[k].value - vaddr > max)
			return -ERANGE;
	if (k == o->nindex)
		return -ERANGE;
	*hi = o->index[k].value;
	/* below vaddr's own entry */
	if (first > 0 && o->index[first - 1].value == vaddr)
		first--;
	for (k = first; k > 0 && !is_border(&o->index[k - 1], member, arg); k--)
		if (vaddr - o->index[k - 1].value > max)
			return -ERANGE;
	if (k == 0)
		return -ERANGE;
	*lo = o->index[k - 1].value + o->index[k - 1].size;
	/* A border that overlaps vaddr (sizes are the file's word). */
	if (*lo > vaddr || *hi <= vaddr || *hi - *lo > 2 * max)
		return -ERANGE;
	return 0;
}

int elfobj_addr_lookup(struct elfobj *o, uint64_t vaddr, struct elfsym *out)
{
	size_t lo, k;
	int rc = index_above(o, vaddr, &lo);

	if (rc)
		return rc;
	/* The last entry at or below vaddr (lo - 1), or, for a symbol
	 * nested in a bigger one, a few before it. */
	for (k = 0; k < 8 && lo > k; k++) {
		const struct addr_ent *e = &o->index[lo - 1 - k];

		if (vaddr == e->value || vaddr - e->value < e->size) {
			*out = (struct elfsym){
				.name = e->name, .value = e->value,
				.size = e->size, .type = e->type,
				.bind = e->bind,
				.source = (enum sym_source)e->source,
			};
			return 0;
		}
	}
	return -ENOENT;
}
