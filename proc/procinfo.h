#ifndef MEMSNAP_PROC_PROCINFO_H
#define MEMSNAP_PROC_PROCINFO_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Who a process is, from its /proc/PID/status, in the ids of the reader's
 * user namespace: "Uid:\t1000\t0\t0\t0", "Gid:", "CapPrm:", "CapEff:".
 */
struct proc_creds {
	uid_t uid[4];		/* real, effective, saved, fs */
	gid_t gid[4];
	uint64_t cap_prm, cap_eff;
};

/*
 * What /proc says about a process, read without stopping it.  Fields the
 * kernel does not give (a kernel thread has no memory; another user's
 * exe link is unreadable) stay 0 / empty.
 */
struct procinfo {
	pid_t pid;
	char comm[64];
	char state;		/* R S D Z T t X I ... from /proc/PID/stat */
	uint64_t start_time;	/* field 22 of stat: with the pid, the process */
	bool kernel_thread;	/* PF_KTHREAD */
	unsigned long threads;
	uint64_t rss_bytes, vsz_bytes;
	uid_t uid, euid;
	struct proc_creds creds; /* with have_creds: the whole of them */
	bool have_creds;
	pid_t tracer;		/* 0: not traced */
	char tracer_comm[64];
	char exe[PATH_MAX];	/* empty when unreadable */
	bool exe_deleted;
	/* The executable's identity, from stat(/proc/PID/exe). */
	bool exe_stat_ok;
	uint32_t exe_dev_major, exe_dev_minor;
	uint64_t exe_inode;
	/* e_ident[EI_CLASS] and e_machine of the executable (0: unknown). */
	unsigned char elf_class;
	uint16_t elf_machine;
};

/*
 * NULL when a process of @elf_class/@elf_machine is one memsnap can call
 * into (64-bit, or unknown); else what it is, for "pid N is ...": "a
 * 32-bit x86 (ia32) process", "an x32 process", "a 32-bit process".
 */
const char *procinfo_foreign_abi(unsigned char elf_class, uint16_t elf_machine);

/* 0, -ENOENT (no such process), -EACCES, -EIO (unparsable /proc). */
int procinfo_read(pid_t pid, struct procinfo *pi);

/* The credentials in a status file's text.  0 or -EIO (a line missing). */
int proc_creds_parse(const char *status, struct proc_creds *c);

/* Field 22 of /proc/PID/stat (clock ticks after boot).  0 or -errno. */
int proc_start_time(pid_t pid, uint64_t *out);

/* Field 28 of /proc/PID/stat, startstack: the main thread's stack
 * pointer when the program began (where argc is), above every frame of
 * that thread.  0 or -errno; 0 in *@out when the kernel hides it (a
 * reader without ptrace rights). */
int proc_start_stack(pid_t pid, uint64_t *out);

/* The same through @proc_fd, a directory fd of /proc/PID (or of
 * /proc/PID/task/TID: that thread's start time). */
int proc_start_time_at(int proc_fd, uint64_t *out);

/* The comm of @pid, or "?" if gone. */
void proc_comm(pid_t pid, char *buf, size_t size);

/* The aux vector entries memsnap uses (0 when absent). */
struct proc_auxv {
	uint64_t phdr;	/* AT_PHDR: the executable's program headers */
	uint64_t base;	/* AT_BASE: the dynamic loader (0: static) */
	bool secure;	/* AT_SECURE: set-user-ID, set-group-ID or file
			   capabilities gained at exec: its loader ignored
			   the environment's dangerous variables */
};

/* One read of /proc/PID/auxv.  0 or -errno. */
int proc_auxv_read(pid_t pid, struct proc_auxv *out);

/* The same through @proc_fd, a directory fd of /proc/PID (or of a
 * thread's /proc/PID/task/TID) that names the process for sure. */
int proc_auxv_read_at(int proc_fd, struct proc_auxv *out);

#endif
