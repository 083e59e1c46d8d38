#include "common/hidx.h"

#include <errno.h>
#include <stdlib.h>

int hidx_need(struct hidx *h, size_t n, size_t min,
	      uint64_t (*hash_of)(const void *ctx, size_t i), const void *ctx)
{
	size_t ncap, i;
	uint32_t *ns;

	if (n * 2 <= h->cap)
		return 0;
	ncap = h->cap ? h->cap * 2 : min;
	while (ncap < n * 2)
		ncap *= 2;
	if (n - 1 >= UINT32_MAX)
		return -ENOMEM;
	ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	for (i = 0; i + 1 < n; i++) {
		size_t j = (size_t)hash_of(ctx, i) & (ncap - 1);

		while (ns[j])
			j = (j + 1) & (ncap - 1);
		ns[j] = (uint32_t)i + 1;
	}
	free(h->slot);
	h->slot = ns;
	h->cap = ncap;
	return 0;
}

void hidx_free(struct hidx *h)
{
	free(h->slot);
	h->slot = NULL;
	h->cap = 0;
}
