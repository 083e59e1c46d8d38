/*
 * One word of memsnap's own memory in a running process (inject.h,
 * inject_store_word()).
 */
#include "injector/inject.h"

#include "proc/pin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

int inject_store_word(const struct proc_pin *pin, uint64_t addr,
		      uint64_t value)
{
	ssize_t n;
	int dir, fd;

	if (addr % sizeof(value) || addr > INT64_MAX - sizeof(value))
		return -EINVAL;
	dir = proc_pin_dir(pin);
	if (dir < 0)
		return dir;
	/* through the pinned directory: the process's, never the next
	 * holder of its pid */
	fd = openat(dir, "mem", O_WRONLY | O_CLOEXEC);
	n = -errno;
	close(dir);
	if (fd < 0)
		return (int)n;
	n = pwrite(fd, &value, sizeof(value), (off_t)addr);
	if (n < 0)
		n = -errno;
	close(fd);
	return n == sizeof(value) ? 0 : n < 0 ? (int)n : -EIO;
}
