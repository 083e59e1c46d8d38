/*
 * jemalloc through mallctl(), called in a borrowed thread of the target.
 *
 * One mallctl call places its name, old value, old length and new value
 * in buffers on the borrowed stack (injector/inject.h):
 *
 *   mallctl("prof.active", bufs[1], bufs[2], bufs[3], 1)
 *           bufs[0]        old(1)   oldlen  new(1)
 *
 * and copies the old value and length back after the call.
 */
#include "allocators/jemalloc.h"

#include "allocators/allocator_internal.h"
#include "proc/procfs.h"
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int jemalloc_init(struct jemalloc *je, struct inject_session *s, pid_t pid,
		  const struct allocator *a)
{
	const struct alloc_func *f = allocator_func(a, "mallctl");

	memset(je, 0, sizeof(*je));
	if (a->kind != ALLOC_JEMALLOC || !f || !f->found)
		return -ENOENT;
	je->s = s;
	je->pid = pid;
	je->mallctl = f->addr;
	snprintf(je->prefix, sizeof(je->prefix), "%s", a->prefix);
	return 0;
}

static void arg_buf(struct inject_call *c, unsigned int i, unsigned int buf)
{
	c->args[i] = (struct inject_arg){ .kind = INJECT_ARG_BUF, .buf = buf };
}

static void arg_int(struct inject_call *c, unsigned int i, uint64_t v)
{
	c->args[i] = (struct inject_arg){ .kind = INJECT_ARG_INT, .value = v };
}

/* mallctl's int result (the low 32 bits of the return register): 0 or
 * a positive errno. */
static int mallctl_result(struct jemalloc *je, const struct inject_result *r)
{
	int ret = (int)(uint32_t)r->ret;

	je->err = 0;
	if (!ret)
		return 0;
	je->err = ret;
	return -EREMOTEIO;
}

/*
 * One mallctl.  @oldp/@oldlen: where the old value goes and its size
 * (NULL, 0: not read); @newp/@newlen likewise.  *@got is the length
 * mallctl reports back.
 */
static int mallctl(struct jemalloc *je, const char *name, void *oldp,
		   size_t oldlen, size_t *got, const void *newp,
		   size_t newlen)
{
	struct inject_call c = { .fn = je->mallctl, .nargs = 5 };
	struct inject_result r;
	uint64_t len = oldlen;
	unsigned int nb = 0;
	int rc;

	if (strlen(name) + 1 + oldlen + newlen + 8 > INJECT_MAX_BUF_BYTES)
		return -E2BIG;
	c.bufs[nb] = (struct inject_buf){ .in = name, .len = strlen(name) + 1 };
	arg_buf(&c, 0, nb++);
	if (oldp) {
		c.bufs[nb] = (struct inject_buf){ .out = oldp, .len = oldlen };
		arg_buf(&c, 1, nb++);
		c.bufs[nb] = (struct inject_buf){ .in = &len, .out = &len,
						  .len = sizeof(len) };
		arg_buf(&c, 2, nb++);
	} else {
		arg_int(&c, 1, 0);
		arg_int(&c, 2, 0);
	}
	if (newp) {
		c.bufs[nb] = (struct inject_buf){ .in = newp, .len = newlen };
		arg_buf(&c, 3, nb++);
	} else {
		arg_int(&c, 3, 0);
	}
	arg_int(&c, 4, newp ? newlen : 0);
	c.nbufs = nb;
	rc = inject_call(je->s, &c, &r);
	if (rc)
		return rc;
	rc = mallctl_result(je, &r);
	if (!rc && got)
		*got = (size_t)len;
	return rc;
}

/* Read a value of exactly @size bytes. */
static int read_exact(struct jemalloc *je, const char *name, void *out,
		      size_t size)
{
	size_t got = 0;
	int rc;

	rc = mallctl(je, name, out, size, &got, NULL, 0);
	if (!rc && got != size) {
		/* mallctl gives EINVAL on a size mismatch; a different
		 * length back would be a jemalloc we do not understand. */
		je->err = EINVAL;
		return -EREMOTEIO;
	}
	return rc;
}

int jemalloc_read_bool(struct jemalloc *je, const char *name, bool *out)
{
	unsigned char b = 0;
	int rc = read_exact(je, name, &b, 1);

	if (!rc)
		*out = b != 0;
	return rc;
}

