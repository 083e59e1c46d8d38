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

/*
 * Whose a mapping is, where memsnap knows better than "the program's":
 * the caller claims ranges (smap_claim) for a language runtime's heap
 * (Go's arenas) and for memsnap's own sampler in the process.
 */
enum smap_owner {
	SMAP_PROGRAM,	/* the program's, or its allocator's */
	SMAP_RUNTIME,	/* a language runtime's heap */
	SMAP_MEMSNAP,	/* memsnap's sampler: its code and its table */
};

struct smap_claim {
	uint64_t lo, hi;	/* [lo, hi) */
	enum smap_owner owner;
};

struct smap {
	uint64_t start, end;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	unsigned int prot;	/* MAP_PROT_* (proc/maps.h) */
	bool shared;
	enum smap_kind kind;
	/* bytes */
	uint64_t rss, pss, anon, anon_huge, swap;
	/* A thread's stack pointer is in it (task/TID/syscall). */
	bool sp_in;
	/* glibc's heap_info at its start says it is an arena's heap
	 * (proc/arenas.c). */
	bool arena_heap;
	/* A thread's own control block names it as its stack: glibc's
	 * and musl's record of the stack block they mapped, whose end is
	 * this mapping's end (proc/stacks.c). */
	bool vouched;
	/* Of a mapping holding a thread's stack, the part that is stack
	 * when it is less than the whole: a kernel before 6.7 merges a
	 * thread's stack with an anonymous mapping right above it
	 * (proc/stacks.c).  stack_anon is the resident anonymous bytes of
	 * the stack blocks found in it, counted only when every stack
	 * pointer in it found its block (stack_bounded, not
	 * stack_unbounded); else the whole mapping is stack. */
	uint64_t stack_anon;
	bool stack_bounded, stack_unbounded;
	/* Its kernel name, when it has one: "[anon:NAME]" (a program's
	 * prctl(PR_SET_VMA_ANON_NAME)), "/memfd:NAME", "/dev/shm/NAME",
	 * "/SYSV0052e2c1": at m->names + name - 1; 0 none. */
	uint32_t name;
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
	uint64_t anon_arenas;	/* of "[heap]" and of glibc's arena heaps
				   (smap.arena_heap) */
	uint64_t anon_in_files;	/* Anonymous of file mappings (COW) */
	uint64_t file;		/* Rss - Anonymous of file and other mappings */
	uint64_t shmem;		/* Rss of shared memory mappings */
	uint64_t anon_huge;	/* every AnonHugePages */
	uint64_t anon_huge_private;	/* AnonHugePages of the mappings
					   anon_private counts */
	uint64_t swap;		/* every Swap */
	uint64_t stacks;	/* Anonymous of thread stacks (smap_is_stack) */
	uint64_t largest_stack;	/* the largest of those */
	size_t nstacks;
	uint64_t runtime;	/* Anonymous of private mappings claimed for
				   a runtime's heap (not in anon_private) */
	uint64_t memsnap;	/* Anonymous of memsnap's sampler (not in
				   anon_private) */
	uint64_t shmem_pss;	/* Pss of shared memory mappings */
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
	/* Stacks a thread's control block vouched for; stack tops read to
	 * look, and those left unread past the budget (proc/stacks.c). */
	size_t stacks_vouched, stack_tops_read, stack_tops_skipped;
	/* The kernel names of mappings (struct smap's name), each
	 * NUL-ended, at most SMAP_NAME_MAX bytes. */
	char *names;
	size_t names_len, names_cap;
};

/* The longest name kept of a mapping (longer ones are cut). */
#define SMAP_NAME_MAX 96

/* The kernel name of @s in @m ("[anon:zone]", "/memfd:pool (deleted)"),
 * or NULL. */
const char *smap_name(const struct proc_memory *m, const struct smap *s);

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

/* The mapping of @m holding @addr, or NULL. */
struct smap *proc_memory_find(struct proc_memory *m, uint64_t addr);

/* Mark the mapping holding @sp as holding a thread's stack pointer (an
 * anonymous or "[stack]" one only).  true if one was marked. */
bool proc_memory_mark_sp(struct proc_memory *m, uint64_t sp);

/*
 * Whose @s is under @claims (@n of them, any order): the owner of the
 * first claim it overlaps, else SMAP_PROGRAM.
 */
enum smap_owner smap_owner_of(const struct smap *s,
			      const struct smap_claim *claims, size_t n);

/*
 * Is @s, owned by @owner, a thread's stack?  The threads say so, never
 * the mapping's shape: "[stack]" (the main thread's), a mapping a
 * thread's control block vouches for, or one that holds a thread's
 * stack pointer unless a runtime's heap claims it (Go's goroutines,
 * and its threads' own stacks, live in its heap).
 */
bool smap_is_stack(const struct smap *s, enum smap_owner owner);

/* Of a mapping smap_is_stack() says holds a stack, the resident
 * anonymous bytes that are stack: all of them, unless its stacks were
 * bounded (struct smap's stack_anon). */
