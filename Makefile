# memsnap — GNU make.  `make`, `make check`, `make install`.
#
#   DEVELOPER=1                   warnings are errors
#   SANITIZE=address,undefined    sanitized build (a full rebuild)
#   ARCH=x86_64                   injector/arch/$(ARCH).c
#   PREFIX=/usr/local DESTDIR=    install locations

# The version is debian/changelog's first entry: one place, so that the
# package and `memsnap --version` cannot disagree.
VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
COMPLETIONDIR ?= $(DATADIR)/bash-completion/completions
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
ARCH ?= $(shell uname -m)
ifeq ($(wildcard injector/arch/$(ARCH).c),)
$(error ARCH=$(ARCH): memsnap has no injector/arch/$(ARCH).c (it supports $(patsubst injector/arch/%.c,%,$(filter-out %-code.c %-patch.c,$(wildcard injector/arch/*.c)))))
endif
# Debian's library directory for this ABI: /usr/lib/$(MULTIARCH)
MULTIARCH ?= $(shell $(CC) -print-multiarch 2>/dev/null || echo $(ARCH)-linux-gnu)
PKG_CONFIG ?= pkg-config

CC ?= cc
CFLAGS ?= -O2 -g
WARNINGS := -Wall -Wextra -Wmissing-prototypes -Wstrict-prototypes \
	-Wformat=2 -Wshadow -Wwrite-strings -Wundef -Wvla
ifeq ($(DEVELOPER),1)
WARNINGS += -Werror
endif
ifneq ($(SANITIZE),)
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
endif

# Libraries come from pkg-config, asked once per make run.
# libiberty (cplus_demangle, for C++ and Rust names) ships as a static
# library without a .pc file.
PKGS := libelf libdw liblzma libunwind-generic zlib capstone
TEST_PKGS := criterion
pkg = $(shell $(PKG_CONFIG) $(1) $(2) 2>/dev/null)
LIB_CFLAGS := $(call pkg,--cflags,$(PKGS))
LIB_LIBS := $(call pkg,--libs,$(PKGS)) -liberty -lm

ALL_CFLAGS := -std=gnu11 -I. $(WARNINGS) $(SANFLAGS) -D_GNU_SOURCE \
	-DMEMSNAP_VERSION='"$(VERSION)"' $(LIB_CFLAGS) $(CPPFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)

# B: the build directory; BIN: where the binary goes.  Give both to build
# a second tree beside the first (make B=build-asan BIN=build-asan/memsnap).
B ?= build
BIN ?= memsnap

# The library: every stage folder; the arch code for this ARCH only.
MODULES := common proc agent symbols injector allocators sampler profile explain timeline exporter
# (exporter/http.c is built on its own, twice: below)
LIB_SRCS := $(filter-out exporter/http.c, \
	$(foreach m,$(MODULES),$(wildcard $(m)/*.c))) \
	$(wildcard injector/unwind/*.c) \
	$(wildcard injector/arch/$(ARCH).c injector/arch/$(ARCH)-code.c) \
	$(wildcard injector/arch/*-patch.c)
CLI_SRCS := $(wildcard cli/*.c)
# The code copied into targets (the stub page, the sampler), assembled.
LIB_ASM := $(wildcard injector/arch/$(ARCH)-stub.S) sampler/image.S
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o) $(LIB_ASM:%.S=$(B)/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(B)/%.o)

UNIT_SRCS := $(wildcard tests/unit/*.c)
INTEG_SRCS := $(wildcard tests/integration/*.c)
TESTLIB_OBJS := $(patsubst %.c,$(B)/%.o,$(wildcard tests/lib/*.c))

all: $(BIN)

# Rebuild everything when the flags change (SANITIZE=, DEVELOPER=, CFLAGS=).
$(B)/FLAGS: FORCE
	@mkdir -p $(B)
	@echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || \
		echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' > $@

$(B)/%.o: %.c $(B)/FLAGS
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/%.o: %.S $(B)/FLAGS
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(B)/libmemsnap.a: $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

# The exporter's HTTP server is libmicrohttpd's (Debian's libmicrohttpd12,
# a small, long-kept C server library: memsnap runs as root and parses no
# HTTP itself).  exporter/http.c is built twice: with it (MEMSNAP_HTTP)
# for the binary, where pkg-config finds it, and without it for the
# static binary: libmicrohttpd.a brings GnuTLS and its own dependencies
# (p11-kit, nettle, gmp, ...) with it, which have no static archives
# here, so memsnap-static's exporter writes --textfile only, and
# `memsnap-static --version` says so.
HTTP_PKG := libmicrohttpd
HAVE_HTTP := $(shell $(PKG_CONFIG) --exists $(HTTP_PKG) && echo 1)
ifeq ($(HAVE_HTTP),1)
HTTP_CFLAGS := -DMEMSNAP_HTTP $(call pkg,--cflags,$(HTTP_PKG))
HTTP_LIBS := $(call pkg,--libs,$(HTTP_PKG))
endif
HTTP_OBJ := $(B)/exporter/http.o
HTTP_STATIC_OBJ := $(B)/exporter/http-static.o

$(HTTP_OBJ): exporter/http.c $(B)/FLAGS
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(HTTP_CFLAGS) -MMD -MP -c -o $@ $<

$(HTTP_STATIC_OBJ): exporter/http.c $(B)/FLAGS
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BIN): $(CLI_OBJS) $(HTTP_OBJ) $(B)/libmemsnap.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS) $(HTTP_LIBS)

# One file that runs on any Linux of this CPU with nothing installed:
# the same objects, every library and the C library linked in (their
# static archives come with the -dev packages).  It loads nothing at
# run time (no libdebuginfod) and calls nothing of NSS.  glibc's linker
# warns that dlopen would need its shared libraries: it is never called.
STATIC_BIN ?= memsnap-static
STATIC_LIBS := $(call pkg,--static --libs,$(PKGS)) -liberty -lm

static: $(STATIC_BIN)

$(STATIC_BIN): $(CLI_OBJS) $(HTTP_STATIC_OBJ) $(B)/libmemsnap.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -static -o $@ $^ $(STATIC_LIBS)

# ---- tests -----------------------------------------------------------------

$(B)/tests/%.o: ALL_CFLAGS += $(call pkg,--cflags,$(TEST_PKGS)) \
	-DLIBDIR='"/usr/lib/$(MULTIARCH)/"'

$(B)/tests/unit-tests: $(UNIT_SRCS:%.c=$(B)/%.o) $(TESTLIB_OBJS) \
		$(B)/libmemsnap.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS) \
		$(call pkg,--libs,$(TEST_PKGS))

$(B)/tests/integration-tests: $(INTEG_SRCS:%.c=$(B)/%.o) $(TESTLIB_OBJS) \
		$(B)/libmemsnap.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS) \
		$(call pkg,--libs,$(TEST_PKGS))

# Fixture programs, fuzz harnesses, benchmarks and the demo bring their
# own rules: one .mk each.
FIXTURES :=
include $(wildcard tests/fixtures/*.mk tests/fuzz/*.mk bench/*.mk)
include demo/demo.mk
include sampler/image/image.mk

fixtures: $(FIXTURES)

TEST_BINS := $(B)/tests/unit-tests $(B)/tests/integration-tests

tests: $(BIN) $(TEST_BINS) fixtures demo $(SAMPLER_OUT)
# (the sanitizers' runtimes cannot be linked statically: no static
# binary beside a sanitized build, and its tests say so)
ifeq ($(SANITIZE),)
tests: $(STATIC_BIN)
endif

# Criterion runs each test in its own process; fixtures are found through
# MEMSNAP_* so the suites also run from another directory.
TEST_ENV := MEMSNAP_BIN=$(abspath $(BIN)) \
	MEMSNAP_STATIC=$(abspath $(STATIC_BIN)) \
	MEMSNAP_FIXTURES=$(abspath $(B))/fixtures \
	MEMSNAP_DEMO=$(abspath $(B))/demo/memsnap-demo \
	MEMSNAP_CAPTURE=$(CURDIR)/scripts/memsnap-capture \
	MEMSNAP_TESTDATA=$(CURDIR)/tests/data

# CHECK_FILTER: the integration tests `make check` runs (a Criterion
# --filter; every one by default).
CHECK_FILTER ?= */*

check: layers tests
	$(TEST_ENV) $(B)/tests/unit-tests --jobs 2
	$(TEST_ENV) $(B)/tests/integration-tests --jobs 2 --filter '$(CHECK_FILTER)'

# The dependency direction of docs/DESIGN.md ("Layers"), checked on every #include.
layers:
	@scripts/check-layers

# The binary, its man page, bash completion, the capture script and the
# gdb fallback (each one installed once it exists in the tree); the
# exporter's rules (with their template, generator and unit tests), its
# DaemonSet and its systemd unit (installed, never enabled by this).
FLEET_FILES := contrib/prometheus/memsnap-rules.yml \
	contrib/prometheus/memsnap-rules.yml.in \
	contrib/prometheus/memsnap-rules.test.yml
INSTALL_EXTRAS := $(wildcard docs/memsnap.1 scripts/memsnap.bash-completion \
	scripts/memsnap-capture scripts/memsnap.gdb)

install: $(BIN)
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/memsnap
ifneq ($(filter docs/memsnap.1,$(INSTALL_EXTRAS)),)
	install -d $(DESTDIR)$(MANDIR)/man1
	install -m 0644 docs/memsnap.1 $(DESTDIR)$(MANDIR)/man1/memsnap.1
	ln -sf memsnap.1 $(DESTDIR)$(MANDIR)/man1/memsnap-capture.1
endif
ifneq ($(filter scripts/memsnap.bash-completion,$(INSTALL_EXTRAS)),)
	install -d $(DESTDIR)$(COMPLETIONDIR)
	install -m 0644 scripts/memsnap.bash-completion \
		$(DESTDIR)$(COMPLETIONDIR)/memsnap
	ln -sf memsnap $(DESTDIR)$(COMPLETIONDIR)/memsnap-capture
endif
ifneq ($(filter scripts/memsnap-capture,$(INSTALL_EXTRAS)),)
	install -m 0755 scripts/memsnap-capture \
		$(DESTDIR)$(BINDIR)/memsnap-capture
endif
ifneq ($(filter scripts/memsnap.gdb,$(INSTALL_EXTRAS)),)
	install -d $(DESTDIR)$(DATADIR)/memsnap
	install -m 0644 scripts/memsnap.gdb $(DESTDIR)$(DATADIR)/memsnap/memsnap.gdb
endif
	install -d $(DESTDIR)$(DATADIR)/memsnap/prometheus \
		$(DESTDIR)$(DATADIR)/memsnap/kubernetes $(DESTDIR)$(SYSTEMDUNITDIR)
	install -m 0644 $(FLEET_FILES) $(DESTDIR)$(DATADIR)/memsnap/prometheus/
	install -m 0755 contrib/prometheus/make-rules \
		$(DESTDIR)$(DATADIR)/memsnap/prometheus/make-rules
	install -m 0644 contrib/kubernetes/memsnap-exporter.yaml \
		$(DESTDIR)$(DATADIR)/memsnap/kubernetes/memsnap-exporter.yaml
	install -m 0644 contrib/systemd/memsnap-exporter.service \
		$(DESTDIR)$(SYSTEMDUNITDIR)/memsnap-exporter.service

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/memsnap $(DESTDIR)$(BINDIR)/memsnap-capture \
		$(DESTDIR)$(MANDIR)/man1/memsnap.1 \
		$(DESTDIR)$(MANDIR)/man1/memsnap-capture.1 \
		$(DESTDIR)$(COMPLETIONDIR)/memsnap \
		$(DESTDIR)$(COMPLETIONDIR)/memsnap-capture \
		$(DESTDIR)$(DATADIR)/memsnap/memsnap.gdb \
		$(FLEET_FILES:contrib/prometheus/%=$(DESTDIR)$(DATADIR)/memsnap/prometheus/%) \
		$(DESTDIR)$(DATADIR)/memsnap/prometheus/make-rules \
		$(DESTDIR)$(DATADIR)/memsnap/kubernetes/memsnap-exporter.yaml \
		$(DESTDIR)$(SYSTEMDUNITDIR)/memsnap-exporter.service

clean:
	rm -rf $(B) $(BIN) $(STATIC_BIN)

FORCE:
.PHONY: all check tests layers install uninstall clean FORCE fixtures demo static

-include $(shell find $(B) -name '*.d' 2>/dev/null)
