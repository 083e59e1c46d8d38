#ifndef MEMSNAP_EXPORTER_EXPORTER_INTERNAL_H
#define MEMSNAP_EXPORTER_EXPORTER_INTERNAL_H

/*
 * Between the exporter's files: the process pin (pin.c), the choice of
 * targets (select.c), the labels (labels.c), the set and its readings
 * (targets.c) and the metrics written (render.c).
 */
#include "exporter/exporter.h"
#include "explain/explain.h"
#include "proc/pin.h"
#include "proc/smaps.h"

#include <regex.h>

/*
 * One process, pinned (proc/pin.h: its pidfd, then its start time) and
 * its /proc/PID opened as a directory proven to be that process's
 * (proc_pin_dir()).  A /proc/PID directory once open stays bound to its
 * process: a file opened through it is that process's, or fails once it
 * is gone.  Every read of the process is followed by pin_alive(), so
 * that a reading is never of a process that ended in the middle of it.
 */
struct pin {
	struct proc_pin proc;
	int dir;		/* /proc/PID, O_PATH */
};

/*
 * What /proc/PID/stat says, parsed from its text:
 *
 *   4242 (redis-server) S 1 4242 4242 0 -1 4194560 ... 20 0 4 0 312 ...
 *
 * comm is between the first '(' and the last ')' (a process may put ')'
 * in its name); the fields after it are counted from the state.
 */
struct pin_stat {
	char comm[64];
	char state;
	bool kernel_thread;	/* PF_KTHREAD in flags */
	unsigned long threads;
	uint64_t start_time;	/* clock ticks after boot */
	uint64_t rss_pages;
};

/* @len bytes of a stat file's text.  0 or -EINVAL. */
int pin_stat_parse(const char *text, size_t len, struct pin_stat *st);

/*
 * Pin @pid (above) and read its stat through the pin into @st.  0,
 * -ESRCH when it exited (or its number was taken meanwhile), or -errno.
 */
int pin_open(pid_t pid, struct pin *p, struct pin_stat *st);

/* Does the pin still reach its process (alive or an unreaped zombie)? */
bool pin_alive(const struct pin *p);

/* Its stat, read through the pin, then pin_alive().  0, -ESRCH, -errno. */
int pin_stat_read(const struct pin *p, struct pin_stat *st);

/* Its executable's path (readlink of "exe" through the pin, then
 * pin_alive()): "" when it has none or it cannot be read. */
void pin_exe(const struct pin *p, char *buf, size_t size);

void pin_close(struct pin *p);

/*
 * The container's id in a cgroup path, for a join with the
 * orchestrator's metrics: the 64 hex digits of a runtime's scope or
 * directory ("/kubepods.slice/.../cri-containerd-<id>.scope",
 * "/system.slice/docker-<id>.scope", "/docker/<id>", "libpod-<id>",
 * "crio-<id>"), the last one in the path; "" when there is none.
 */
void container_id(const char *cgroup, char *id, size_t size);

/* What one scrape measured of a target (explain's parts of its /proc
 * part and the allocator's numbers last read). */
struct target_now {
	bool ok;
	uint64_t rss, swap, vm_hwm;
	bool heap_parts;	/* heap_in_use, heap_free, metadata apart */
	uint64_t part[PARTS];
	uint64_t heap;		/* else the pool as one part */
	size_t nf;
	const char *fid[EXPLAIN_MAX_FINDINGS];	/* static strings */
	uint64_t fbytes[EXPLAIN_MAX_FINDINGS];
	bool have_limit;
	uint64_t limit;
	bool have_reading;	/* the allocator's numbers are in it */
	uint64_t reading_age_ms;
};

/* A target: a pinned process and what the exporter keeps of it. */
struct target {
	struct pin pin;
	struct pin_stat st;	/* at the last scrape */
	bool given;		/* --pid: not found by the filters */
	bool ended;
	char exe[512];
	char cgroup[512];
	char container[80];
	/* pid, start, comm, executable, allocator, cgroup, container_id:
	 * fixed at its first reading (allocator is known then) */
	struct expo labels;
	bool read;		/* its first reading is done */
	uint64_t due_ms;	/* when its next reading is */
	struct exporter_reading r;	/* the last that was ok */
	uint64_t r_ms;		/* when that was */
	int last_failed;	/* the diag_kind of its last failed reading,
				   -1 none: said once */
	uint64_t stopped_us;	/* threads held for it, in all */
	uint64_t readings, attaches;
	struct target_now now;
};

/* The reasons a reading fails, as the label says them: one per
 * diag_kind. */
const char *exporter_reason(enum diag_kind kind);
#define EXPORTER_REASONS (DIAG_USAGE + 1)

struct exporter {
	struct exporter_config c;
	pid_t *pids;
	regex_t re;
	bool have_re;
	char cgroup[512];	/* --cgroup, as /proc/PID/cgroup says it */
	pid_t self;
	struct target **t;
	size_t n, cap;
	size_t dropped;		/* processes that passed, beyond the limit */
	uint64_t ended;		/* targets whose process exited */
	uint64_t failures[EXPORTER_REASONS];
	uint64_t proc_failures;	/* /proc parts that could not be read */
	uint64_t scrapes;
	double last_scrape_s;
	struct explain *ex;	/* one scrape's arithmetic, reused */
	uint64_t boot_time;	/* /proc/stat's btime: seconds since the
				   epoch; 0 unknown */
	long clk_tck;		/* the unit of a start time */
};

/*
 * Does the process of @p (stat @st, read through its pin) pass every
 * filter of @e?  Its executable and cgroup are read when a filter
 * needs them, into @t.
 */
bool select_passes(const struct exporter *e, const struct pin *p,
		   const struct pin_stat *st, struct target *t);

/*
 * The pids of /proc that are not targets now and could pass @e's
 * filters by their stat (read by number: a first look only; the pin
 * decides), largest RSS first, into *@out (malloc'ed).  How many, or
 * -errno.
 */
ssize_t select_candidates(const struct exporter *e, pid_t **out);

/* The cgroup path --cgroup names, as /proc/PID/cgroup says them:
 * "/sys/fs/cgroup/a/b" and "a/b" are "/a/b".  -EINVAL: not one. */
int select_cgroup_arg(const char *arg, char *path, size_t size);

/* The families of one scrape: every target's and the exporter's own. */
int render_scrape(struct exporter *e, struct expo *x, uint64_t now_ms);

/* @t's label list (pid, start, comm, ...) from what it holds now. */
void render_labels(struct target *t);

#endif
