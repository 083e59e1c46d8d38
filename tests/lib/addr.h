#ifndef MEMSNAP_TESTS_ADDR_H
#define MEMSNAP_TESTS_ADDR_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Where a function should be, computed without memsnap's code: the
 * lowest offset-0 mapping of the object whose path contains @lib in
 * /proc/PID/maps, minus the page-aligned vaddr of its first PT_LOAD
 * (readelf), plus the symbol's value (nm, versioned names too; @dynamic
 * selects nm -D).  Fails the current Criterion test if any step fails.
 */
uint64_t addr_expected(pid_t pid, const char *lib, const char *sym,
		       int dynamic);

/*
 * The "address" of function @role in memsnap's info --json output,
 * compared with @want; a Criterion expectation.
 */
void addr_expect_json(const char *json, const char *role, uint64_t want);

#endif
