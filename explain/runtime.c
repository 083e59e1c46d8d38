/*
 * The finding of a language runtime's memory (explain/explain.h): what
 * the runtime part holds, what the runtime's own numbers say of it where
 * memsnap could read them, and each runtime's own tools and settings.
 * Whether the memory grows is not known from one look: the remedy says
 * that `watch` answers it, and never calls the memory "no leak".
 */
#include "explain/explain_internal.h"

#include <stdio.h>
#include <string.h>

void runtime_words(const struct explain_input *in, char *buf, size_t size)
{
	const struct runtime_info *rt = in->rt;

	snprintf(buf, size, "%s%s%s", runtime_title(rt->kind),
		 rt->version[0] ? " " : "", rt->version);
}

/* What the part holds, in each runtime, and what its numbers say. */
static void go_text(const struct runtime_info *rt, struct explain_finding *f)
{
	const struct runtime_stats *st = &rt->st;

	say(f->text, sizeof(f->text),
	    "its heap arenas (goroutine stacks are in them) and the runtime's own structures");
	if (st->have_go)
		say(f->text, sizeof(f->text),
		    "; runtime.memstats: %s of spans in use holding %s of objects (HeapInuse, HeapAlloc), %s idle and kept, %s given back to the kernel, %s of goroutine stacks",
		    hb(st->go_inuse), hb(st->go_alloc), hb(st->go_idle),
		    hb(st->go_released), hb(st->go_stacks));
}

static void jvm_text(const struct runtime_info *rt, struct explain_finding *f)
{
	const struct runtime_stats *st = &rt->st;

	say(f->text, sizeof(f->text),
	    "the Java heap, metaspace, the code cache, the collector's own structures, and what native code maps itself");
	if (st->have_heap)
		say(f->text, sizeof(f->text),
		    "; its counters (hsperfdata, what jstat reads): Java heap %s used of %s committed, at most %s%s%s",
		    hb(st->heap_used), hb(st->heap_committed),
		    hb(st->heap_max), st->collector[0] ? ", collector " : "",
		    st->collector);
	if (st->have_metaspace)
		say(f->text, sizeof(f->text), "; metaspace %s used of %s",
		    hb(st->metaspace_used), hb(st->metaspace_committed));
	if (st->have_heap && st->heap_committed > f->bytes)
		say(f->text, sizeof(f->text),
		    " (committed is not resident until the heap touches it)");
}

static void python_text(const struct runtime_info *rt,
			struct explain_finding *f)
{
	const struct runtime_stats *st = &rt->st;

	say(f->text, sizeof(f->text),
	    "pymalloc's arenas (every object of up to 512 bytes: ints, short strings, small dicts and tuples) and the interpreter's own mappings; larger objects are malloc's, in the heap parts");
	if (st->have_arenas)
		say(f->text, sizeof(f->text), "; pymalloc holds %llu arenas of %s (%s)",
		    (unsigned long long)st->arenas, hb(st->arena_size),
		    hb(st->arenas * st->arena_size));
}

static void runtime_text(const struct explain_input *in,
			 struct explain_finding *f)
{
	const struct runtime_info *rt = in->rt;

	switch (rt->kind) {
	case RUNTIME_GO:
		go_text(rt, f);
		break;
	case RUNTIME_JVM:
		jvm_text(rt, f);
		break;
	case RUNTIME_CPYTHON:
		python_text(rt, f);
		break;
	case RUNTIME_NODE:
		say(f->text, sizeof(f->text),
		    "V8's heap (its new, old, code and large-object spaces) and its own mappings; Buffers and native addons are malloc's");
		break;
	default:
		say(f->text, sizeof(f->text),
		    "the garbage-collected heap and the runtime's own mappings");
		break;
	}
	if (rt->why[0])
		say(f->text, sizeof(f->text), " (its own numbers not read: %s)",
		    rt->why);
	if (rt->settings[0])
		say(f->text, sizeof(f->text), "; started with %s",
		    rt->settings);
}

