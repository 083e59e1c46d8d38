/*
 * The exporters' tables: a keyed hash, strings by id, numbers by id, and
 * a growing string.
 */
#include "profile/report_internal.h"

#include "common/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- hashing ------------------------------------------------------------ */

static uint64_t sip_key[2];
static bool sip_keyed;

static void sip_init_key(void)
{
	uint64_t k[2] = { random_seed(), random_seed() };

	sip_key[0] = k[0];
	sip_key[1] = k[1];
	sip_keyed = true;
}

static inline uint64_t rotl(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

static inline void sip_round(struct hasher *s)
{
	s->v0 += s->v1;
	s->v1 = rotl(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = rotl(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = rotl(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = rotl(s->v2, 32);
}

void hash_start(struct hasher *s)
{
	if (!sip_keyed)
		sip_init_key();
	s->v0 = sip_key[0] ^ 0x736f6d6570736575ull;
	s->v1 = sip_key[1] ^ 0x646f72616e646f6dull;
	s->v2 = sip_key[0] ^ 0x6c7967656e657261ull;
	s->v3 = sip_key[1] ^ 0x7465646279746573ull;
}

/* SipHash-1-3: one round a word ... */
void hash_word(struct hasher *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	s->v0 ^= m;
}

/* ... and three to finish. */
uint64_t hash_end(struct hasher *s)
{
	s->v2 ^= 0xff;
	sip_round(s);
	sip_round(s);
	sip_round(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t report_hash(const void *p, size_t len)
{
	const unsigned char *b = p;
	struct hasher s;
	uint64_t m;
	size_t i;

	hash_start(&s);
	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, b + i, 8);
		hash_word(&s, m);
	}
	m = (uint64_t)len << 56;
	for (; i < len; i++)
		m |= (uint64_t)b[i] << (8 * (i & 7));
	hash_word(&s, m);
	return hash_end(&s);
}

/* ---- small containers ---------------------------------------------------- */

static uint64_t strmap_hash_of(const void *ctx, size_t i)
{
	return ((const struct strmap *)ctx)->hash[i];
}

/* Strings are copied into chunks, never one malloc each. */
#define STRMAP_CHUNK (1u << 20)

struct strmap_chunk {
	struct strmap_chunk *next;
	char s[];
};

static const char *strmap_copy(struct strmap *m, const char *key,
			       size_t len)
{
	char *d;

	if (len + 1 > m->left) {
		size_t size = len + 1 > STRMAP_CHUNK ? len + 1 : STRMAP_CHUNK;
		struct strmap_chunk *c = malloc(sizeof(*c) + size);

		if (!c)
			return NULL;
		c->next = m->chunks;
		m->chunks = c;
		m->free = c->s;
		m->left = size;
	}
	d = m->free;
	memcpy(d, key, len + 1);
	m->free += len + 1;
	m->left -= len + 1;
	return d;
}

static int strmap_add(struct strmap *m, const char *key, bool copy,
		      size_t *id, bool *added)
{
	size_t len = strlen(key), j;
	uint64_t h = report_hash(key, len);

	*added = false;
	if (hidx_need(&m->idx, m->n + 1, 256, strmap_hash_of, m))
		return -ENOMEM;
	for (j = hidx_first(&m->idx, h); m->idx.slot[j];
	     j = hidx_next(&m->idx, j)) {
		size_t k = m->idx.slot[j] - 1;

		if (m->hash[k] == h && !strcmp(m->v[k], key)) {
			*id = k;
			return 0;
		}
	}
	if (m->n >= UINT32_MAX - 1)
		return -ENOMEM;
	if (m->n == m->vcap) {
		size_t vcap = m->vcap;

		if (array_grow((void **)&m->v, &vcap, m->n + 1,
			       sizeof(*m->v)))
			return -ENOMEM;
		vcap = m->vcap;
		if (array_grow((void **)&m->hash, &vcap, m->n + 1,
			       sizeof(*m->hash)))
			return -ENOMEM;
		m->vcap = vcap;
	}
	if (copy) {
		key = strmap_copy(m, key, len);
		if (!key)
			return -ENOMEM;
	}
	m->v[m->n] = key;
	m->hash[m->n] = h;
	m->idx.slot[j] = (uint32_t)m->n + 1;
	*id = m->n++;
	*added = true;
	return 0;
}

int strmap_get(struct strmap *m, const char *key, size_t *id, bool *added)
{
	return strmap_add(m, key, true, id, added);
}

int strmap_get_static(struct strmap *m, const char *key, size_t *id,
		      bool *added)
{
	return strmap_add(m, key, false, id, added);
}

void strmap_free(struct strmap *m)
{
	while (m->chunks) {
		struct strmap_chunk *next = m->chunks->next;

		free(m->chunks);
		m->chunks = next;
	}
	free(m->v);
	free(m->hash);
	hidx_free(&m->idx);
	*m = (struct strmap){ 0 };
}

static uint64_t u64map_hash_of(const void *ctx, size_t i)
{
	const struct u64map *m = ctx;

	return report_hash(&m->keys[i], sizeof(m->keys[i]));
}

int u64map_get(struct u64map *m, uint64_t key, uint32_t *val, bool *added)
{
	uint64_t h = report_hash(&key, sizeof(key));
	size_t j;

	*added = false;
	if (m->n >= UINT32_MAX - 1 ||
	    array_grow((void **)&m->keys, &m->cap, m->n + 1, sizeof(*m->keys)))
		return -ENOMEM;
	if (hidx_need(&m->idx, m->n + 1, 1024, u64map_hash_of, m))
		return -ENOMEM;
	for (j = hidx_first(&m->idx, h); m->idx.slot[j];
	     j = hidx_next(&m->idx, j)) {
		if (m->keys[m->idx.slot[j] - 1] == key) {
			*val = m->idx.slot[j] - 1;
			return 0;
		}
	}
	m->keys[m->n] = key;
	m->idx.slot[j] = (uint32_t)++m->n;
	*val = m->idx.slot[j] - 1;
	*added = true;
	return 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	hidx_free(&m->idx);
	*m = (struct u64map){ 0 };
}

int sbuf_add(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	if (array_grow((void **)&b->s, &b->cap, b->len + n + 1, 1))
		return -ENOMEM;
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
	return 0;
}

int sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	return sbuf_add(b, tmp);
}
