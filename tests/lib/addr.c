#include "addr.h"

#include "fixture.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The path and lowest start address of the object mapped as @needle. */
static uint64_t map_base(pid_t pid, const char *needle, char *path,
			 size_t size)
{
	char name[64], line[4096];
	uint64_t best = 0;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "re");
	cr_assert(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, off;
		char *p = strchr(line, '/');

		if (!p || !strstr(p, needle) ||
		    sscanf(line, "%llx-%*x %*s %llx", &start, &off) != 2)
			continue;
		if (off == 0 && (!best || start < best)) {
			best = start;
			p[strcspn(p, "\n")] = '\0';
			snprintf(path, size, "%s", p);
		}
	}
	fclose(f);
	cr_assert(best, "%s is not mapped in pid %d", needle, (int)pid);
	return best;
}

/* Run @cmd and parse the first hex number of its output. */
static uint64_t shell_hex(const char *cmd)
{
	struct run r;
	uint64_t v;

	cr_assert_eq(run_shell(&r, cmd), 0);
	cr_assert_eq(r.status, 0, "%s: %s", cmd, r.err);
	cr_assert_eq(sscanf(r.out, "%" SCNx64, &v), 1, "%s: '%s'", cmd, r.out);
	run_free(&r);
	return v;
}

uint64_t addr_expected(pid_t pid, const char *lib, const char *sym,
		       int dynamic)
{
	char path[512], cmd[1400];
	uint64_t base = map_base(pid, lib, path, sizeof(path));
	uint64_t vaddr, value;

	snprintf(cmd, sizeof(cmd),
		 "readelf -lW '%s' | awk '$1 == \"LOAD\" { print $3; exit }'",
		 path);
	vaddr = shell_hex(cmd);
	snprintf(cmd, sizeof(cmd),
		 "nm %s --defined-only '%s' | awk '$3 == \"%s\" || index($3, \"%s@\") == 1 { print $1; exit }'",
		 dynamic ? "-D" : "", path, sym, sym);
	value = shell_hex(cmd);
	return base - (vaddr & ~(uint64_t)4095) + value;
}

void addr_expect_json(const char *json, const char *role, uint64_t want)
{
	static const char tag[] = "\"address\": \"";
	char key[96], hex[32];
	const char *p;

	snprintf(key, sizeof(key), "\"%s\": {", role);
	p = strstr(json, key);
	cr_assert(p != NULL, "no %s in %s", role, json);
	p = strstr(p, tag);
	cr_assert(p != NULL);
	snprintf(hex, sizeof(hex), "0x%" PRIx64 "\"", want);
	cr_expect(!strncmp(p + strlen(tag), hex, strlen(hex)),
		  "%s: want %s got %.24s", role, hex, p + strlen(tag));
}