/* Each runtime's own tools, after "whether it grows". */
static void runtime_remedy(const struct explain_input *in,
			   struct explain_finding *f)
{
	const struct runtime_stats *st = &in->rt->st;
	int pid = (int)in->pid;

	switch (in->rt->kind) {
	case RUNTIME_GO:
		say(f->remedy, sizeof(f->remedy),
		    "what holds it: Go's heap profile (net/http/pprof's /debug/pprof/heap, `go tool pprof -sample_index=inuse_space`); memsnap's sampler sees only malloc, never Go's heap; to bound it, at the next start (a restart): GOMEMLIMIT (Go 1.19+, a soft limit the collector works to keep) and GOGC (lower: collect more often)");
		if (st->have_go && st->go_idle > st->go_inuse / 4)
			say(f->remedy, sizeof(f->remedy),
			    "; the idle heap it keeps goes back to the kernel by itself (the scavenger), or at once from inside with debug.FreeOSMemory()");
		break;
	case RUNTIME_JVM:
		say(f->remedy, sizeof(f->remedy),
		    "now: `jcmd %d GC.heap_info` (the heap), `jcmd %d GC.class_histogram` (what fills it), `jcmd %d GC.heap_dump FILE` (what holds it); outside the Java heap: start with -XX:NativeMemoryTracking=summary, then `jcmd %d VM.native_memory summary`; to bound it, at the next start (a restart): -Xmx or -XX:MaxRAMPercentage, -XX:MaxMetaspaceSize, -XX:ReservedCodeCacheSize",
		    pid, pid, pid, pid);
		if (st->have_heap && st->heap_committed > 2 * st->heap_used)
			say(f->remedy, sizeof(f->remedy),
			    "; committed heap it does not use goes back after a collection with -XX:MaxHeapFreeRatio, or with G1's -XX:G1PeriodicGCInterval");
		break;
	case RUNTIME_CPYTHON:
		say(f->remedy, sizeof(f->remedy),
		    "what holds it: tracemalloc (PYTHONTRACEMALLOC=25 at the next start, or tracemalloc.start() and two snapshots compared); with PYTHONMALLOC=malloc at the next start (a restart) every object is malloc's, which `memsnap --pid %d prof on --sampler` sees; pymalloc gives an arena back only when every object in it is freed",
		    pid);
		break;
	case RUNTIME_NODE:
		say(f->remedy, sizeof(f->remedy),
		    "what holds it: a heap snapshot (start with --heapsnapshot-signal=SIGUSR2, then `kill -USR2 %d` twice, compared in Chrome DevTools), process.memoryUsage() from inside; to bound it, at the next start (a restart): --max-old-space-size=MiB",
		    pid);
		break;
	default:
		say(f->remedy, sizeof(f->remedy),
		    "now: `dotnet-counters monitor -p %d` (the GC heap), `dotnet-gcdump collect -p %d` (what holds it); to bound it, at the next start (a restart): DOTNET_GCHeapHardLimit, or DOTNET_gcServer=0 (workstation GC keeps less)",
		    pid, pid);
		break;
	}
}

void on_runtime(const struct explain_input *in, struct explain *e)
{
	uint64_t r = e->part[PART_RUNTIME];
	struct explain_finding *f;
	char who[96];

	if (!in->rt || in->rt->kind == RUNTIME_NONE ||
	    r < EXPLAIN_MIN_BYTES || r * 10 < e->rss)
		return;
	f = finding_add(e, "runtime", r);
	if (!f)
		return;
	runtime_words(in, who, sizeof(who));
	say(f->text, sizeof(f->text), "%s holds %s (%.0f%% of RSS) outside malloc: ",
	    who, hb(r), explain_pct(e, r));
	runtime_text(in, f);
	say(f->remedy, sizeof(f->remedy),
	    "whether it grows: `memsnap --pid %d watch` (a leak keeps growing, a heap sized by its limits levels off); ",
	    (int)in->pid);
	runtime_remedy(in, f);
}
