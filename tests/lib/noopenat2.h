#ifndef MEMSNAP_TESTS_NOOPENAT2_H
#define MEMSNAP_TESTS_NOOPENAT2_H

/*
 * Make openat2() fail with ENOSYS in this process from now on, as on
 * Linux before 5.6 (a seccomp filter; Criterion runs each test in its
 * own process, so the filter dies with it).  Fails the current test if
 * the filter is not in place.
 */
void no_openat2(void);

#endif
