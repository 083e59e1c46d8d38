/*
 * Objects loaded after prof on, inside the target: the dlopen and
 * dlmopen hooks walk the new handle's link-map chain and swap each
 * object's GOT slots of the malloc family to their hooks, logged as
 * sampler_on() logs its own (slots.c), so that sampler_off() puts them
 * back.  Freestanding, like records.c.
 */
#include "sampler/image/records.h"

#include <elf.h>

static bool read_self(void *to, uint64_t addr, uint64_t len)
{
	return copy_self(to, addr, len) == len;
}

/* The loader's link_map, the part every libc shares (<link.h>). */
struct lmap {
	uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};

/* What swap_new() needs of an object: where it is, and its RELRO. */
struct obj {
	uint64_t bias, lo, hi, relro_lo, relro_hi;
	const Elf64_Sym *sym;
	const char *str;
	uint64_t strsz;
};

static bool same_name(const char *a, const char *b)
{
	uint64_t i;

	for (i = 0; i < SAMPLER_NAME_MAX; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return false;
}

/* A dynamic entry's address: glibc relocates them in place, musl does
 * not; an object's own addresses are never below its bias. */
static uint64_t dyn_ptr(const struct obj *o, uint64_t p)
{
	return p < o->bias ? p + o->bias : p;
}

/* The span and RELRO of the object at bias @l->l_addr, from its program
 * headers (read safely: a bias with no ELF header behind it is skipped). */
static bool obj_of(const struct lmap *l, struct obj *o)
{
	Elf64_Ehdr e;
	Elf64_Phdr ph[32];
	uint64_t i, ps = LOAD(sampler_ctl.page_size);

	o->bias = l->l_addr;
	o->lo = ~0ull;
	o->hi = o->relro_lo = o->relro_hi = 0;
	if (!o->bias || !ps ||
	    !read_self(&e, o->bias, sizeof(e)) || e.e_ident[0] != 0x7f ||
	    e.e_ident[1] != 'E' || e.e_ident[2] != 'L' ||
	    e.e_ident[3] != 'F' || e.e_phentsize != sizeof(Elf64_Phdr) ||
	    !e.e_phnum || e.e_phnum > 32 ||
	    !read_self(ph, o->bias + e.e_phoff, e.e_phnum * sizeof(ph[0])))
		return false;
	for (i = 0; i < e.e_phnum; i++) {
		uint64_t a = o->bias + ph[i].p_vaddr, z = a + ph[i].p_memsz;

		if (ph[i].p_type == PT_LOAD) {
			if (a < o->lo)
				o->lo = a;
			if (z > o->hi)
				o->hi = z;
		} else if (ph[i].p_type == PT_GNU_RELRO) {
			o->relro_lo = a & ~(ps - 1);
			o->relro_hi = z & ~(ps - 1); /* the loader rounds down */
		}
	}
	return o->lo < o->hi;
}

/* One relocation of @o: swap its slot to the hook if it reaches the
 * function the process binds, or the object's own lazy stub. */
static uint64_t swap_rela(const struct obj *o, const Elf64_Rela *r)
{
	struct sampler_ctl *c = &sampler_ctl;
	uint32_t type = ELF64_R_TYPE(r->r_info), si = ELF64_R_SYM(r->r_info);
	struct sampler_slot s;
	const char *name;
	uint64_t fn, cur, ps = LOAD(c->page_size);

	if (type != SAMPLER_R_JUMP_SLOT && type != SAMPLER_R_GLOB_DAT)
		return 0;
	if (!si || o->sym[si].st_name >= o->strsz)
		return 0;
	name = o->str + o->sym[si].st_name;
	for (fn = 0; fn < SAMPLER_NFN; fn++)
		if (c->hook[fn] && same_name(name, c->names[fn]))
			break;
	if (fn == SAMPLER_NFN)
		return 0;
	/* field by field: an aggregate zeroing may become a memset call */
	s.slot = o->bias + r->r_offset;
	s.page = s.page_len = s.prot = s.result = 0;
	if ((s.slot & 7) || s.slot < o->lo || s.slot + 8 > o->hi)
		return 0;
	cur = LOAD(*(uint64_t *)(uintptr_t)s.slot);
	if (cur != c->orig[fn] &&
	    !(type == SAMPLER_R_JUMP_SLOT && cur >= o->lo && cur < o->hi))
		return 0;
	if (s.slot >= o->relro_lo && s.slot < o->relro_hi) {
		if (!LOAD(c->can_mprotect))
			return 0;
		s.page = s.slot & ~(ps - 1);
		s.page_len = ps;
		s.prot = 1; /* PROT_READ, as the loader left RELRO */
	}
	s.from = cur;
	s.to = c->hook[fn];
	return log_and_swap(&s) == SAMPLER_SLOT_SWAPPED;
}

/* Every GOT slot of the object @l that reaches the malloc family. */
static void swap_object(const struct lmap *l)
{
	const Elf64_Dyn *d = (const Elf64_Dyn *)(uintptr_t)l->l_ld;
	uint64_t rela = 0, relasz = 0, jmprel = 0, pltsz = 0, i, n = 0;
	struct obj o;

	if (!d || !obj_of(l, &o))
		return;
	o.sym = NULL;
	o.str = NULL;
	o.strsz = 0;
	for (i = 0; d[i].d_tag != DT_NULL && i < 256; i++) {
		uint64_t v = d[i].d_un.d_val;

		switch (d[i].d_tag) {
		case DT_SYMTAB:
			o.sym = (const Elf64_Sym *)(uintptr_t)dyn_ptr(&o, v);
			break;
		case DT_STRTAB:
			o.str = (const char *)(uintptr_t)dyn_ptr(&o, v);
			break;
		case DT_STRSZ:
			o.strsz = v;
			break;
		case DT_RELA:
			rela = dyn_ptr(&o, v);
			break;
		case DT_RELASZ:
			relasz = v;
			break;
		case DT_JMPREL:
			jmprel = dyn_ptr(&o, v);
			break;
		case DT_PLTRELSZ:
			pltsz = v;
			break;
		}
	}
	if (!o.sym || !o.str)
		return;
	for (i = 0; rela && i < relasz / sizeof(Elf64_Rela); i++)
		n += swap_rela(&o, (const Elf64_Rela *)(uintptr_t)rela + i);
	for (i = 0; jmprel && i < pltsz / sizeof(Elf64_Rela); i++)
		n += swap_rela(&o, (const Elf64_Rela *)(uintptr_t)jmprel + i);
	ADD(sampler_ctl.dlopened, n);
}

/*
 * After a dlopen: every object on the new handle's chain (the library
 * and what it brought along; objects swapped before hold hooks already
 * and are passed over slot by slot).  Only while sampling is on, and
 * counted in busy so that sampler_off() waits for it.
 */
static void swap_new(uint64_t handle)
{
	struct sampler_ctl *c = &sampler_ctl;
	const struct lmap *l = (const struct lmap *)(uintptr_t)handle;
	uint64_t i;

	if (!l)
		return;
	__atomic_fetch_add(&c->busy, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->active, __ATOMIC_SEQ_CST)) {
		for (i = 0; l->l_prev && i < 65536; i++)
			l = (const struct lmap *)(uintptr_t)l->l_prev;
		for (i = 0; l && i < 65536; i++) {
			swap_object(l);
			l = (const struct lmap *)(uintptr_t)l->l_next;
		}
	}
	__atomic_fetch_sub(&c->busy, 1, __ATOMIC_SEQ_CST);
}

typedef uint64_t (*dlopen_fn)(uint64_t, uint64_t, uint64_t);

uint64_t sampler_dlopen(uint64_t file, uint64_t flags)
{
	uint64_t h = ((dlopen_fn)orig(SAMPLER_DLOPEN))(file, flags, 0);

	swap_new(h);
	return h;
}

uint64_t sampler_dlmopen(uint64_t lmid, uint64_t file, uint64_t flags)
{
	uint64_t h = ((dlopen_fn)orig(SAMPLER_DLMOPEN))(lmid, file, flags);

	swap_new(h);
	return h;
}
