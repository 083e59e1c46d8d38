#include "symbols/demangle.h"

#include <libiberty/demangle.h>
#include <stddef.h>

char *demangle(const char *name)
{
	if (!name || name[0] != '_')
		return NULL;
	/* DMGL_AUTO tries Rust first: legacy Rust names are valid C++. */
	return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
}
