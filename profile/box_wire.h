#ifndef MEMSNAP_PROFILE_BOX_WIRE_H
#define MEMSNAP_PROFILE_BOX_WIRE_H

#include <stdint.h>

/*
 * The wire between memsnap and report's child (profile/box.h): one
 * SOCK_SEQPACKET message each (common/seqpacket.h), a head and its
 * bytes, a descriptor beside some.
 *
 *   child -> memsnap   INPUT      input val: the dump (0), the base (1),
 *                                 or each input in turn
 *                      OPEN       a path beneath the root (val: how)
 *                      STEADY     this descriptor, for a mapping reader
 *                                 (bytes: its u64 size limit)
 *                      DEBUGINFOD a build-id (its bytes)
 *                      PROGRESS   symbolizing val objects
 *                      WARNING    one line of text
 *                      ERROR      the one error line; the child exits
 *                                 next with status val (1 or 10)
 *                      SKIP       input val is left out (a run of each
 *                                 input; its WARNING said why)
 *                      BEGIN      report val follows: open the output
 *                      DATA       report bytes, at most RW_DATA_MAX
 *                      END        the report is whole (val 0), or the
 *                                 exporter failed (val -errno)
 *   memsnap -> child   FD         the answer to INPUT, OPEN, STEADY and
 *                                 DEBUGINFOD: val 0 and a descriptor,
 *                                 RW_SAME (STEADY: keep yours), or -errno
 *
 * The child asks and waits for each answer; memsnap answers nothing
 * else, in order.  A report's run, for a dump without --base:
 *
 *   INPUT 0 > FD; PROGRESS; (OPEN > FD, STEADY > FD)...; WARNING...;
 *   BEGIN 0; DATA...; END 0; the child exits 0
 *
 * and of each of three inputs, the second unreadable:
 *
 *   INPUT 0 > FD; ...; BEGIN 0; DATA...; END 0;
 *   INPUT 1 > FD; WARNING; SKIP 1;
 *   INPUT 2 > FD; ...; BEGIN 2; DATA...; END 0; the child exits 0
 */
enum rw_type {
	RW_INPUT = 1,
	RW_OPEN,
	RW_STEADY,
	RW_DEBUGINFOD,
	RW_PROGRESS,
	RW_WARNING,
	RW_ERROR,
	RW_SKIP,
	RW_BEGIN,
	RW_DATA,
	RW_END,
	RW_FD,
};

struct rw_head {
	uint32_t type;
	int32_t val;
};

#define RW_SAME 1
#define RW_DATA_MAX (64u << 10)
#define RW_TEXT_MAX 8192u	/* a WARNING or ERROR line */
#define RW_MSG_MAX (sizeof(struct rw_head) + RW_DATA_MAX)

#endif
