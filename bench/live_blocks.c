/*
 * A target for bench/sampler-scale.sh: blocks kept live on request.
 * Prints "ready" once started; then each line "N" on stdin allocates N
 * blocks of 64 bytes more, kept live, and answers "ok TOTAL".  EOF ends
 * it.
 */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	void **v = NULL;
	size_t n = 0, cap = 0;
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	puts("ready");
	while (fgets(line, sizeof(line), stdin)) {
		size_t want = strtoul(line, NULL, 10), i;

		if (n + want > cap) {
			cap = (n + want) * 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				return 1;
		}
		for (i = 0; i < want; i++)
			if (!(v[n++] = malloc(64)))
				return 1;
		printf("ok %zu\n", n);
	}
	return 0;
}
