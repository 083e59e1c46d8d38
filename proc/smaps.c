/*
 * /proc/PID/smaps, status, task/TID/syscall and the THP mode, parsed
 * from text (proc/smaps.h).  Nothing here reads a file: proc/memory.c
 * does, so that the tests can give these any bytes.
 */
#include "proc/smaps.h"

#include "proc/maps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A field line is short: "AnonHugePages:      12345 kB". */
#define FIELD_KEY_MAX 32
/* 2^64 / 1024: a larger number of kB is no size. */
#define KB_MAX (UINT64_MAX >> 10)
/* The mappings one smaps may hold: vm.max_map_count is 65530 by
 * default, and can be raised; this is far past any real one. */
#define SMAPS_MAX_MAPPINGS (4u << 20)

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Digits at [p, end) (leading blanks skipped): 0 or -EINVAL. */
static int parse_num(const char **pp, const char *end, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int digits = 0;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (p < end && *p >= '0' && *p <= '9') {
		unsigned int d = (unsigned int)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		digits++;
		p++;
	}
	if (!digits)
		return -EINVAL;
	*pp = p;
	*out = v;
	return 0;
}

/*
 * "Key:   123 kB" at [p, end): the key (at most FIELD_KEY_MAX bytes,
 * letters, digits and '_') into @key, the amount in bytes into *@bytes.
 * 0, or -EINVAL for a line that is not one ("VmFlags: rd wr" is not).
 */
