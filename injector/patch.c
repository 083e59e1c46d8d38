/*
 * What both entry-point planners (injector/arch/CPU-patch.c) use:
 * a refusal with its reason, distances, little-endian words.
 */
#include "injector/patch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int patch_refuse(char *why, size_t why_size, const char *fmt, ...)
{
	va_list ap;

	if (why && why_size) {
		va_start(ap, fmt);
		vsnprintf(why, why_size, fmt, ap);
		va_end(ap);
	}
	return -EOPNOTSUPP;
}

uint64_t patch_distance(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

void patch_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

void patch_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t patch_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
