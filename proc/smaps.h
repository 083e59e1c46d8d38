#ifndef MEMSNAP_PROC_SMAPS_H
#define MEMSNAP_PROC_SMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Where a process's resident memory is, as the kernel counts it: every
 * mapping of /proc/PID/smaps, the totals of /proc/PID/status, the stack
 * of each thread, the THP mode and the page size.  Read without stopping
 * anything (proc_memory_read_at()); the parsers take text, so the tests
 * give them any bytes:
 *
 *   7f1c29e00000-7f1c2a000000 rw-p 00000000 00:00 0
 *   Size:               2048 kB
 *   Rss:                1024 kB
 *   Anonymous:          1024 kB
 *   AnonHugePages:         0 kB
 *   Swap:                  0 kB
 *   VmFlags: rd wr mr mw me ac sd
 *
 * smaps is the kernel's text, but the paths in it are the target's
 * (a file named "Rss: 1 kB" is a path on a header line, nothing more):
 * every number is bounded, an unknown line is counted and skipped.
 */

enum smap_kind {
	SMAP_ANON,	/* private, no file: malloc's arenas, the program's
			   own mmaps, thread stacks; "[anon:name]" too */
	SMAP_HEAP,	/* "[heap]": the brk area */
	SMAP_STACK,	/* "[stack]": the main thread's */
	SMAP_FILE,	/* a file (its Anonymous pages are copies on write) */
	SMAP_SHMEM,	/* shared memory: shared anonymous, /dev/shm,
			   memfd, SysV, /dev/zero */
	SMAP_OTHER,	/* "[vdso]", "[vvar]", "[vsyscall]", ... */
};

struct smap {
	uint64_t start, end;
	unsigned int prot;	/* MAP_PROT_* (proc/maps.h) */
	bool shared;
	enum smap_kind kind;
	/* bytes */
	uint64_t rss, anon, anon_huge, swap;
	bool thread_stack;	/* a thread's stack pointer is in it, or it
				   sits above a guard page as glibc's do */
};

/* What /proc/PID/status says, in bytes (the kernel's counters). */
struct proc_mem_status {
	uint64_t vm_rss, rss_anon, rss_file, rss_shmem, vm_swap, vm_hwm;
	uint64_t vm_size;
	unsigned long threads;
	bool have_rss;		/* VmRSS was there (a kernel thread has none) */
	bool have_split;	/* RssAnon, RssFile and RssShmem were */
};

/* Sums over the mappings, in bytes. */
struct smaps_totals {
	uint64_t rss;		/* every Rss */
	uint64_t anon;		/* every Anonymous */
	uint64_t anon_private;	/* Anonymous of SMAP_ANON and SMAP_HEAP
				   mappings: where an allocator can live */
	uint64_t anon_heap;	/* of "[heap]" */
	uint64_t anon_arenas;	/* of "[heap]" and of the mappings that
				   can be glibc's arena heaps: private,
				   anonymous, 64 MiB aligned, at most
				   64 MiB long */
	uint64_t anon_in_files;	/* Anonymous of file mappings (COW) */
	uint64_t file;		/* Rss - Anonymous of file and other mappings */
	uint64_t shmem;		/* Rss of shared memory mappings */
	uint64_t anon_huge;	/* every AnonHugePages */
	uint64_t anon_huge_private;	/* AnonHugePages of the mappings
					   anon_private counts */
	uint64_t swap;		/* every Swap */
	uint64_t stacks;	/* Anonymous of mappings marked thread_stack */
	uint64_t largest_stack;	/* the largest of those */
	size_t nstacks;
};

/* The longest smaps the parser reads: 1 GiB (some 1.4 M mappings). */
#define SMAPS_MAX_BYTES (1ull << 30)

