/*
 * Language runtimes by their symbols, and what their memory says of
 * their heaps (symbols/runtime.h).  Nothing here calls into the target
 * or stops it: its memory is read (process_vm_readv), and every byte of
 * it is checked before it is believed.
 */
#include "symbols/runtime.h"

#include "proc/procfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A runtime found by exported symbols, both in one object. */
static const struct {
	enum runtime_kind kind;
	const char *sym[2];
} by_symbols[] = {
	{ RUNTIME_JVM, { "JNI_CreateJavaVM", "JNI_GetCreatedJavaVMs" } },
	{ RUNTIME_DOTNET, { "coreclr_initialize", "coreclr_shutdown" } },
	{ RUNTIME_NODE, { "_ZN4node5StartEiPPc", "napi_create_object" } },
	{ RUNTIME_CPYTHON, { "_PyRuntime", "Py_InitializeEx" } },
};

/*
 * The layouts of Go's consistent heap statistics memsnap knows, by
 * version: the number of size classes, which sizes every generation's
 * arrays (src/runtime/mstats.go: heapStatsDelta is six int64s of memory,
 * three counters, the small allocations by class, two counters, the
 * small frees by class).  Checked against go1.19's runtime.ReadMemStats
 * (tests/integration/test_explain_runtimes.c).
 */
static const struct {
	const char *version;	/* "go1.19": that release, any patch */
	unsigned int nclasses;
} go_layouts[] = {
	{ "go1.19", 68 },
};

#define GO_GENERATIONS 3
#define GO_CLASSES_MAX 128
#define GO_VERSION_MAX 32

static void basename_of(const char *path, char *out, size_t size)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	snprintf(out, size, "%s", b ? b + 1 : path ? path : "?");
}

/* Int64 word @i of @p (little-endian, as every Go target memsnap
 * reaches is). */
static int64_t word(const unsigned char *p, size_t i)
{
	int64_t v;

	memcpy(&v, p + i * 8, sizeof(v));
	return v;
}

static uint64_t pos(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}

bool runtime_go_stats(const unsigned char *buf, size_t n, unsigned int nclasses,
		      const uint16_t *sizes, struct runtime_stats *st)
{
	size_t stride = 11 + 2 * (size_t)nclasses, g, c;
	int64_t committed = 0, released = 0, heap = 0, stacks = 0, bufs = 0,
		bits = 0;
	uint64_t alloc = 0, freed = 0;

	if (!nclasses || nclasses > GO_CLASSES_MAX ||
	    n < GO_GENERATIONS * stride * 8)
		return false;
	for (g = 0; g < GO_GENERATIONS; g++) {
		const unsigned char *d = buf + g * stride * 8;

		committed += word(d, 0);
		released += word(d, 1);
		heap += word(d, 2);
		stacks += word(d, 3);
		bufs += word(d, 4);
		bits += word(d, 5);
		alloc += (uint64_t)word(d, 7);	/* largeAlloc */
		freed += (uint64_t)word(d, 9 + nclasses); /* largeFree */
		for (c = 0; c < nclasses; c++) {
			alloc += (uint64_t)word(d, 9 + c) * sizes[c];
			freed += (uint64_t)word(d, 11 + nclasses + c) * sizes[c];
		}
	}
	/* deltas of a running program, read while it writes them: a sum
	 * may be off for a moment, never negative in a sound one */
	if (committed < 0 || heap < 0 || stacks < 0 || released < 0 ||
	    heap > committed)
		return false;
	st->have_go = true;
	st->go_committed = (uint64_t)committed;
	st->go_inuse = (uint64_t)heap;
	st->go_stacks = (uint64_t)stacks;
	st->go_released = (uint64_t)released;
	st->go_idle = pos(committed - stacks - bufs - bits - heap);
	st->go_alloc = alloc > freed ? alloc - freed : 0;
	if (st->go_alloc > st->go_inuse)
		st->go_alloc = st->go_inuse;
	return true;
}

/* Go's version, from the .go.buildinfo section of @exe (read in the
 * target's memory): "\xff Go buildinf:", pointer size, flags; since
 * go1.18 (flags & 2) the version follows inline at 32, its length a
 * uvarint. */
static void go_version(pid_t pid, struct objects *os, struct object *exe,
		       struct runtime_info *rt)
{
	unsigned char b[32 + 1 + GO_VERSION_MAX];
	uint64_t vaddr, size;
	size_t len, got;

	if (object_open(os, exe) ||
	    elfobj_section(exe->elf, ".go.buildinfo", &vaddr, &size) ||
	    size < 34)
		return;
	got = size < sizeof(b) ? (size_t)size : sizeof(b);
	if (proc_read_mem(pid, exe->bias + vaddr, b, got) ||
	    memcmp(b, "\xff Go buildinf:", 14) || !(b[15] & 2))
		return;
	len = b[32];	/* one byte of uvarint: under 128 */
	if (len < 3 || len > GO_VERSION_MAX || len >= sizeof(rt->version) ||
	    33 + len > got)
		return;
	memcpy(rt->version, b + 33, len);
	rt->version[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (rt->version[i] < 0x21 || rt->version[i] > 0x7e)
			rt->version[i] = '?';
}

/* runtime.memstats where @rt->version's layout is known. */
static void go_memstats(pid_t pid, struct objects *os, struct object *exe,
			struct runtime_info *rt)
{
	uint16_t sizes[GO_CLASSES_MAX];
	struct symbol ms, cs;
	unsigned char *buf;
	unsigned int nclasses = 0;
	size_t i, n, vlen;

