#ifndef MEMSNAP_SYMBOLS_RUNTIME_H
#define MEMSNAP_SYMBOLS_RUNTIME_H

#include "proc/runtime.h"
#include "symbols/objects.h"

#include <sys/types.h>

/*
 * Which language runtime process @pid (its objects @os) runs, found by
 * the symbols of its objects, never by a file's name:
 *
 *   the JVM       JNI_CreateJavaVM with JNI_GetCreatedJavaVMs (libjvm)
 *   .NET          coreclr_initialize (libcoreclr)
 *   Node.js       node::Start(int, char**) (node, libnode)
 *   CPython       _PyRuntime with Py_InitializeEx (python, libpython)
 *   Go            the executable's .go.buildinfo section, or its
 *                 runtime.buildVersion symbol
 *
 * and, without calling into it, what its symbols and version make
 * readable from its memory: Go's version (from .go.buildinfo) and, for
 * a version whose layout memsnap knows, runtime.memstats; CPython's
 * version (Py_Version) and, where its symbol tables name it, pymalloc's
 * count of arenas.  The JVM's counters are proc/hsperf.c's.  What could
 * not be read is said in @rt->why.  0 (@rt->kind RUNTIME_NONE when it
 * runs none memsnap knows), or -ENOMEM.
 */
int runtime_detect(pid_t pid, struct objects *os, struct runtime_info *rt);

/*
 * Go's statistics from the @n bytes of runtime.memstats' consistent
 * heap statistics (three generations of deltas, summed, as the
 * runtime's own unsafeRead does) for a build of @nclasses size
 * classes, and @sizes, its runtime.class_to_size (@nclasses of them),
 * into @st.  false when the bytes do not read as statistics.  For the
 * tests: runtime_detect() reads them.
 */
bool runtime_go_stats(const unsigned char *buf, size_t n, unsigned int nclasses,
		      const uint16_t *sizes, struct runtime_stats *st);

#endif
