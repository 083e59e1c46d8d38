#ifndef MEMSNAP_INJECTOR_SYSCALLS_H
#define MEMSNAP_INJECTOR_SYSCALLS_H

#include <stdint.h>

/*
 * What the engine knows of system calls on every CPU, by this build's
 * numbers (<sys/syscall.h>): how good a thread asleep in one is to
 * borrow, and the signals that are a thread's own doing.
 */

/* For triage: how good a thread asleep in syscall @nr is to borrow
 * (higher is better; 0 unknown; negative: avoid), and its name (NULL
 * when unknown). */
int syscall_score(long nr);
const char *syscall_name(long nr);

/* The synchronous signals (SIGSEGV, SIGTRAP, ...) as a mask, bit
 * sig - 1: never kept pending across a call, the same on every CPU. */
uint64_t sync_signals(void);

#endif
