#ifndef MEMSNAP_INJECTOR_SECCOMP_H
#define MEMSNAP_INJECTOR_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tracee;

/*
 * The borrowed thread's seccomp filters, to decide before each system
 * call memsnap makes in it whether the filters let it through
 * (docs/DESIGN.md, "One call, step by step").  Private to injector/.
 *
 *   seccomp_load()    given Seccomp:/Seccomp_filters: of the thread
 *                     (struct thread_status), in filter mode fetch
 *                     every filter
 *                     (PTRACE_SECCOMP_GET_FILTER: root's CAP_SYS_ADMIN)
 *   seccomp_check()   run the filters on one system call exactly as the
 *                     kernel would (classic BPF over struct seccomp_data)
 *                     and say whether the action is ALLOW
 */
struct seccomp_filters;

/*
 * For a thread in seccomp @mode (0, 1 strict, 2 filter) with @nfilters
 * filters (-1: unknown): 0 with *@out NULL when it has no filter; 0 with
 * the filters; -EPERM when it has filters that cannot be read (no
 * CAP_SYS_ADMIN, or mode 1, strict), with @why saying so.
 */
int seccomp_load(struct tracee *t, int mode, int nfilters,
		 struct seccomp_filters **out, char *why, size_t why_size);

/*
 * true if the filters let system call @nr with @args, made at @ip, run;
 * false with @why naming what would happen instead ("kill the process",
 * "raise SIGSYS", "fail with errno 1", ...).  NULL @f: no filter.
 */
bool seccomp_check(const struct seccomp_filters *f, uint32_t audit_arch,
		   long nr, const uint64_t args[6], uint64_t ip, char *why,
		   size_t why_size);

/* The action of one filter program on @data (a struct seccomp_data of
 * 64 bytes), for unit tests: SECCOMP_RET_* with its data bits. */
uint32_t seccomp_run(const void *insns, size_t n, const void *data);

void seccomp_free(struct seccomp_filters *f);

#endif