int jemalloc_read_size(struct jemalloc *je, const char *name, uint64_t *out)
{
	return read_exact(je, name, out, sizeof(*out));
}

int jemalloc_read_unsigned(struct jemalloc *je, const char *name,
			   unsigned int *out)
{
	uint32_t v = 0;
	int rc = read_exact(je, name, &v, sizeof(v));

	if (!rc)
		*out = v;
	return rc;
}

int jemalloc_read_string(struct jemalloc *je, const char *name, char *buf,
			 size_t size)
{
	uint64_t ptr = 0;
	int rc;

	if (!size)
		return -EINVAL;
	buf[0] = '\0';
	rc = read_exact(je, name, &ptr, sizeof(ptr));
	if (rc || !ptr)
		return rc;
	/* The string is the target's: read it without trusting it. */
	rc = proc_read_cstr(je->pid, ptr, buf, size);
	if (rc == -ENAMETOOLONG) {
		buf[size - 1] = '\0';
		rc = 0;
	}
	return rc;
}

int jemalloc_write_bool(struct jemalloc *je, const char *name, bool val,
			bool *old)
{
	unsigned char nv = val, ov = 0;
	size_t got = 0;
	int rc;

	rc = mallctl(je, name, old ? &ov : NULL, old ? 1 : 0, &got, &nv, 1);
	if (!rc && old)
		*old = ov != 0;
	return rc;
}

int jemalloc_write_size(struct jemalloc *je, const char *name, uint64_t val)
{
	return mallctl(je, name, NULL, 0, NULL, &val, sizeof(val));
}

int jemalloc_write_void(struct jemalloc *je, const char *name)
{
	return mallctl(je, name, NULL, 0, NULL, NULL, 0);
}

int jemalloc_epoch(struct jemalloc *je)
{
	uint64_t one = 1;

	return mallctl(je, "epoch", NULL, 0, NULL, &one, sizeof(one));
}

/*
 * A "const char *" write: mallctl reads the pointer at newp, so both the
 * pointer and the string must be in the target, the pointer holding the
 * string's remote address: a relocation (see inject.h).
 */
int jemalloc_write_string(struct jemalloc *je, const char *name,
			  const char *val)
{
	size_t namelen = strlen(name) + 1, vallen = strlen(val) + 1;
	struct inject_call c = { .fn = je->mallctl, .nargs = 5, .nbufs = 3 };
	struct inject_result r;
	uint64_t ptr = 0;
	int rc;

	if (namelen + vallen + sizeof(ptr) > INJECT_MAX_BUF_BYTES)
		return -E2BIG;
	c.bufs[0] = (struct inject_buf){ .in = name, .len = namelen };
	c.bufs[1] = (struct inject_buf){ .in = &ptr, .len = sizeof(ptr) };
	c.bufs[2] = (struct inject_buf){ .in = val, .len = vallen };
	c.relocs[0] = (struct inject_reloc){ .buf = 1, .target = 2 };
	c.nrelocs = 1;
	arg_buf(&c, 0, 0);
	arg_int(&c, 1, 0);
	arg_int(&c, 2, 0);
	arg_buf(&c, 3, 1);
	arg_int(&c, 4, sizeof(ptr));
	rc = inject_call(je->s, &c, &r);
	if (rc)
		return rc;
	return mallctl_result(je, &r);
}

const char *jemalloc_strerror(int err, const char *name)
{
	switch (err) {
	case ENOENT:
		return !strncmp(name, "prof.", 5)
			       ? "not available (profiling off or compiled out)"
			       : "unknown name or compiled out";
	case EPERM:
		return "read-only or write-only";
	case EINVAL:
		return "value of the wrong size for this jemalloc version";
	case EFAULT:
		return "the profile could not be written";
	case EAGAIN:
		return "resources temporarily unavailable";
	default:
		return strerror(err);
	}
}

void jemalloc_conf_var(const char *prefix, char *buf, size_t size)
{
	size_t i, n = 0;

	for (i = 0; prefix[i] && n + 1 < size; i++)
		buf[n++] = (char)toupper((unsigned char)prefix[i]);
	buf[n] = '\0';
	snprintf(buf + n, size - n, "MALLOC_CONF");
}
