#ifndef MEMSNAP_INJECTOR_UNWIND_EHFILE_H
#define MEMSNAP_INJECTOR_UNWIND_EHFILE_H

/*
 * memsnap's side of the unwinder (injector/unwind/host.c), before any thread
 * is stopped: where the .eh_frame of each object without PT_GNU_EH_FRAME
 * lies (struct unwind_ehframe), which only the file's section headers
 * say (they are not loaded).
 */
#include "injector/mapline.h"
#include "injector/unwind/core.h"

#include <stddef.h>
#include <stdint.h>
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

/*
 * The ELF file @fd (@size bytes): the link-time address and length of
 * its .eh_frame (SHF_ALLOC, PROGBITS or x86-64's UNWIND, 8 bytes to
 * UNWIND_EHFRAME_MAX, inside a PT_LOAD's file bytes) and the address of
 * its PT_LOAD at file offset 0 (*@vaddr0: its load base is where that
 * is mapped, less it).  0, or -1 for any header out of bounds: at most
 * 64 program headers, 1024 section headers, 64 KiB of section names.
 */
int unwind_ehfile_section(int fd, uint64_t size, uint64_t *vaddr0,
			  uint64_t *addr, uint64_t *len);

#endif
