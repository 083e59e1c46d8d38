#include "symbols/symbolizer.h"

#include "common/fsio.h"
#include "common/util.h"
#include "symbols/demangle.h"
#include "symbols/objects.h"
#include "symbols/symbolizer_internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static uint64_t strtab_hash_of(const void *ctx, size_t i)
{
	const struct strtab *t = ctx;

	return hash_str(t->v[i]);
}

const char *symbolizer_intern(struct symbolizer *s, const char *str)
{
	struct strtab *t = &s->strs;
	uint64_t h = hash_str(str);
	size_t j;

	if (array_grow((void **)&t->v, &t->vcap, t->n + 1, sizeof(*t->v)) ||
	    hidx_need(&t->idx, t->n + 1, 1024, strtab_hash_of, t))
		return NULL;
	for (j = hidx_first(&t->idx, h); t->idx.slot[j];
	     j = hidx_next(&t->idx, j))
		if (!strcmp(t->v[t->idx.slot[j] - 1], str))
			return t->v[t->idx.slot[j] - 1];
	t->v[t->n] = strdup(str);
	if (!t->v[t->n])
		return NULL;
	t->idx.slot[j] = (uint32_t)++t->n;
	return t->v[t->n - 1];
}

/* ---- the arena of cached locations ----------------------------------- */

#define ARENA_CHUNK (1u << 20)

struct arena_chunk {
	struct arena_chunk *next;
	max_align_t data[];
};

/* @size bytes, aligned for any object, freed with the symbolizer. */
static void *arena_alloc(struct symbolizer *s, size_t size)
{
	size_t align = sizeof(max_align_t);
	char *p;

	size = (size + align - 1) & ~(align - 1);
	if (size > s->arena_left) {
		size_t len = size > ARENA_CHUNK ? size : ARENA_CHUNK;
		struct arena_chunk *c = malloc(sizeof(*c) + len);

		if (!c)
			return NULL;
		c->next = s->arena;
		s->arena = c;
		s->arena_next = (char *)c->data;
		s->arena_left = len;
	}
	p = s->arena_next;
	s->arena_next += size;
	s->arena_left -= size;
	return p;
}

static char *arena_strdup(struct symbolizer *s, const char *str)
{
	size_t len = strlen(str) + 1;
	char *p = arena_alloc(s, len);

	if (p)
		memcpy(p, str, len);
	return p;
}

static void arena_free(struct symbolizer *s)
{
	while (s->arena) {
		struct arena_chunk *next = s->arena->next;

		free(s->arena);
		s->arena = next;
	}
	s->arena_next = NULL;
	s->arena_left = 0;
}

static bool same_inode(int fd, const struct object *obj)
{
	struct stat st;

	if (fstat(fd, &st))
		return false;
	/* gperftools writes its maps with device 00:00: inode only. */
	if (!obj->dev_major && !obj->dev_minor)
		return st.st_ino == obj->inode;
	return st.st_ino == obj->inode && major(st.st_dev) == obj->dev_major &&
	       minor(st.st_dev) == obj->dev_minor;
}

struct api_probe {
	struct elfobj *elf;
	bool found;
};

/* "<P>mallctl" with "<P>mallctlnametomib" beside it, as detect.h says. */
static int probe_mallctl(void *arg, const char *name)
{
	struct api_probe *p = arg;
	struct elfsym sym;
	char buf[256];

	if (snprintf(buf, sizeof(buf), "%snametomib", name) >=
	    (int)sizeof(buf))
		return 0;
	if (!elfobj_lookup(p->elf, buf, 0, &sym)) {
		p->found = true;
		return 1;
	}
	return 0;
}

static bool defines_allocator(struct elfobj *elf)
{
	static const char *const apis[] = { "tc_malloc", "mi_malloc" };
	struct api_probe p = { .elf = elf };
	struct elfsym sym;
	size_t i;

	elfobj_each_suffix(elf, "mallctl", probe_mallctl, &p);
	for (i = 0; !p.found && i < ARRAY_SIZE(apis); i++)
		p.found = !elfobj_lookup(elf, apis[i], 0, &sym);
	return p.found;
}

static bool is_program(Dwfl_Module *mod)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	GElf_Ehdr eh;
	size_t i, n;

	if (!elf || !gelf_getehdr(elf, &eh))
		return false;
	if (eh.e_type == ET_EXEC)
		return true;
	if (elf_getphdrnum(elf, &n))
		return false;
	for (i = 0; i < n && i < 4096; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			return true;
	}
	return false;
}

