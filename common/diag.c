#include "common/diag.h"

#include <errno.h>
#include <stdio.h>

void diag_vset(struct diag *d, enum diag_kind kind, const char *fmt,
	       va_list ap)
{
	vsnprintf(d->what, sizeof(d->what), fmt, ap);
	d->kind = kind;
}

enum diag_kind diag_kind_of(int rc)
{
	switch (rc) {
	case -ESRCH:
	case -ENOENT:
		return DIAG_NO_PROCESS;
	case -EPERM:
	case -EACCES:
		return DIAG_PERMISSION;
	case -ETIMEDOUT:
		return DIAG_TIMEOUT;
	case -EINTR:
		return DIAG_INTERRUPTED;
	default:
		return DIAG_FAILED;
	}
}
