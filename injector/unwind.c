#include "injector/unwind.h"

#include <errno.h>
#include <libunwind-ptrace.h>

static int unw_err(int e)
{
	switch (e) {
	case -UNW_ENOMEM:
		return -ENOMEM;
	case -UNW_EINVAL:
		return -EINVAL;
	default:
		return -EIO;
	}
}

int unwind_thread(pid_t tid, uint64_t *pcs, size_t max)
{
	unw_addr_space_t as;
	unw_cursor_t cur;
	void *upt;
	size_t n = 0;
	int rc;

	if (max == 0)
		return 0;
	as = unw_create_addr_space(&_UPT_accessors, 0);
	if (!as)
		return -ENOMEM;
	upt = _UPT_create(tid);
	if (!upt) {
		unw_destroy_addr_space(as);
		return -ENOMEM;
	}
	rc = unw_init_remote(&cur, as, upt);
	if (rc < 0) {
		rc = unw_err(rc);
		goto out;
	}
	do {
		unw_word_t ip;

		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		pcs[n++] = ip;
	} while (n < max && unw_step(&cur) > 0);
	rc = (int)n;
out:
	_UPT_destroy(upt);
	unw_destroy_addr_space(as);
	return rc;
}