static void report_module(struct symbolizer *s, struct module *m)
{
	struct object *obj = m->obj;
	const unsigned char *bits;
	GElf_Addr vaddr, bias;
	void **userdata;
	char *full;
	int fd, rc, n;
	Elf *elf;

	/* beneath the root, no symlink, a regular file, where the maps
	 * put it (-ESTALE: not the file that was mapped) */
	rc = object_open(s->os, obj);
	if (rc) {
		m->pub.err = rc;
		return;
	}
	/* libdwfl reads the same file, through a descriptor of its own */
	fd = fcntl(elfobj_fd(obj->elf), F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		m->pub.err = -errno;
		return;
	}
	/* Same machine: a file replaced since the dump gives wrong names. */
	if (!s->root && !same_inode(fd, obj))
		m->pub.mismatch = true;
	/* libdwfl maps it: a file its owner can cut would be SIGBUS */
	fd = s->op->steady(s->op, fd, STEADY_MAX);
	if (fd < 0) {
		m->pub.err = fd;
		return;
	}
	if (asprintf(&full, "%s%s", s->root ? s->root : "", obj->path) < 0) {
		close(fd);
		m->pub.err = -ENOMEM;
		return;
	}
	/* add_p_vaddr: the module's bias is exactly the object's. */
	m->mod = dwfl_report_elf(s->dwfl, m->pub.base, full, fd, obj->bias,
				 true);
	free(full);
	if (!m->mod) {
		close(fd);
		m->pub.err = -ENOEXEC;
		return;
	}
	/* for sym_find_debuginfo() */
	dwfl_module_info(m->mod, &userdata, NULL, NULL, NULL, NULL, NULL,
			 NULL);
	*userdata = m;
	elf = dwfl_module_getelf(m->mod, &bias);
	m->link = elf ? dwelf_elf_gnu_debuglink(elf, &m->link_crc) : NULL;
	m->pub.executable = is_program(m->mod);
	m->pub.allocator = defines_allocator(obj->elf);
	n = dwfl_module_build_id(m->mod, &bits, &vaddr);
	if (n > 0 && n <= 64)
		hex_encode(bits, (size_t)n, m->pub.build_id);
}

/*
 * libdwfl drops a module at dwfl_report_end() when a later one overlaps
 * it (two objects of a crafted dump given the same addresses): forget
 * our pointer to it before it is freed.
 */
static int on_removed(Dwfl_Module *mod, void *userdata, const char *name,
		      Dwarf_Addr base, void *arg)
{
	struct symbolizer *s = arg;
	size_t i;

	(void)userdata;
	(void)name;
	(void)base;
	for (i = 0; i < s->nmods; i++)
		if (s->mods[i].mod == mod) {
			s->mods[i].mod = NULL;
			s->mods[i].pub.err = -EEXIST;
		}
	return DWARF_CB_OK;
}

int symbolizer_new(const struct maps *m, const char *root,
		   struct symbolizer **out)
{
	struct opener *op;
	int rc = opener_local_new(root, &op);

	if (rc)
		return rc;
	rc = symbolizer_new_with(m, root, op, out);
	if (rc)
		opener_local_free(op);
	else
		(*out)->own_op = op;
	return rc;
}

int symbolizer_new_with(const struct maps *m, const char *root,
			struct opener *op, struct symbolizer **out)
{
	struct object_source src = { .pid = 0, .root_fd = -1, .opener = op };
	struct symbolizer *s = calloc(1, sizeof(*s));
	size_t i;
	int rc;

	if (!s)
		return -ENOMEM;
	s->maps = m;
	s->op = op;
	if (root && strcmp(root, "/")) {
		s->root = strdup(root);
		if (!s->root)
			goto nomem;
	}
	rc = objects_new(m, &src, &s->os);
	if (rc)
		goto fail;
	/* libdwfl opens nothing by itself: not the objects (each comes
	 * with its descriptor), not their debuginfo (debuginfo.c) */
	s->cb = (Dwfl_Callbacks){
		.find_elf = sym_find_elf,
		.find_debuginfo = sym_find_debuginfo,
		.section_address = dwfl_offline_section_address,
	};
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->dwfl)
		goto nomem;
	s->mods = calloc(s->os->n ? s->os->n : 1, sizeof(*s->mods));
	s->pubs = calloc(s->os->n ? s->os->n : 1, sizeof(*s->pubs));
	if (!s->mods || !s->pubs)
		goto nomem;
	dwfl_report_begin(s->dwfl);
	for (i = 0; i < s->os->n; i++) {
		struct object *obj = &s->os->v[i];
		struct module *md = &s->mods[s->nmods];
		const char *slash = strrchr(obj->path, '/');

		md->s = s;
		md->obj = obj;
		md->alt_fd = -1;
		md->pub.path = obj->path;
		md->pub.base = slash && slash[1] ? slash + 1 : obj->path;
		md->pub.start = obj->lo;
		md->pub.limit = obj->hi;
		md->pub.file_offset = obj->map_offset;
		s->nmods++;
		/* Data-only mappings (locale archives, fonts) are kept as
		 * objects for naming but never read. */
		if (obj->exec)
			report_module(s, md);
		else
			md->pub.err = -ENOEXEC;
	}
	dwfl_report_end(s->dwfl, on_removed, s);
	*out = s;
	return 0;
nomem:
	rc = -ENOMEM;
fail:
	symbolizer_free(s);
	return rc;
}

size_t symbolizer_modules(const struct symbolizer *s,
			  const struct dwsym_module **v)
{
	size_t i;

	for (i = 0; i < s->nmods; i++)
		s->pubs[i] = s->mods[i].pub;
	*v = s->pubs;
	return s->nmods;
}

