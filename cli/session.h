#ifndef MEMSNAP_CLI_SESSION_H
#define MEMSNAP_CLI_SESSION_H

#include "allocators/allocator.h"
#include "proc/pin.h"
#include "proc/procinfo.h"
#include "sampler/sampler.h"
#include "cli/cli.h"
#include "symbols/detect.h"
#include "proc/maps.h"
#include "symbols/objects.h"

/*
 * The steps every allocator command shares: find the process and its
 * allocators (without stopping it), pick the allocator to act on, borrow
 * one thread, and turn any failure into one message and an exit code.
 * Each function that returns int returns EXIT_OK or the exit code after
 * printing the error.
 */
struct target {
	struct proc_pin pin;	/* taken before anything was read */
	struct procinfo pi;
	struct maps *maps;
	struct objects *os;
	struct detection det;
	bool have_det;
	const struct allocator *a; /* the allocator to act on */
	/* memsnap's sampler in the process, looked for once by the view:
	 * 0 (found; @sampler says how it is), -ENOENT, -EPROTO, ... */
	int sampler_rc;
	struct sampler_status sampler;
	struct inject_opts iopts;
	char why[2048];		   /* inject_open()'s reasons */
	/* what target_open_session()'s failure @open_rc means */
	int open_rc;
	struct diag open_diag;
	struct alloc_session *s;
	struct inject_timings timings;
	pid_t tid;
};

/*
 * The view of process @opt->pid, loaded once for command @cmd: pinned
 * first (proc/pin.h; @opt->pin when a command holds one for all its
 * steps, as watch does: a view of anything else is refused), then its
 * procinfo (kernel threads, zombies and 32-bit processes refused),
 * maps, objects, allocators and memsnap's sampler if it is there (read
 * from memory), then the pin checked again: all of it is the pinned
 * process's.  EXIT_OK, or the exit code after one error line
 * (EXIT_NO_PROCESS, PROC_PIN_GONE, when the pinned process exited).
 */
int target_view(const struct options *opt, const char *cmd,
		struct target *t);

/*
 * Load process @opt->pid for command @cmd (target_view()) and pick the allocator that
 * can do @cap (ALLOC_CAN_*; 0: any): --allocator NAME, else the one
 * serving malloc, else the only one that can.
 */
int target_load(const struct options *opt, const char *cmd,
		unsigned int cap, struct target *t);

/* The allocator part of target_load() on a loaded view. */
int target_pick(const struct options *opt, const char *cmd,
		unsigned int cap, struct target *t);

/* Is @tid a thread of the process (for --thread)?  Unreadable: yes,
 * the engine will say. */
bool target_has_thread(const struct target *t, pid_t tid);

struct json;

/* --json: open the reply object on stdout with "pid", "tid" and
 * "allocator", the head every command's reply shares. */
void target_json_begin(const struct target *t, struct json *j);

/* --timings: one line on stderr, the same for every command. */
void target_print_timings(const struct target *t, pid_t tid,
			  const struct inject_timings *tm);

struct dumpdir;

/*
 * The file agent's private directory in the target's view
 * (dumpdir_create()) for the process of the view: pinned by its pidfd
 * and start time, with the credentials the view read.  EXIT_OK, or the
 * exit code after one line: EXIT_NO_PROCESS when the process exited or
 * changed its credentials since the view (nothing was done for it),
 * else EXIT_FAILURE_OTHER ("no place the target can write to").  When
 * the command can do without (DUMPDIR_OPTIONAL), only EXIT_NO_PROCESS is
 * an error, and *@d is left NULL for the others.  DUMPDIR_DEFERRED: the
 * agent is started only when a capture needs the directory
 * (dumpdir_defer()), which fails then, in the session, if it must.
 */
enum dumpdir_need { DUMPDIR_OPTIONAL, DUMPDIR_NEEDED, DUMPDIR_DEFERRED };

int target_dumpdir(const struct target *t, const char *cmd,
		   enum dumpdir_need need, struct dumpdir **d);

/* Borrow a thread (alloc_open); prints the failure. */
int target_attach(const struct options *opt, const char *cmd,
		  struct target *t);

/* The same without a message: 0 or -errno (see target_describe()). */
int target_open_session(const struct options *opt, struct target *t);

/* Restore and detach; prints the --timings line.  The exit code. */
int target_detach(const struct options *opt, const char *cmd,
		  struct target *t);

/*
 * Print the failure @rc of an operation (or of the attach) and return
 * its exit code.
 */
int target_error(const struct target *t, const char *cmd, int rc);

/* SIGINT, SIGTERM or SIGHUP arrived while a thread was borrowed (or,
 * after target_catch_signals(), at any time). */
bool target_interrupted(void);
/* The signal that set it last (SIGINT, SIGTERM, SIGHUP), 0 none. */
int target_signal(void);

/* Forget the signal a command has acted on, so that the steps that
 * undo what it did (the watch's prof off) can run; another signal
 * interrupts them again. */
void target_signal_clear(void);

/* From now on those signals only set target_interrupted() (attaching
 * does it too). */
void target_catch_signals(void);

/* What the failure @rc means: its kind (the exit status), one line in
 * words, and a hint. */
void target_diag(const struct target *t, int rc, struct diag *d);

void target_free(struct target *t);

#endif
