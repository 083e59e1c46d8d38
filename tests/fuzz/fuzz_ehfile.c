/*
 * Fuzz unwind_ehfile_section() (injector/unwind/ehfile.c): the section
 * headers of an object without PT_GNU_EH_FRAME, read in memsnap's own
 * process (not the unwinder's sandbox) from the target's file.  Any
 * bytes must give -1 or an answer that keeps its promises:
 *
 *   - .eh_frame 8 bytes to UNWIND_EHFRAME_MAX long;
 *   - it lies inside the file bytes of a PT_LOAD, and a PT_LOAD has file
 *     offset 0 at *vaddr0 (checked here against the headers again);
 *   - no read out of bounds, no leak, no loop (the sanitizers and
 *     libFuzzer's limits).
 */
#include "injector/unwind/ehfile.h"

#include "tests/fuzz/fuzz.h"

#include <elf.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

/* Does a PT_LOAD of the input's headers hold [@addr, @addr + @len) in
 * its file bytes, and one start at file offset 0 at @vaddr0? */
static FUZZ_NOCOV void check(const uint8_t *data, size_t size,
			     uint64_t vaddr0, uint64_t addr, uint64_t len)
{
	Elf64_Ehdr e;
	bool inside = false, zero = false;
	unsigned int i;

	FUZZ_CHECK(size >= sizeof(e));
	memcpy(&e, data, sizeof(e));
	FUZZ_CHECK(e.e_phoff <= size &&
		   e.e_phnum * sizeof(Elf64_Phdr) <= size - e.e_phoff);
	for (i = 0; i < e.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, data + e.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD)
			continue;
		zero |= ph.p_offset == 0 && ph.p_vaddr == vaddr0;
		inside |= addr >= ph.p_vaddr &&
			  addr - ph.p_vaddr <= ph.p_filesz &&
			  len <= ph.p_filesz - (addr - ph.p_vaddr);
	}
	FUZZ_CHECK(zero && inside);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t vaddr0, addr, len;
	int fd = fuzz_memfd(data, size);

	if (!unwind_ehfile_section(fd, size, &vaddr0, &addr, &len)) {
		FUZZ_CHECK(len >= 8 && len <= UNWIND_EHFRAME_MAX);
		check(data, size, vaddr0, addr, len);
	}
	close(fd);
	return 0;
}
