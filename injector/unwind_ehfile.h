#ifndef MEMSNAP_INJECTOR_UNWIND_EHFILE_H
#define MEMSNAP_INJECTOR_UNWIND_EHFILE_H

/*
 * memsnap's side of the unwinder (injector/unwind.c), before any thread
 * is stopped: where the .eh_frame of each object without PT_GNU_EH_FRAME
 * lies (struct unwind_ehframe), which only the file's section headers
 * say (they are not loaded).
 */
#include "injector/mapline.h"
#include "injector/unwind_core.h"

#include <stddef.h>
#include <sys/types.h>

/*
 * The objects of process @pid, mapped as @v (@n lines, as /proc prints
 * them), with code and no PT_GNU_EH_FRAME in their loaded program
 * headers, and their .eh_frame, at most UNWIND_EHFRAMES into @out: the
 * count.  An object whose file cannot be read is left out (its stacks
 * end where libunwind guesses, as before).
 */
size_t unwind_ehframes_find(pid_t pid, const struct mapline *v, size_t n,
			    struct unwind_ehframe *out);

#endif
