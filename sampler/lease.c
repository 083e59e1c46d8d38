/*
 * The lease of a watch's sampler, renewed while the process runs
 * (sampler/sampler.h, sampler_renew()).
 */
#include "sampler/internal.h"

#include "injector/inject.h"
#include "proc/pin.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

int sampler_renew(const struct proc_pin *pin, uint64_t image, uint64_t lease)
{
	uint64_t ctl = image + SAMPLER_OFF_sampler_ctl;
	struct sampler_ctl *c = malloc(sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = image ? sampler_read_ctl(pin->pid, ctl, c) : -ENOENT;
	if (rc == -ENODATA)
		rc = -ENOENT;
	if (!rc && (!c->active || !c->lease_until))
		rc = -ENOENT;	/* off, or on for good: not the watch's */
	if (!rc)
		rc = proc_pin_check(pin);
	free(c);
	if (rc)
		return rc;
	return inject_store_word(pin, ctl + offsetof(struct sampler_ctl,
						     lease_until),
				 (uint64_t)time(NULL) + lease);
}