	for (i = 0; i < sizeof(go_layouts) / sizeof(go_layouts[0]); i++) {
		vlen = strlen(go_layouts[i].version);
		if (!strncmp(rt->version, go_layouts[i].version, vlen) &&
		    (rt->version[vlen] == '.' || !rt->version[vlen]))
			nclasses = go_layouts[i].nclasses;
	}
	if (!nclasses) {
		snprintf(rt->why, sizeof(rt->why),
			 "the layout of runtime.memstats in %s is not one memsnap knows (go1.19)",
			 rt->version[0] ? rt->version : "this Go");
		return;
	}
	if (object_lookup(os, exe, "runtime.memstats", 0, &ms) ||
	    object_lookup(os, exe, "runtime.class_to_size", 0, &cs) ||
	    cs.size != nclasses * sizeof(uint16_t)) {
		snprintf(rt->why, sizeof(rt->why),
			 "the executable names no runtime.memstats (stripped)");
		return;
	}
	n = GO_GENERATIONS * (11 + 2 * (size_t)nclasses) * 8;
	buf = malloc(n);
	if (!buf)
		return;
	if (proc_read_mem(pid, cs.addr, sizes, nclasses * sizeof(uint16_t)) ||
	    proc_read_mem(pid, ms.addr, buf, n) ||
	    !runtime_go_stats(buf, n, nclasses, sizes, &rt->st))
		snprintf(rt->why, sizeof(rt->why),
			 "runtime.memstats did not read as statistics");
	free(buf);
}

static void find_go(pid_t pid, struct objects *os, struct runtime_info *rt)
{
	const struct proc_auxv *auxv;
	struct object *exe;
	struct symbol s;
	uint64_t vaddr, size;

	if (objects_auxv(os, &auxv) || !(exe = objects_find(os, auxv->phdr)))
		return;
	if (object_open(os, exe))
		return;
	if (elfobj_section(exe->elf, ".go.buildinfo", &vaddr, &size) &&
	    object_lookup(os, exe, "runtime.buildVersion", 0, &s))
		return;
	rt->kind = RUNTIME_GO;
	basename_of(exe->path, rt->object, sizeof(rt->object));
	go_version(pid, os, exe, rt);
	go_memstats(pid, os, exe, rt);
}

/* CPython's version: Py_Version (3.11: PY_VERSION_HEX), else what the
 * object's name says ("libpython3.9.so.1.0", "python3.9"). */
static void python_version(pid_t pid, struct objects *os, struct object *obj,
			   struct runtime_info *rt)
{
	const char *p = strstr(rt->object, "python");
	struct symbol s;
	uint32_t hex;

	if (!object_lookup(os, obj, "Py_Version", ELFSYM_DYNAMIC_ONLY, &s) &&
	    !proc_read_mem(pid, s.addr, &hex, sizeof(hex)) &&
	    hex >> 24 == 3) {
		snprintf(rt->version, sizeof(rt->version), "%u.%u.%u",
			 hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
		return;
	}
	if (p && p[6] == '3' && p[7] == '.') {
		size_t n = strspn(p + 8, "0123456789");

		if (n && n < 3)
			snprintf(rt->version, sizeof(rt->version), "3.%.*s",
				 (int)n, p + 8);
	}
}

/* pymalloc's arenas: 256 KiB each before 3.10, 1 MiB since on 64-bit
 * (Objects/obmalloc.c, ARENA_BITS).  The count is a static of
 * obmalloc.c, named only in a build's full symbol table. */
static void python_arenas(pid_t pid, struct objects *os, struct object *obj,
			  struct runtime_info *rt)
{
	unsigned int minor = 0;
	struct symbol s;
	uint64_t n;

	if (sscanf(rt->version, "3.%u", &minor) != 1) {
		snprintf(rt->why, sizeof(rt->why),
			 "its version, which sizes pymalloc's arenas, is unknown");
		return;
	}
	if (object_lookup(os, obj, "narenas_currently_allocated", 0, &s) ||
	    s.size != sizeof(n)) {
		snprintf(rt->why, sizeof(rt->why),
			 "pymalloc's count of arenas is a static its symbol tables do not name");
		return;
	}
	if (proc_read_mem(pid, s.addr, &n, sizeof(n)) || n > (1u << 24))
		return;
	rt->st.have_arenas = true;
	rt->st.arenas = n;
	rt->st.arena_size = minor >= 10 ? 1u << 20 : 256u << 10;
}

int runtime_detect(pid_t pid, struct objects *os, struct runtime_info *rt)
{
	size_t i, k;

	memset(rt, 0, sizeof(*rt));
	for (k = 0; k < sizeof(by_symbols) / sizeof(by_symbols[0]); k++) {
		for (i = 0; i < os->n; i++) {
			struct object *obj = &os->v[i];
			struct symbol s;

			if (!obj->exec ||
			    object_lookup(os, obj, by_symbols[k].sym[0],
					  ELFSYM_DYNAMIC_ONLY, &s) ||
			    object_lookup(os, obj, by_symbols[k].sym[1],
					  ELFSYM_DYNAMIC_ONLY, &s))
				continue;
			rt->kind = by_symbols[k].kind;
			basename_of(obj->path, rt->object, sizeof(rt->object));
			if (rt->kind == RUNTIME_CPYTHON) {
				python_version(pid, os, obj, rt);
				python_arenas(pid, os, obj, rt);
			}
			return 0;
		}
	}
	find_go(pid, os, rt);
	return 0;
}
