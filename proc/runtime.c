/*
 * A language runtime's names, and where its heap is in the maps
 * (proc/runtime.h).
 */
#include "proc/runtime.h"

#include "proc/procfs.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name, *title;
} runtimes[RUNTIMES] = {
	[RUNTIME_NONE] = { "", "" },
	[RUNTIME_GO] = { "go", "Go" },
	[RUNTIME_JVM] = { "jvm", "the JVM" },
	[RUNTIME_CPYTHON] = { "cpython", "CPython" },
	[RUNTIME_NODE] = { "node", "Node.js (V8)" },
	[RUNTIME_DOTNET] = { "dotnet", ".NET" },
};

const char *runtime_name(enum runtime_kind k)
{
	return (unsigned int)k < RUNTIMES ? runtimes[k].name : "";
}

const char *runtime_title(enum runtime_kind k)
{
	return (unsigned int)k < RUNTIMES ? runtimes[k].title : "";
}

/*
 * Go's heap arena hints on 64-bit (src/runtime/malloc.go, mallocinit):
 * 0x00c0 << 32 with i << 40 above it, i from 0 to 0x7f.  The heap grows
 * up from a hint in arenas of 64 MiB, mapped next to each other.
 */
#define GO_HINT 0x00c000000000ull
#define GO_HINTS 0x80u

/* The index of the mapping of @m that starts at @addr, or @m->n. */
static size_t starting_at(const struct proc_memory *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n && m->v[lo].start == addr ? lo : m->n;
}

size_t runtime_claims(const struct runtime_info *rt,
		      const struct proc_memory *m, struct smap_claim *out,
		      size_t max)
{
	size_t n = 0, i, j;

	if (!rt || rt->kind != RUNTIME_GO)
		return 0;
	for (i = 0; i < GO_HINTS && n < max; i++) {
		uint64_t hint = (uint64_t)i << 40 | GO_HINT;

		j = starting_at(m, hint);
		if (j == m->n || m->v[j].kind != SMAP_ANON)
			continue;
		while (j + 1 < m->n && m->v[j + 1].start == m->v[j].end &&
		       m->v[j + 1].kind == SMAP_ANON)
			j++;
		out[n++] = (struct smap_claim){ hint, m->v[j].end,
						SMAP_RUNTIME };
	}
	return n;
}

/* What each runtime reads from its environment about its heap. */
static const char *const settings[RUNTIMES][4] = {
	[RUNTIME_GO] = { "GOMEMLIMIT", "GOGC", "GODEBUG" },
	[RUNTIME_JVM] = { "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS" },
	[RUNTIME_CPYTHON] = { "PYTHONMALLOC", "PYTHONTRACEMALLOC" },
	[RUNTIME_NODE] = { "NODE_OPTIONS" },
	[RUNTIME_DOTNET] = { "DOTNET_GCHeapHardLimit", "DOTNET_gcServer",
			     "DOTNET_GCHeapHardLimitPercent" },
};

void runtime_settings_at(int proc_fd, struct runtime_info *rt)
{
	size_t i, len = strlen(rt->settings);

	if ((unsigned int)rt->kind >= RUNTIMES)
		return;
	for (i = 0; i < 4 && settings[rt->kind][i]; i++) {
		const char *var = settings[rt->kind][i];
		char val[96];
		int n;

		if (proc_getenv_at(proc_fd, var, val, sizeof(val)) || !val[0])
			continue;
		/* the target's bytes: no control character */
		for (n = 0; val[n]; n++)
			if ((unsigned char)val[n] < 0x20 || val[n] == 0x7f)
				val[n] = '?';
		n = snprintf(rt->settings + len, sizeof(rt->settings) - len,
			     "%s%s=%s", len ? " " : "", var, val);
		if (n < 0 || (size_t)n >= sizeof(rt->settings) - len) {
			rt->settings[len] = '\0';
			return;
		}
		len += (size_t)n;
	}
}