uint64_t smap_stack_anon(const struct smap *s);

/* The sums of @m's mappings, with @claims (@nclaims, may be 0) saying
 * whose some of them are. */
void smaps_total(const struct proc_memory *m, const struct smap_claim *claims,
		 size_t nclaims, struct smaps_totals *t);

/*
 * The stack block a thread's control block records, in @n words read
 * at @at: the top of a mapping [@lo, @hi).  A control block is found by
 * a word that holds its own address (x86-64's thread pointer: glibc's
 * and musl's control block start with it) or a 32-bit word that holds
 * one of the process's thread ids @tids (@ntids, sorted; glibc's
 * struct pthread on every CPU); near it (4 KiB either way) two words
 * (start, size) with start <= @lo and start + size == @hi: glibc's
 * stackblock and stackblock_size, musl's map_base and map_size, which
 * take in the guard below.  true, and the start in *@block.
 */
bool stack_block_find(const uint64_t *w, size_t n, uint64_t at, uint64_t lo,
		      uint64_t hi, const pid_t *tids, size_t ntids,
		      uint64_t *block);

/*
 * The stack block holding @sp, in a mapping [@lo, @hi) that may hold
 * more than the stack: in @n words read at @at (above @sp), a control
 * block found as stack_block_find() finds one, and near it (start,
 * size) with start <= @sp < start + size <= @hi.  true, and the part
 * of the mapping that is the block in [*@from, *@to).
 */
bool stack_block_holding(const uint64_t *w, size_t n, uint64_t at,
			 uint64_t lo, uint64_t sp, uint64_t hi,
			 const pid_t *tids, size_t ntids, uint64_t *from,
			 uint64_t *to);

/*
 * Vouch for the stacks of @m's threads that no stack pointer named
 * (threads running, or past the budget): the tops of the private
 * read-write anonymous mappings with a PROT_NONE mapping just below
 * (glibc's guard, HotSpot's guard zone, musl's) are read through
 * @mem_fd (/proc/PID/mem) and kept when stack_block_find() finds the
 * thread's record there.  At most 2 x @tids + 256 tops are read (a
 * process may map any number of fenced mappings).
 */
void proc_memory_vouch_stacks(struct proc_memory *m, int mem_fd,
			      const pid_t *tids, size_t ntids);

/* Every thread's stack pointer under @proc_fd (task/TID/syscall) marked
 * in @m, then its other stacks vouched for through @mem_fd (its
 * /proc/PID/mem, or -1), and the stacks merged into a larger mapping
 * bounded (their blocks found above their stack pointers, their
 * resident pages counted in @proc_fd's pagemap). */
void proc_memory_read_stacks(int proc_fd, int mem_fd, struct proc_memory *m);

/* Is @w, the first four words of a mapping, glibc's heap_info of an
 * arena's heap (ar_ptr in a 64 MiB aligned heap's first page, prev 0
 * or 64 MiB aligned, 0 < size <= mprotect_size <= 64 MiB)? */
bool arena_heap_header(const uint64_t w[4]);

/* Mark the mappings of @m shaped as glibc's arena heaps (private,
 * read-write, 64 MiB aligned, at most 64 MiB) whose first words,
 * read through @mem_fd, are a heap_info (arena_heap_header()). */
void proc_memory_vouch_arenas(struct proc_memory *m, int mem_fd);

/*
 * Read @m from @proc_fd, a directory fd of /proc/PID proven to be the
 * process (agent/pin.c): "smaps", "status", the threads' stacks
 * (proc_memory_read_stacks()); the THP mode and huge page size from
 * /sys and the page size.
 * 0 or -errno (reading smaps or status failed: -ESRCH, -EACCES, ...).
 */
int proc_memory_read_at(int proc_fd, struct proc_memory *m);

/* The largest mapping of @m of kind @kind by Rss, or NULL. */
const struct smap *smaps_largest(const struct proc_memory *m,
				 enum smap_kind kind);

/* Who else maps a piece of shared memory (proc/sharers.c). */
#define PROC_SHARERS_MAX 8

struct proc_sharers {
	size_t total;		/* other processes that map it */
	size_t n;		/* of them, listed below */
	pid_t pid[PROC_SHARERS_MAX];
	char comm[PROC_SHARERS_MAX][16];	/* cleaned of control bytes */
	size_t scanned;		/* processes looked at */
	bool cut;		/* stopped at the bound: there may be more */
};

/*
 * The processes but @self whose maps name device @maj:@min and inode
 * @ino (a shared memory mapping's: SysV, /dev/shm, memfd, shared
 * anonymous), from /proc/N/maps of at most 4096 processes.  0, or
 * -errno (-EINVAL for inode 0).
 */
int proc_sharers(pid_t self, uint32_t maj, uint32_t min, uint64_t ino,
		 struct proc_sharers *out);

/* The mappings of process @pid's smaps alone into @m (no status, no
 * stacks): 0 or -errno. */
int proc_smaps_read(pid_t pid, struct proc_memory *m);

void proc_memory_free(struct proc_memory *m);

#endif