struct proc_memory {
	struct smap *v;		/* in the order of the file */
	size_t n, cap;
	size_t malformed;	/* lines that were neither header nor field */
	struct proc_mem_status st;
	bool have_status;
	char thp[16];		/* "always", "madvise", "never"; "" unknown */
	uint64_t huge_page;	/* the kernel's THP size (hpage_pmd_size),
				   0 unknown */
	uint64_t page_size;
	/* Threads whose stack pointer /proc/PID/task/TID/syscall gave,
	 * and those it did not ("running", unreadable). */
	size_t threads_sp, threads_no_sp;
};

/* Parse the text of a smaps file (@len bytes, any bytes) into @m's
 * mappings, appended.  0 or -ENOMEM. */
int smaps_parse(const char *text, size_t len, struct proc_memory *m);

/* The fields of a status file's text.  0, or -ENOENT without VmRSS. */
int proc_mem_status_parse(const char *text, size_t len,
			  struct proc_mem_status *st);

/*
 * The stack pointer in the text of /proc/PID/task/TID/syscall:
 * "7 0x7ffd... 0x1 ... 0x7ffd4c1ef8d8 0x7f1c2a4e1d1b" (the number of
 * the call, six arguments, sp, pc) or "-1 0x7ffd... 0x7f..." (blocked
 * outside a call: sp, pc).  -EAGAIN for "running" (no stack pointer
 * while it runs), -EINVAL for anything else.
 */
int proc_syscall_sp(const char *text, size_t len, uint64_t *sp);

/* The mode in brackets of /sys/kernel/mm/transparent_hugepage/enabled
 * ("always [madvise] never": "madvise") into @buf; "" if none. */
void thp_mode_parse(const char *text, size_t len, char *buf, size_t size);

/*
 * Field @key ("Rss", "AnonHugePages") of the text of
 * /proc/PID/smaps_rollup, in bytes: 0, -ENOENT without the line,
 * -EINVAL for a number that is not one.
 */
int smaps_rollup_field(const char *text, size_t len, const char *key,
		       uint64_t *bytes);

/*
 * Rss and AnonHugePages of every mapping from "smaps_rollup" under
 * @proc_fd (as proc_memory_read_at()): one page walk without the text
 * of every mapping, what explain guesses from before a thread is
 * borrowed.  0 or -errno (-ENOENT: a kernel before 4.14).
 */
int proc_rollup_read_at(int proc_fd, uint64_t *rss, uint64_t *anon_huge);

/* The kernel's THP size, from /sys: 0 unknown. */
uint64_t proc_huge_page(void);

/* The bytes of /sys/kernel/mm/transparent_hugepage/hpage_pmd_size
 * ("2097152\n"): a power of two; 0 for anything else. */
uint64_t huge_page_parse(const char *text);

/* Mark the mapping holding @sp a thread's stack (an anonymous or
 * "[stack]" one only).  true if one was marked. */
bool proc_memory_mark_sp(struct proc_memory *m, uint64_t sp);

/*
 * Mark the stacks no stack pointer named: glibc's pthread stacks are
 * private read-write anonymous mappings just above a PROT_NONE guard of
 * a few pages.  (A heap of glibc's arenas is the other way round: its
 * PROT_NONE reserve is above it, and it starts 64 MiB aligned.)
 */
void proc_memory_mark_guarded(struct proc_memory *m);

/* The sums of @m's mappings. */
void smaps_total(const struct proc_memory *m, struct smaps_totals *t);

/*
 * Read @m from @proc_fd, a directory fd of /proc/PID proven to be the
 * process (agent/pin.c): "smaps", "status", each
 * "task/TID/syscall"; the THP mode and huge page size from /sys and the
 * page size.
 * 0 or -errno (reading smaps or status failed: -ESRCH, -EACCES, ...).
 */
int proc_memory_read_at(int proc_fd, struct proc_memory *m);

/* The mappings of process @pid's smaps alone into @m (no status, no
 * stacks): 0 or -errno. */
int proc_smaps_read(pid_t pid, struct proc_memory *m);

void proc_memory_free(struct proc_memory *m);

#endif