void symbolizer_free(struct symbolizer *s)
{
	size_t i;

	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	for (i = 0; i < s->nmods; i++)
		sym_module_free(&s->mods[i]);
	objects_free(s->os);
	for (i = 0; i < s->strs.n; i++)
		free(s->strs.v[i]);
	free(s->strs.v);
	hidx_free(&s->strs.idx);
	free(s->locs);
	hidx_free(&s->cache);
	arena_free(s);
	free(s->mods);
	free(s->pubs);
	free(s->root);
	opener_local_free(s->own_op);
	free(s);
}

static int find_module(const struct symbolizer *s, uint64_t pc)
{
	struct object *obj = objects_find(s->os, pc);

	if (!obj)
		return -1;
	return (int)(obj - s->os->v);
}

/* ---- the cache ---------------------------------------------------------- */

static uint64_t cache_key(uint64_t pc, bool caller)
{
	return hash64(pc << 1 | (caller ? 1 : 0));
}

static uint64_t cache_hash_of(const void *ctx, size_t i)
{
	const struct symbolizer *s = ctx;

	return cache_key(s->locs[i]->pub.pc, s->locs[i]->caller);
}

/* The slot of (@pc, @caller): its location's, or the empty one where it
 * goes. */
static size_t cache_slot(const struct symbolizer *s, uint64_t pc,
			 bool caller)
{
	size_t j;

	for (j = hidx_first(&s->cache, cache_key(pc, caller));
	     s->cache.slot[j]; j = hidx_next(&s->cache, j)) {
		const struct cached_loc *l = s->locs[s->cache.slot[j] - 1];

		if (l->pub.pc == pc && l->caller == caller)
			break;
	}
	return j;
}

static int cache_put(struct symbolizer *s, struct cached_loc *l)
{
	if (array_grow((void **)&s->locs, &s->locs_cap, s->nlocs + 1,
		       sizeof(*s->locs)) ||
	    hidx_need(&s->cache, s->nlocs + 1, 4096, cache_hash_of, s))
		return -ENOMEM;
	s->locs[s->nlocs] = l;
	s->cache.slot[cache_slot(s, l->pub.pc, l->caller)] =
		(uint32_t)++s->nlocs;
	return 0;
}

static struct cached_loc *cache_get(struct symbolizer *s, uint64_t pc,
				    bool caller)
{
	size_t j;

	if (!s->cache.cap)
		return NULL;
	j = cache_slot(s, pc, caller);
	return s->cache.slot[j] ? s->locs[s->cache.slot[j] - 1] : NULL;
}

/* The location of @pc, made in the arena; NULL if out of memory. */
static struct cached_loc *lookup(struct symbolizer *s, uint64_t pc,
				 bool caller)
{
	uint64_t addr = caller && pc ? pc - 1 : pc;
	struct frames f = { .n = 0 };
	struct module *m = NULL;
	struct cached_loc *l;
	char buf[300];
	const char *name = NULL;
	int module = pc == SYM_PC_TRUNCATED ? -1 : find_module(s, addr);

	if (module >= 0) {
		m = &s->mods[module];
		m->pub.used++;
	}
	if (m && m->mod) {
		sym_dwarf_frames(s, m, addr, &f);
		if (f.n)
			m->pub.debuginfo = true;
		else
			name = sym_elf_symbol(s, m, addr);
	}
	if (!f.n) {
		f.v[0] = (struct dwsym_frame){ .name = name,
					       .resolved = name != NULL };
		if (!name && m) {
			const struct map_entry *e = maps_find(s->maps, addr);
			uint64_t off;

			m->pub.unnamed++;
			/* link-time address when the file was read, else
			 * the offset in the file */
			if (m->mod)
				off = addr - m->obj->bias;
			else if (e)
				off = addr - e->start + e->offset;
			else
				off = addr - m->obj->map_start +
				      m->obj->map_offset;
			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
				 m->pub.base, off);
			/* one per address: not worth interning */
			f.v[0].name = arena_strdup(s, buf);
		} else if (!name && pc == SYM_PC_TRUNCATED) {
			f.v[0].name = SYM_TRUNCATED_NAME;
			f.v[0].resolved = true;
		} else if (!name) {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, pc);
			f.v[0].name = arena_strdup(s, buf);
		}
		if (!f.v[0].name)
			return NULL;
		f.n = 1;
	}
	l = arena_alloc(s, sizeof(*l) + f.n * sizeof(l->frames[0]));
	if (!l)
		return NULL;
	memcpy(l->frames, f.v, f.n * sizeof(l->frames[0]));
	l->pub = (struct dwsym_loc){ .pc = pc, .module = module,
				     .frames = l->frames, .nframes = f.n };
	l->caller = caller;
	return l;
}

int symbolizer_lookup(struct symbolizer *s, uint64_t pc, bool caller,
		      const struct dwsym_loc **out)
{
	struct cached_loc *l = cache_get(s, pc, caller);

	if (!l) {
		l = lookup(s, pc, caller);
		if (!l || cache_put(s, l))
			return -ENOMEM;	/* the arena keeps it until the end */
	}
	*out = &l->pub;
	return 0;
}
