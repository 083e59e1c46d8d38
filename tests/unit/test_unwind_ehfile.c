/*
 * injector/unwind/ehfile.c: where an object's .eh_frame lies, from its
 * file's section headers, read in memsnap's own process.  Each test
 * writes a small ELF file (headers only: the section's bytes are the
 * unwinder's to read, from memory), spoils one field, and checks that
 * the good file is taken and the spoilt one refused.
 */
#include "injector/unwind/ehfile.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHSTR ".eh_frame\0.shstrtab"

/* The file's headers, written by file(): a PT_LOAD at offset 0, one
 * after it, and sections null, .eh_frame and .shstrtab. */
struct elf {
	Elf64_Ehdr e;
	Elf64_Phdr ph[2];
	Elf64_Shdr sh[3];
	size_t file_len;	/* bytes written: cut to spoil */
};

static struct elf good(void)
{
	struct elf f = {
		.e = {
			.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				     ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
			.e_type = ET_EXEC, .e_machine = EM_X86_64,
			.e_phoff = sizeof(Elf64_Ehdr), .e_phnum = 2,
			.e_phentsize = sizeof(Elf64_Phdr),
			.e_shoff = 0x3000, .e_shnum = 3, .e_shstrndx = 2,
			.e_shentsize = sizeof(Elf64_Shdr),
		},
		.ph = {
			{ .p_type = PT_LOAD, .p_offset = 0,
			  .p_vaddr = 0x400000, .p_filesz = 0x2000,
			  .p_memsz = 0x2000 },
			{ .p_type = PT_LOAD, .p_offset = 0x2000,
			  .p_vaddr = 0x402000, .p_filesz = 0x1000,
			  .p_memsz = 0x3000 },
		},
		.sh = {
			{ 0 },
			{ .sh_name = 0, .sh_type = SHT_PROGBITS,
			  .sh_flags = SHF_ALLOC, .sh_addr = 0x401000,
			  .sh_offset = 0x1000, .sh_size = 0x100 },
			{ .sh_name = 10, .sh_type = SHT_STRTAB,
			  .sh_offset = 0x3100, .sh_size = sizeof(SHSTR) },
		},
		.file_len = 0x3200,
	};

	return f;
}

/* unwind_ehfile_section() of @f written to a file. */
static int section_of(const struct elf *f, uint64_t *vaddr0, uint64_t *addr,
		      uint64_t *len)
{
	static unsigned char buf[0x3200];
	int fd = memfd_create("ehfile", MFD_CLOEXEC), rc;

	cr_assert_geq(fd, 0);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &f->e, sizeof(f->e));
	memcpy(buf + sizeof(f->e), f->ph, sizeof(f->ph));
	memcpy(buf + 0x3000, f->sh, sizeof(f->sh));
	memcpy(buf + 0x3100, SHSTR, sizeof(SHSTR));
	cr_assert_eq(write(fd, buf, f->file_len), (ssize_t)f->file_len);
	rc = unwind_ehfile_section(fd, f->file_len, vaddr0, addr, len);
	close(fd);
	return rc;
}

static void refused(const struct elf *f, const char *what)
{
	uint64_t v, a, l;

	cr_assert_eq(section_of(f, &v, &a, &l), -1, "%s: taken", what);
}

Test(unwind_ehfile, good_file)
{
	struct elf f = good();
	uint64_t v, a, l;

	cr_assert_eq(section_of(&f, &v, &a, &l), 0);
	cr_assert_eq(v, 0x400000);
	cr_assert_eq(a, 0x401000);
	cr_assert_eq(l, 0x100);
	/* gas's type for it on x86-64, not on another CPU */
	f.sh[1].sh_type = 0x70000001;
	cr_assert_eq(section_of(&f, &v, &a, &l), 0);
	f.e.e_machine = EM_AARCH64;
	refused(&f, "x86-64's UNWIND type on arm64");
}

/* The section inside a PT_LOAD's file bytes, not across its end, nor
 * in its zero-filled tail, nor of more than 64 MiB. */
Test(unwind_ehfile, section_inside_a_segment)
{
	struct elf f = good();

	f.sh[1].sh_addr = 0x401f80;
	refused(&f, "across the end of a segment");
	f = good();
	f.sh[1].sh_addr = 0x403000;
	refused(&f, "in the zero-filled tail");
	f = good();
	f.sh[1].sh_addr = 0x3ff000;
	refused(&f, "below every segment");
	f = good();
	f.sh[1].sh_addr = 0xffffffffffffff80ull;
	refused(&f, "wrapping around");
	f = good();
	f.ph[0].p_filesz = f.ph[0].p_memsz = 0x8000000;
	f.sh[1].sh_size = (64u << 20) + 8;
	refused(&f, "longer than 64 MiB");
	f = good();
	f.sh[1].sh_size = 4;
	refused(&f, "shorter than a record");
	f = good();
	f.ph[0].p_offset = 0x1000;
	refused(&f, "no segment at file offset 0");
}

/* A section of another kind or name. */
Test(unwind_ehfile, section_kind_and_name)
{
	struct elf f = good();

	f.sh[1].sh_flags = 0;
	refused(&f, "not loaded (no SHF_ALLOC)");
	f = good();
	f.sh[1].sh_type = SHT_NOBITS;
	refused(&f, "NOBITS");
	f = good();
	f.sh[1].sh_name = 1;		/* "eh_frame" */
	refused(&f, "another name");
	f = good();
	f.sh[1].sh_name = 1000;
	refused(&f, "a name past the names");
}

/* Headers out of bounds: counts, sizes, the file cut short. */
Test(unwind_ehfile, headers_out_of_bounds)
{
	struct elf f = good();

	f.e.e_shnum = 2000;
	refused(&f, "2000 section headers");
	f = good();
	f.e.e_shstrndx = 3;
	refused(&f, "names in no section");
	f = good();
	f.sh[2].sh_type = SHT_PROGBITS;
	refused(&f, "names not a STRTAB");
	f = good();
	f.sh[2].sh_size = (64u << 10) + 1;
	refused(&f, "names of more than 64 KiB");
	f = good();
	f.e.e_shentsize = 40;
	refused(&f, "an odd section header size");
	f = good();
	f.e.e_shoff = 0x8000000000000000ull;
	refused(&f, "section headers past any offset");
	f = good();
	f.file_len = 0x3080;
	refused(&f, "the section headers cut short");
	f = good();
	f.e.e_phnum = 65;
	refused(&f, "65 program headers");
	f = good();
	f.e.e_phoff = 0x31c0;
	refused(&f, "program headers past the end");
	f = good();
	f.e.e_ident[EI_CLASS] = ELFCLASS32;
	refused(&f, "a 32-bit file");
}