static int parse_kb_field(const char *p, const char *end, char *key,
			  uint64_t *bytes)
{
	const char *colon = memchr(p, ':', (size_t)(end - p));
	size_t klen, i;
	uint64_t kb;

	if (!colon || colon == p || (size_t)(colon - p) >= FIELD_KEY_MAX)
		return -EINVAL;
	klen = (size_t)(colon - p);
	for (i = 0; i < klen; i++) {
		char c = p[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return -EINVAL;
	}
	memcpy(key, p, klen);
	key[klen] = '\0';
	p = colon + 1;
	if (parse_num(&p, end, &kb) || kb > KB_MAX)
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if ((size_t)(end - p) < 2 || memcmp(p, "kB", 2))
		return -EINVAL;
	p += 2;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	if (p != end)
		return -EINVAL;
	*bytes = kb << 10;
	return 0;
}

static bool starts(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && !memcmp(p, prefix, k);
}

/* What a mapping is, from its header line. */
static enum smap_kind classify(const struct map_entry *e, const char *path,
			       size_t plen)
{
	if (!plen)
		return e->shared ? SMAP_SHMEM : SMAP_ANON;
	if (path[0] == '[') {
		if (plen == 6 && !memcmp(path, "[heap]", 6))
			return SMAP_HEAP;
		if (plen == 7 && !memcmp(path, "[stack]", 7))
			return SMAP_STACK;
		if (starts(path, plen, "[anon_shmem:"))
			return SMAP_SHMEM;
		if (starts(path, plen, "[anon:"))
			return e->shared ? SMAP_SHMEM : SMAP_ANON;
		return SMAP_OTHER;
	}
	if (starts(path, plen, "/dev/shm/") || starts(path, plen, "/memfd:") ||
	    starts(path, plen, "/SYSV") || starts(path, plen, "/dev/zero"))
		return SMAP_SHMEM;
	return SMAP_FILE;
}

/* Keep the kernel's name of @path (@plen bytes) in @m's names, if it
 * is one worth showing: what names anonymous or shared memory. */
static uint32_t keep_name(struct proc_memory *m, enum smap_kind kind,
			  const char *path, size_t plen)
{
	size_t n = plen < SMAP_NAME_MAX ? plen : SMAP_NAME_MAX, off, i;

	if (!plen || (kind != SMAP_ANON && kind != SMAP_SHMEM) ||
	    !(path[0] == '[' || path[0] == '/'))
		return 0;
	if (m->names_len + n + 1 > m->names_cap) {
		size_t cap = m->names_cap ? m->names_cap * 2 : 4096;
		char *nb;

		while (cap < m->names_len + n + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return 0;
		nb = realloc(m->names, cap);
		if (!nb)
			return 0;	/* a name is a nicety */
		m->names = nb;
		m->names_cap = cap;
	}
	off = m->names_len;
	/* the target's bytes: no control character kept */
	for (i = 0; i < n; i++)
		m->names[off + i] = (unsigned char)path[i] < 0x20 ||
					    path[i] == 0x7f ? '?' : path[i];
	m->names[off + n] = '\0';
	m->names_len += n + 1;
	return (uint32_t)off + 1;
}

const char *smap_name(const struct proc_memory *m, const struct smap *s)
{
	return s->name && s->name <= m->names_len ? m->names + s->name - 1
						  : NULL;
}

static int add_mapping(struct proc_memory *m, const struct map_entry *e,
		       enum smap_kind kind)
{
	struct smap *s;

	if (m->n >= SMAPS_MAX_MAPPINGS)
		return -E2BIG;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct smap *nv = realloc(m->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		m->v = nv;
		m->cap = cap;
	}
	s = &m->v[m->n++];
	memset(s, 0, sizeof(*s));
	s->start = e->start;
	s->end = e->end;
	s->inode = e->inode;
	s->dev_major = e->dev_major;
	s->dev_minor = e->dev_minor;
	s->prot = e->prot;
	s->shared = e->shared;
	s->kind = kind;
	return 0;
}

int smaps_parse(const char *text, size_t len, struct proc_memory *m)
{
	const char *p = text, *end = text + len;
	struct smap *cur = NULL;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char key[FIELD_KEY_MAX];
		struct map_entry e;
		const char *path;
		size_t plen;
		uint64_t v;
		int rc;

		if (!eol)
			eol = end;
		if (eol == p) {
			p = eol + 1;
			continue;
		}
		if (!parse_kb_field(p, eol, key, &v)) {
			if (!cur)
				m->malformed++;
			else if (!strcmp(key, "Rss"))
				cur->rss = v;
			else if (!strcmp(key, "Pss"))
				cur->pss = v;
			else if (!strcmp(key, "Anonymous"))
				cur->anon = v;
			else if (!strcmp(key, "AnonHugePages"))
				cur->anon_huge = v;
			else if (!strcmp(key, "Swap"))
				cur->swap = v;
		} else if (!maps_parse_line(p, (size_t)(eol - p), &e, &path,
					    &plen)) {
			enum smap_kind kind = classify(&e, path, plen);

			rc = add_mapping(m, &e, kind);
			if (rc == -ENOMEM)
				return rc;
			if (rc)
				break;	/* -E2BIG: what was read stands */
			cur = &m->v[m->n - 1];
			cur->name = keep_name(m, kind, path, plen);
		} else if (!starts(p, (size_t)(eol - p), "VmFlags:") &&
			   !starts(p, (size_t)(eol - p), "THPeligible:") &&
			   !starts(p, (size_t)(eol - p), "ProtectionKey:")) {
			m->malformed++;
		}
		p = eol + 1;
	}
	return 0;
}

int proc_mem_status_parse(const char *text, size_t len,
			  struct proc_mem_status *st)
{
	static const struct {
		const char *key;
		size_t off;
	} kb[] = {
		{ "VmRSS", offsetof(struct proc_mem_status, vm_rss) },
		{ "RssAnon", offsetof(struct proc_mem_status, rss_anon) },
		{ "RssFile", offsetof(struct proc_mem_status, rss_file) },
		{ "RssShmem", offsetof(struct proc_mem_status, rss_shmem) },
		{ "VmSwap", offsetof(struct proc_mem_status, vm_swap) },
		{ "VmHWM", offsetof(struct proc_mem_status, vm_hwm) },
		{ "VmSize", offsetof(struct proc_mem_status, vm_size) },
	};
	const char *p = text, *end = text + len;
	unsigned int seen = 0;
	size_t i;

	memset(st, 0, sizeof(*st));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char key[FIELD_KEY_MAX];
		uint64_t v;

		if (!eol)
			eol = end;
		if (starts(p, (size_t)(eol - p), "Threads:")) {
			const char *q = p + 8;

			if (!parse_num(&q, eol, &v) && v <= 1u << 22)
				st->threads = (unsigned long)v;
		} else if (!parse_kb_field(p, eol, key, &v)) {
			for (i = 0; i < sizeof(kb) / sizeof(kb[0]); i++)
				if (!strcmp(key, kb[i].key)) {
					*(uint64_t *)((char *)st + kb[i].off) = v;
					seen |= 1u << i;
				}
		}
		p = eol + 1;
	}
	st->have_rss = seen & 1u;
	st->have_split = (seen & 0xeu) == 0xeu;
	return st->have_rss ? 0 : -ENOENT;
}

