# libFuzzer harnesses for the parsers of untrusted input: maps text, ELF
# files, heap-profile dumps, the unwinder's view of a target's stack
# and unwind tables, the entry-point patch planner's view of a target's
# functions, what a target's allocator prints for `stats`, and the
# smaps, status and stack pointers `explain` reads with its arithmetic,
# a JVM's counters (hsperfdata), and a watch's series with its trends
# (tests/fuzz/fuzz_*.c).  `make fuzz` builds
# them; scripts/test-fuzz runs them briefly, bench/fuzz.sh for long.
#
# The library is compiled a second time, by clang with the fuzzer's
# coverage and ASan+UBSan, into $(B)/fuzz/obj: only the modules the
# parsers live in (profile -> symbols -> proc -> common, see
# docs/DESIGN.md, "Layers"; the unwinder's core with this CPU's pure
# arch facts; the allocators' text parsers and their tables; the patch
# planners of both architectures go into their harnesses), so the normal gcc build of $(B) is never touched.
# Not part of `tests`.
#
# FUZZ_LIBUNWIND: a libunwind built with the same instrumentation
# (bench/fuzz.sh builds Debian's 1.6.2 so); otherwise the system's, in
# which only a crash is seen.

FUZZ_CC ?= clang-14
FUZZ_D := $(B)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -I. $(WARNINGS) -D_GNU_SOURCE \
	-DMEMSNAP_VERSION='"$(VERSION)"' $(LIB_CFLAGS) -O1 -g $(FUZZ_SAN) \
	-fsanitize=fuzzer-no-link
FUZZ_LIB_SRCS := $(foreach m,common proc symbols profile,$(wildcard $(m)/*.c)) \
	injector/unwind/core.c injector/unwind/lookup.c injector/unwind/cfi.c \
	injector/unwind/ehframe.c \
	injector/unwind/pages.c injector/unwind/ehfile.c \
	injector/arch/$(ARCH)-code.c \
	injector/patch.c \
	allocators/stats.c allocators/glibc_parse.c \
	allocators/mimalloc_parse.c allocators/tcmalloc_parse.c \
	allocators/account_tables.c $(wildcard explain/*.c) \
	$(wildcard timeline/*.c)
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FUZZ_D)/obj/%.o)
FUZZ_HARNESSES := maps elf elf-debugdata profile unwind ehfile patch \
	patch-aarch64 stats smaps series hsperf
FUZZ_BINS := $(FUZZ_HARNESSES:%=$(FUZZ_D)/fuzz-%)

fuzz: $(FUZZ_BINS)

$(FUZZ_D)/FLAGS: FORCE
	@mkdir -p $(FUZZ_D)
	@echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' | cmp -s - $@ || \
		echo '$(FUZZ_CC) $(FUZZ_CFLAGS)' > $@

# Relink when the libunwind linked in changes (bench/fuzz.sh's or not).
$(FUZZ_D)/LINKFLAGS: FORCE
	@mkdir -p $(FUZZ_D)
	@echo '$(FUZZ_LIBUNWIND)' | cmp -s - $@ || \
		echo '$(FUZZ_LIBUNWIND)' > $@

$(FUZZ_D)/obj/%.o: %.c $(FUZZ_D)/FLAGS
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

# One ELF harness, twice: the file as it is, and the file as the
# MiniDebugInfo image (.gnu_debugdata) of an outer ELF made around it.
$(FUZZ_D)/obj/tests/fuzz/fuzz_elf_debugdata.o: tests/fuzz/fuzz_elf.c \
		$(FUZZ_D)/FLAGS
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_DEBUGDATA -MMD -MP -c -o $@ $<

# The patch planners, not in the fuzz library: each is linked into its
# own harness and both are fuzzed on any machine (capstone decodes
# either), fuzz-patch x86-64's, fuzz-patch-aarch64 arm64's.
$(FUZZ_D)/obj/tests/fuzz/fuzz_patch_aarch64.o: tests/fuzz/fuzz_patch.c \
		$(FUZZ_D)/FLAGS
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_PLANNER_AARCH64 -MMD -MP -c -o $@ $<

$(FUZZ_D)/libmemsnap-fuzz.a: $(FUZZ_LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

# Each harness: its own object and the library.
FUZZ_OBJ := $(FUZZ_D)/obj/tests/fuzz
$(FUZZ_D)/fuzz-maps: $(FUZZ_OBJ)/fuzz_maps.o
$(FUZZ_D)/fuzz-elf: $(FUZZ_OBJ)/fuzz_elf.o
$(FUZZ_D)/fuzz-elf-debugdata: $(FUZZ_OBJ)/fuzz_elf_debugdata.o
$(FUZZ_D)/fuzz-profile: $(FUZZ_OBJ)/fuzz_profile.o
$(FUZZ_D)/fuzz-unwind: $(FUZZ_OBJ)/fuzz_unwind.o
$(FUZZ_D)/fuzz-ehfile: $(FUZZ_OBJ)/fuzz_ehfile.o
$(FUZZ_D)/fuzz-patch: $(FUZZ_OBJ)/fuzz_patch.o \
	$(FUZZ_D)/obj/injector/arch/x86_64-patch.o
$(FUZZ_D)/fuzz-patch-aarch64: $(FUZZ_OBJ)/fuzz_patch_aarch64.o \
	$(FUZZ_D)/obj/injector/arch/aarch64-patch.o
$(FUZZ_D)/fuzz-stats: $(FUZZ_OBJ)/fuzz_stats.o
$(FUZZ_D)/fuzz-smaps: $(FUZZ_OBJ)/fuzz_smaps.o
$(FUZZ_D)/fuzz-series: $(FUZZ_OBJ)/fuzz_series.o
$(FUZZ_D)/fuzz-hsperf: $(FUZZ_OBJ)/fuzz_hsperf.o
$(FUZZ_BINS): $(FUZZ_D)/libmemsnap-fuzz.a $(FUZZ_D)/LINKFLAGS
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $(filter %.o,$^) \
		$(filter %.a,$^) $(FUZZ_LIBUNWIND) $(LIB_LIBS)

.PHONY: fuzz
