/*
 * A hostile jemalloc heap_v2 dump of about SIZE bytes on stdout, for
 * bench/report-big.sh:
 *
 *   heap_v2/524288
 *     t*: 18446744073709551615: 18446744073709551615 [0: 0]
 *   @ 0x7f00003a91c2 0x7f0000c01e7d ... (1024 frames)      a deep stack
 *     t*: 18446744073709551615: 18446744073709551615 [0: 0]
 *     t1: 1: 1 [0: 0]
 *   @ 0x7f0000001a2b 0x7f0000003c4d                         a short one
 *     t*: 3: 12288 [0: 0]
 *   ...
 *   MAPPED_LIBRARIES:
 *   7f0000000000-7f0000001000 r-xp 00000000 fe:00 1000 /nonexistent/lib0.so
 *   ...
 *
 * Every stack is distinct (its root frame is its own), one in 64 is 1024
 * frames deep, the others 2 to 9.  A third of the addresses are drawn
 * anew (each a name of its own, "lib17.so+0x1a2b"), the others from a
 * pool of 65536, so that names repeat across stacks as in a program.
 * Half the counts are the largest a dump can carry.  A tenth of the
 * bytes are MAPPED_LIBRARIES lines, each its own object (a file that is
 * not there), and together they cover every address.
 *
 *   report-big-gen SIZE [SEED]      SIZE in bytes, or with K, M, G
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIB_SPAN ((uint64_t)0x1000)	/* bytes per mapped object */
#define LIB_BASE ((uint64_t)0x7f0000000000)
#define POOL 65536

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	/* xorshift64*: deterministic for a seed */
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 0x2545f4914f6cdd1dull;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; break;
	}
	return v;
}

int main(int argc, char **argv)
{
	static uint64_t pool[POOL];
	uint64_t size, written = 0, libs, i, nstack = 0;
	char buf[1 << 16];
	size_t n;
	int k;

	if (argc < 2 || argc > 3) {
		fputs("usage: report-big-gen SIZE [SEED]\n", stderr);
		return 2;
	}
	size = parse_size(argv[1]);
	if (argc == 3)
		state ^= strtoull(argv[2], NULL, 0) * 0xff51afd7ed558ccdull;
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	/* the objects: one line each, ~75 bytes, a tenth of the dump */
	libs = size / 10 / 75 + 1;
	for (i = 0; i < POOL; i++)
		pool[i] = LIB_BASE + (next() % (libs * LIB_SPAN));

	written += (uint64_t)printf("heap_v2/524288\n  t*: "
				    "18446744073709551615: "
				    "18446744073709551615 [0: 0]\n");
	while (written < size - size / 10) {
		/* every 64th a deep stack, the others short */
		int depth = nstack % 64 == 0 ? 1023 : 1 + (int)(next() % 8);

		n = (size_t)snprintf(buf, sizeof(buf), "@");
		for (k = 0; k < depth; k++) {
			uint64_t r = next(), pc;

			if (r % 3 == 0)
				pc = LIB_BASE + (r >> 8) % (libs * LIB_SPAN);
			else
				pc = pool[(r >> 8) % POOL];
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      " 0x%" PRIx64, pc);
			if (n > sizeof(buf) - 64)
				break;
		}
		/* a last frame of its own: every stack is distinct */
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " 0x%" PRIx64
				      "\n", LIB_BASE + nstack % (libs * LIB_SPAN));
		if (nstack % 2)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				"  t*: 18446744073709551615: "
				"18446744073709551615 [0: 0]\n"
				"  t%" PRIu64 ": 1: 1 [0: 0]\n", nstack);
		else
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				"  t*: %" PRIu64 ": %" PRIu64 " [0: 0]\n",
				1 + nstack % 7, (1 + nstack % 7) * 4096);
		fwrite(buf, 1, n, stdout);
		written += n;
		nstack++;
	}
	written += (uint64_t)printf("\nMAPPED_LIBRARIES:\n");
	for (i = 0; i < libs; i++)
		written += (uint64_t)printf(
			"%012" PRIx64 "-%012" PRIx64 " r-xp 00000000 fe:00 %"
			PRIu64 " /nonexistent/lib%" PRIu64 ".so\n",
			LIB_BASE + i * LIB_SPAN, LIB_BASE + (i + 1) * LIB_SPAN,
			1000 + i, i);
	return ferror(stdout) || fflush(stdout) ? 1 : 0;
}