/* "0x7ffd4c1ef8d8" at *@pp, then one blank or the end. */
static int parse_hex_word(const char **pp, const char *end, uint64_t *out)
{
	const char *p = *pp;
	uint64_t v = 0;
	int digits = 0;

	if (end - p < 3 || p[0] != '0' || p[1] != 'x')
		return -EINVAL;
	for (p += 2; p < end && *p != ' ' && *p != '\n'; p++) {
		char c = *p;
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else
			return -EINVAL;
		if (++digits > 16)
			return -EINVAL;
		v = v << 4 | d;
	}
	if (!digits)
		return -EINVAL;
	if (p < end && *p == ' ')
		p++;
	*pp = p;
	*out = v;
	return 0;
}

int proc_syscall_sp(const char *text, size_t len, uint64_t *sp)
{
	const char *p = text, *end = text + len;
	uint64_t w[8], nr;
	size_t n = 0;
	bool minus = false;

	while (end > p && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	if ((size_t)(end - p) == 7 && !memcmp(p, "running", 7))
		return -EAGAIN;
	if (p < end && *p == '-') {
		minus = true;
		p++;
	}
	if (parse_num(&p, end, &nr))
		return -EINVAL;
	if (p >= end || *p != ' ')
		return -EINVAL;
	p++;
	while (p < end && n < 8) {
		if (parse_hex_word(&p, end, &w[n]))
			return -EINVAL;
		n++;
	}
	if (p != end)
		return -EINVAL;
	/* "-1 sp pc", or "nr a0 .. a5 sp pc" */
	if (minus ? nr != 1 || n != 2 : n != 8)
		return -EINVAL;
	*sp = w[n - 2];
	return 0;
}

int smaps_rollup_field(const char *text, size_t len, const char *key,
		       uint64_t *bytes)
{
	const char *p = text, *end = text + len;
	size_t klen = strlen(key);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		unsigned long long kb = 0;
		size_t i = klen;

		if (n > i + 1 && !memcmp(p, key, i) && p[i++] == ':') {
			while (i < n && p[i] == ' ')
				i++;
			if (i == n || p[i] < '0' || p[i] > '9')
				return -EINVAL;
			for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
				if (kb > (UINT64_MAX >> 10) / 10)
					return -EINVAL;
				kb = kb * 10 + (unsigned long long)(p[i] - '0');
			}
			if (kb > UINT64_MAX >> 10 || n - i != 3 ||
			    memcmp(p + i, " kB", 3))
				return -EINVAL;
			*bytes = kb << 10;
			return 0;
		}
		p += n + 1;
	}
	return -ENOENT;
}

uint64_t huge_page_parse(const char *text)
{
	char *end;
	unsigned long long v;

	if (*text < '1' || *text > '9')
		return 0;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || (*end && *end != '\n'))
		return 0;
	/* a power of two, 64 KiB to 16 GiB (arm64's PMD with 64 KiB
	 * pages is 512 MiB) */
	if (v < (64ull << 10) || v > (16ull << 30) || (v & (v - 1)))
		return 0;
	return v;
}

void thp_mode_parse(const char *text, size_t len, char *buf, size_t size)
{
	const char *open = memchr(text, '[', len), *close;
	size_t n;

	if (size)
		buf[0] = '\0';
	if (!open || !size)
		return;
	close = memchr(open, ']', len - (size_t)(open - text));
	if (!close)
		return;
	n = (size_t)(close - open - 1);
	if (!n || n >= size)
		return;
	for (size_t i = 0; i < n; i++)
		if (open[1 + i] < 'a' || open[1 + i] > 'z')
			return;
	memcpy(buf, open + 1, n);
	buf[n] = '\0';
}

