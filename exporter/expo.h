#ifndef MEMSNAP_EXPORTER_EXPO_H
#define MEMSNAP_EXPORTER_EXPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Prometheus's text exposition format (version 0.0.4), written into a
 * growing buffer:
 *
 *   # HELP memsnap_process_rss_bytes Resident memory: the Rss of every mapping.
 *   # TYPE memsnap_process_rss_bytes gauge
 *   memsnap_process_rss_bytes{pid="4242",comm="redis-server"} 1048576
 *
 * Every family is written whole (its HELP, TYPE and samples together),
 * as the format wants.  Label values are the target's strings (a
 * process may name itself anything): expo_label() writes them escaped
 * (backslash, double quote) and cleaned, every control byte, C1 control
 * and byte that is not UTF-8 a '?', so that no value can end its quotes,
 * its line, or a Prometheus parser that wants UTF-8.  HELP text is
 * memsnap's own, escaped as the format says (backslash, newline).
 *
 * A struct expo also builds a label list: expo_label() appends one
 * `name="value"`, with a comma after any before it, and the list's text
 * goes to expo_sample() as it is.  No function fails: the first
 * allocation that does sets @err (-ENOMEM) and the text stops growing,
 * so a caller checks once, at the end.
 */
struct expo {
	char *buf;		/* NUL-ended while @err is 0 */
	size_t len, cap;
	int err;
};

/* At most this many bytes of a label value are written (a value cut
 * there is cut on a character's boundary). */
#define EXPO_LABEL_MAX 256

void expo_init(struct expo *x);
void expo_free(struct expo *x);
/* Empty again, its buffer kept. */
void expo_reset(struct expo *x);
/* The text ("" when empty); valid until the next write. */
const char *expo_text(const struct expo *x);

/* Append @len bytes as they are. */
void expo_raw(struct expo *x, const char *s, size_t len);

/* "# HELP @name @help" and "# TYPE @name @type" (gauge, counter). */
void expo_family(struct expo *x, const char *name, const char *type,
		 const char *help);

/* Append `@name="@value"` to the label list @x: @value escaped and
 * cleaned, at most EXPO_LABEL_MAX bytes of it. */
void expo_label(struct expo *x, const char *name, const char *value);

/* The same for a number. */
void expo_label_u64(struct expo *x, const char *name, uint64_t value);

/*
 * One sample: `@name{@labels,@lname="@lvalue"} @value`.  @labels is a
 * list expo_label() built (NULL or "" for none); @lname, when not NULL,
 * adds one label more.  An integral value in [0, 2^53] is written as an
 * integer, NaN as NaN, infinities as +Inf and -Inf.
 */
void expo_sample(struct expo *x, const char *name, const char *labels,
		 const char *lname, const char *lvalue, double value);

/* The same for a count of bytes, events: written exactly. */
void expo_sample_u64(struct expo *x, const char *name, const char *labels,
		     const char *lname, const char *lvalue, uint64_t value);

#endif
