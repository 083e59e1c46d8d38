#ifndef MEMSNAP_ALLOCATORS_SAMPLER_INTERNAL_H
#define MEMSNAP_ALLOCATORS_SAMPLER_INTERNAL_H

/*
 * Between allocators/sampler.c (finding, loading, switching) and
 * sampler_dump.c (reading the records back).
 */
#include "allocators/sampler.h"
#include "sampler/sampler.h"
#include "sampler-offsets.h"

#include <stddef.h>

#define CODE_LEN SAMPLER_OFF_sampler_code_end

/* The control block's head: everything before the slot log. */
#define CTL_HEAD offsetof(struct sampler_ctl, log)

/* Read the head of the control block at @ctl of @pid and check it.
 * 0, -ENODATA (all zero: never switched on), -EPROTO, or a read error. */
int sampler_read_ctl(pid_t pid, uint64_t ctl, struct sampler_ctl *c);

#endif