struct smap *proc_memory_find(struct proc_memory *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	/* smaps lists mappings in address order */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

bool proc_memory_mark_sp(struct proc_memory *m, uint64_t sp)
{
	struct smap *s = proc_memory_find(m, sp);

	/* no thread runs on memory it cannot write */
	if (!s || (s->kind != SMAP_ANON && s->kind != SMAP_STACK) ||
	    !(s->prot & MAP_PROT_WRITE))
		return false;
	s->sp_in = true;
	return true;
}

enum smap_owner smap_owner_of(const struct smap *s,
			      const struct smap_claim *claims, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s->start < claims[i].hi && claims[i].lo < s->end)
			return claims[i].owner;
	return SMAP_PROGRAM;
}

bool smap_is_stack(const struct smap *s, enum smap_owner owner)
{
	if (s->kind == SMAP_STACK)
		return true;
	if (s->kind != SMAP_ANON || s->shared || owner == SMAP_MEMSNAP)
		return false;
	return s->vouched || (s->sp_in && owner == SMAP_PROGRAM);
}

uint64_t smap_stack_anon(const struct smap *s)
{
	uint64_t anon = s->anon < s->rss ? s->anon : s->rss;

	if (s->stack_bounded && !s->stack_unbounded && s->stack_anon < anon)
		return s->stack_anon;
	return anon;
}

void smaps_total(const struct proc_memory *m, const struct smap_claim *claims,
		 size_t nclaims, struct smaps_totals *t)
{
	size_t i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < m->n; i++) {
		const struct smap *s = &m->v[i];
		uint64_t anon = s->anon < s->rss ? s->anon : s->rss;
		uint64_t rest = s->rss - anon;
		enum smap_owner owner = nclaims ? smap_owner_of(s, claims,
								nclaims)
						: SMAP_PROGRAM;
		bool stack = smap_is_stack(s, owner);
		uint64_t st = stack ? smap_stack_anon(s) : 0, own = anon - st;

		t->rss = sat_add(t->rss, s->rss);
		if (s->kind != SMAP_SHMEM)
			t->anon = sat_add(t->anon, anon);
		t->anon_huge = sat_add(t->anon_huge, s->anon_huge);
		t->swap = sat_add(t->swap, s->swap);
		switch (s->kind) {
		case SMAP_HEAP:
		case SMAP_ANON:
			/* what is not stack of it (all, or none but what
			 * is above a bounded stack) */
			t->file = sat_add(t->file, rest);
			if (owner == SMAP_MEMSNAP) {
				t->memsnap = sat_add(t->memsnap, own);
				break;
			}
			if (owner == SMAP_RUNTIME) {
				t->runtime = sat_add(t->runtime, own);
				break;
			}
			if (s->kind == SMAP_HEAP || s->arena_heap)
				t->anon_arenas = sat_add(t->anon_arenas, own);
			if (s->kind == SMAP_HEAP)
				t->anon_heap = sat_add(t->anon_heap, own);
			t->anon_private = sat_add(t->anon_private, own);
			t->anon_huge_private =
				sat_add(t->anon_huge_private,
					s->anon_huge < own ? s->anon_huge
							   : own);
			break;
		case SMAP_STACK:
			t->file = sat_add(t->file, rest);
			break;
		case SMAP_SHMEM:
			/* shared anonymous pages are shmem's, not Anonymous */
			t->shmem = sat_add(t->shmem, s->rss);
			t->shmem_pss = sat_add(t->shmem_pss,
					       s->pss < s->rss ? s->pss
							       : s->rss);
			break;
		case SMAP_FILE:
		case SMAP_OTHER:
			t->anon_in_files = sat_add(t->anon_in_files, anon);
			t->file = sat_add(t->file, rest);
			break;
		}
		if (stack) {
			t->stacks = sat_add(t->stacks, st);
			t->nstacks++;
			if (st > t->largest_stack)
				t->largest_stack = st;
		}
	}
}

const struct smap *smaps_largest(const struct proc_memory *m,
				 enum smap_kind kind)
{
	const struct smap *best = NULL;
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->v[i].kind == kind && (!best || m->v[i].rss > best->rss))
			best = &m->v[i];
	return best;
}

void proc_memory_free(struct proc_memory *m)
{
	free(m->names);
	free(m->v);
	memset(m, 0, sizeof(*m));
}
