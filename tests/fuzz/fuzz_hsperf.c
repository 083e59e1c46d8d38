/*
 * Fuzz what explain reads of a JVM: its hsperfdata counters, which the
 * target wrote (proc/hsperf.c), and the runtime part and finding made
 * of them.
 *
 *   - hsperf_parse: 0 or -EINVAL; nothing set when -EINVAL; the
 *     version, collector and settings NUL-ended, with no control
 *     character; the heap's numbers only where have_heap says so;
 *   - explain over a small process holding that JVM: the parts add up
 *     to RSS, whatever the counters claim.
 */
#include "explain/explain.h"
#include "proc/runtime.h"

#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void check_string(const char *s, size_t size)
{
	size_t i;

	FUZZ_CHECK(memchr(s, '\0', size) != NULL);
	for (i = 0; s[i]; i++)
		FUZZ_CHECK((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct runtime_info rt = { .kind = RUNTIME_JVM };
	struct smap v[2] = {
		{ .start = 0x100000, .end = 0x4100000, .prot = 3,
		  .kind = SMAP_ANON, .rss = 64 << 20, .anon = 64 << 20 },
		{ .start = 0x7f0000000000, .end = 0x7f0000100000, .prot = 5,
		  .kind = SMAP_FILE, .rss = 1 << 20 },
	};
	struct proc_memory pm = { .v = v, .n = 2, .page_size = 4096 };
	struct explain_input in = { .pid = 1, .pm = &pm, .rt = &rt,
				    .allocator = "glibc", .ncpus = 1,
				    .not_read = "--no-attach",
				    .no_malloc = true };
	struct explain e;
	uint64_t sum = 0;
	int rc, p;

	rc = hsperf_parse(data, size, &rt);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	if (rc)
		FUZZ_CHECK(!rt.st.have_heap && !rt.st.have_metaspace &&
			   !rt.version[0] && !rt.settings[0]);
	check_string(rt.version, sizeof(rt.version));
	check_string(rt.settings, sizeof(rt.settings));
	check_string(rt.st.collector, sizeof(rt.st.collector));
	if (!rt.st.have_heap)
		FUZZ_CHECK(!rt.st.heap_used && !rt.st.heap_committed);
	explain_compute(&in, &e);
	for (p = 0; p < PARTS; p++)
		sum += e.part[p];
	FUZZ_CHECK(sum + e.heap == e.rss);
	FUZZ_CHECK(e.part[PART_RUNTIME] == 64u << 20);
	FUZZ_CHECK(memchr(e.verdict, '\0', sizeof(e.verdict)));
	return 0;
}
