# The sampler's in-target code (sampler/image/records.c, pool.c, hooks.c,
# slots.c, dlopen.c): a freestanding, position-independent image with no
# relocations, built with flags of its own (never the sanitizers'),
# checked, and cut out of the link:
#
#   $(B)/sampler/image/sampler.img       code and read-only data, from offset 0
#   $(B)/sampler/image/sampler-offsets.h each entry point's and the control
#                                        block's offset, and the image's sizes
#
# The object may hold only PC-relative relocations (or, on AArch64, the
# low 12 bits of a page-relative address), and the link no undefined
# symbol: anything else would need fixing up wherever memsnap maps it.
OBJCOPY ?= objcopy
NM ?= nm
READELF ?= readelf
SAMPLER_CFLAGS := -std=gnu11 -I. -O2 -Wall -Wextra $(if $(DEVELOPER),-Werror) \
	-ffreestanding -fPIC -fno-plt -fvisibility=hidden \
	-fno-stack-protector -fno-stack-clash-protection -fno-builtin \
	-fno-tree-loop-distribute-patterns -fno-exceptions \
	-fasynchronous-unwind-tables -fno-common -mgeneral-regs-only
# AArch64: BTI landing pads (hooks are reached by indirect calls), but
# no return-address signing: libunwind 1.6 unwinds a saved stack through
# the sampler's own frames only without it.
ifeq ($(ARCH),aarch64)
SAMPLER_CFLAGS += -mno-outline-atomics -mbranch-protection=bti
endif
SAMPLER_RELOCS := R_X86_64_(PC32|PLT32|PC64)|R_AARCH64_(ADR_PREL_PG_HI21|ADD_ABS_LO12_NC|LDST(8|16|32|64|128)_ABS_LO12_NC|CALL26|JUMP26|CONDBR19|TSTBR14|PREL32|PREL64)
# The hooked functions, from the one list (sampler/family.h): every
# hook, and those with a guarded direct hook as well (the direct family,
# for an allocator linked into the program, is each hook again, its
# original a trampoline; the allocating ones once more, guarded against
# the allocator calling its own entry points).
sampler_family = $(shell echo 'SAMPLER_FAMILY(X)' | $(CC) -E -P -I. \
	-include sampler/family.h -D'X(s, F, S, c, n)=$(1)' -x c - | \
	tr -s ' \n' '  ')
SAMPLER_HOOKS := $(call sampler_family,s)
SAMPLER_GUARDED := $(call sampler_family,SAMPLER_GUARDED_SHAPE(S)(s))
ifeq ($(strip $(SAMPLER_HOOKS)),)
$(error sampler/family.h: no hooked function read with $(CC) -E)
endif
SAMPLER_SYMS := sampler_ctl $(addprefix sampler_,$(SAMPLER_HOOKS)) \
	$(addprefix sampler_direct_,$(SAMPLER_HOOKS)) \
	$(addprefix sampler_guarded_,$(SAMPLER_GUARDED)) \
	sampler_dlopen sampler_dlmopen \
	sampler_on sampler_off sampler_eh_frame_hdr sampler_code_end \
	sampler_data_start sampler_wipe_start sampler_image_end

SAMPLER_OBJS := $(B)/sampler/image/records.o $(B)/sampler/image/pool.o \
	$(B)/sampler/image/hooks.o $(B)/sampler/image/slots.o \
	$(B)/sampler/image/dlopen.o

$(B)/sampler/image/%.o: sampler/image/%.c sampler/image/records.h \
		sampler/layout.h sampler/family.h \
		sampler/image/image.mk sampler/image/arch-$(ARCH).h
	@mkdir -p $(dir $@)
	$(CC) $(SAMPLER_CFLAGS) -DSAMPLER_ARCH_H='"sampler/image/arch-$(ARCH).h"' \
		-c -o $@ $<
	@bad=$$($(READELF) -rW $@ | awk '/^[0-9a-f]+ /{print $$3}' | sort -u | \
		grep -vE '^($(SAMPLER_RELOCS))$$'); \
	if [ -n "$$bad" ]; then \
		echo "sampler: relocations that need fixing up: $$bad" >&2; \
		rm -f $@; exit 1; fi

$(B)/sampler/image/sampler.elf: $(SAMPLER_OBJS) sampler/image/image.ld
	$(CC) -nostdlib -static -Wl,-T,sampler/image/image.ld -Wl,--build-id=none \
		-Wl,--eh-frame-hdr -Wl,-z,noexecstack \
		-Wl,--no-warn-rwx-segments -o $@ $(SAMPLER_OBJS)
	@if [ -n "$$($(NM) -u $@)" ]; then \
		echo "sampler: undefined symbols: $$($(NM) -u $@)" >&2; \
		rm -f $@; exit 1; fi

$(B)/sampler/image/sampler.img: $(B)/sampler/image/sampler.elf
	$(OBJCOPY) -O binary -j .text -j .rodata -j .eh_frame_hdr -j .eh_frame \
		$< $@

$(B)/sampler/image/sampler-offsets.h: $(B)/sampler/image/sampler.elf \
		sampler/image/image.mk sampler/family.h
	$(NM) $< | awk 'BEGIN { n = split("$(SAMPLER_SYMS)", want, " "); \
			for (i = 1; i <= n; i++) ok[want[i]] = 1 } \
		ok[$$3] { printf "#define SAMPLER_OFF_%s 0x%sul\n", $$3, $$1; \
			  seen++ } \
		END { if (seen != n) { print "missing symbols" > "/dev/stderr"; \
			exit 1 } }' > $@.tmp
	mv $@.tmp $@

SAMPLER_OUT := $(B)/sampler/image/sampler.img $(B)/sampler/image/sampler-offsets.h

# Its unit test (tests/unit/test_sampler.c) maps the image as memsnap will.
$(B)/tests/unit/test_sampler.o: ALL_CFLAGS += -I$(B)/sampler/image \
	-DSAMPLER_IMG='"$(abspath $(B))/sampler/image/sampler.img"'
$(B)/tests/unit/test_sampler.o: $(SAMPLER_OUT)
$(B)/tests/unit/test_sampler_ctl.o: ALL_CFLAGS += -I$(B)/sampler/image
$(B)/tests/unit/test_sampler_ctl.o: $(SAMPLER_OUT)
# ... and the integration test of its memory finds it as memsnap does.
$(B)/tests/integration/test_sampler_memory.o: ALL_CFLAGS += -I$(B)/sampler/image
$(B)/tests/integration/test_sampler_memory.o: $(SAMPLER_OUT)

# memsnap carries the image (sampler/image.S) and its offsets
# (sampler/sampler.c).
$(B)/sampler/image.o: ALL_CFLAGS += \
	-DSAMPLER_IMG='"$(abspath $(B))/sampler/image/sampler.img"'
$(B)/sampler/image.o: $(B)/sampler/image/sampler.img
# Every host file of the sampler: internal.h includes the offsets.
SAMPLER_USERS := $(patsubst %.c,$(B)/%.o,$(wildcard sampler/*.c))
$(SAMPLER_USERS): ALL_CFLAGS += -I$(B)/sampler/image
$(SAMPLER_USERS): $(B)/sampler/image/sampler-offsets.h
