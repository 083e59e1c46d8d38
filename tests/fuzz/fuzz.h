/*
 * Shared by the libFuzzer harnesses: the entry points libFuzzer calls,
 * a check that aborts (so libFuzzer records the input as a crash and
 * says which rule broke), and the fuzz input as a file that leaves
 * nothing behind.
 */
#ifndef MEMSNAP_TESTS_FUZZ_H
#define MEMSNAP_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * For a harness's own code: no coverage to count in it (memsnap's is
 * what guides the fuzzer), and its loops over the input would cost
 * more than the code under test.
 */
#define FUZZ_NOCOV __attribute__((no_sanitize("coverage")))

/* A property of memsnap's output that must hold for every input. */
#define FUZZ_CHECK(cond)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
			abort();                                           \
		}                                                          \
	} while (0)

/*
 * The input as an anonymous file (memfd), offset 0: for the APIs that
 * take an fd or a path (/proc/self/fd/N).  Nothing on disk to remove.
 * A failure here is the machine's, not memsnap's: abort loudly.
 */
static inline int fuzz_memfd(const void *data, size_t size)
{
	const char *p = data;
	int fd = memfd_create("memsnap-fuzz", MFD_CLOEXEC);

	if (fd < 0) {
		perror("memfd_create");
		abort();
	}
	while (size) {
		ssize_t n = write(fd, p, size);

		if (n <= 0) {
			perror("write memfd");
			abort();
		}
		p += n;
		size -= (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET)) {
		perror("lseek memfd");
		abort();
	}
	return fd;
}

#endif
