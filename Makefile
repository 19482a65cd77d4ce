# softdat — one GNU make build for the headers, libraries, tools and tests.
#
#   make               build everything into $(BUILD) (default: build/)
#   make check         build and run every test (test/run-tests)
#   make asan | tsan   the same under AddressSanitizer+UBSan / ThreadSanitizer
#                      (separate trees: build-asan/, build-tsan/)
#   make install PREFIX=/usr/local DESTDIR=
#   make deb           a Debian package (provider + tools) in $(BUILD)/deb/
#
# Sources are found by directory, so adding a file needs no edit here:
#   lib/dat/*.c           -> libdat2.so.2        (the DAT registry)
#   lib/provider/*.c      -> libdaplsoft.so.2    (the DAT provider)
#   emu/*.c               -> libsoftrnic.a       (the soft RNIC, linked into the provider)
#   tools/NAME/*.c        -> bin/NAME            (linked with libdat2 and, for
#                                                 internals, libsoftrnic.a)
#   test/unit/dat/*.c     -> test/dat/NAME       (Check; links shared libdat2)
#   test/unit/provider/*.c-> test/provider/NAME  (Check; provider + emu archives)
#   test/unit/emu/*.c     -> test/emu/NAME       (Check; emu archive only)
#   test/helpers/*.c      -> test/helpers/NAME   (programs the end-to-end tests drive)
#   test/lib/*.c          -> libsdtest.a         (support code the test programs link)
#   test/e2e/*.sh         run by test/run-tests
#   examples/*.c          -> examples/NAME  (annotated DAT programs; libdat2 only)

BUILD     ?= build
# Every path under BUILD is absolute, however make was called (make,
# make BUILD=build, make BUILD=$$PWD/build from a script or from make check):
# the .d files name their targets the way the rules do, so a header change
# rebuilds its objects whichever way the tree was built before. A target
# named relative to the BUILD given (make build/bin/softdat-info) still works.
BUILD_ARG := $(BUILD)
override BUILD := $(abspath $(BUILD))
PREFIX    ?= /usr/local
DESTDIR   ?=
SANITIZE  ?=
CC        ?= cc
OPT       ?= -O2

# The one place the version lives: the tools' --version, the provider's
# SOFTDAT_VERSION attribute, dat2.pc and the Debian package read it.
VERSION   := $(shell cat VERSION)

.DEFAULT_GOAL := all

# ---------------------------------------------------------------- dependencies
# One clear line per missing dependency, before any compiler error can appear.
NODEP_GOALS := clean distclean help
ifeq ($(filter $(NODEP_GOALS),$(MAKECMDGOALS)),)
  ifeq ($(shell command -v pkg-config 2>/dev/null),)
    $(error pkg-config not found: run 'apt-get install pkg-config' (or scripts/install-deps))
  endif
  ifneq ($(shell pkg-config --exists libevent_core libevent_pthreads && echo yes),yes)
    $(error libevent not found: run 'apt-get install libevent-dev' (or scripts/install-deps))
  endif
  ifneq ($(shell pkg-config --exists check && echo yes),yes)
    $(error Check not found: run 'apt-get install check' (or scripts/install-deps))
  endif
endif

EVENT_CFLAGS := $(shell pkg-config --cflags libevent_core libevent_pthreads 2>/dev/null)
# Nothing links libevent: emu/evlib.c dlopens it privately (RTLD_DEEPBIND),
# so that a host program's symbols cannot capture it. Its sonames are read
# off the libraries pkg-config names.
EVENT_LIBDIR := $(shell pkg-config --variable=libdir libevent_core 2>/dev/null)
soname_of = $(shell objdump -p $(EVENT_LIBDIR)/$(1).so 2>/dev/null | sed -n 's/^ *SONAME *//p')
EVENT_SONAMES := $(if $(filter $(NODEP_GOALS),$(MAKECMDGOALS)),,\
  -DSOFTDAT_EVENT_CORE_SONAME='"$(call soname_of,libevent_core)"' \
  -DSOFTDAT_EVENT_PTHREADS_SONAME='"$(call soname_of,libevent_pthreads)"')
EVENT_LIBS   := -ldl
CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

# ---------------------------------------------------------------- flags
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wpointer-arith \
            -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
# DAT_INCLUDE=/usr/include builds against the Debian headers instead (comparison runs).
DAT_INCLUDE ?= include
CPPFLAGS += -D_GNU_SOURCE -I$(DAT_INCLUDE) -I. $(EVENT_CFLAGS) -DSOFTDAT_VERSION='"$(VERSION)"'
CFLAGS   += -std=c11 $(OPT) -g -fPIC -pthread $(WARN)
LDFLAGS  += -pthread

ifneq ($(SANITIZE),)
  CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
  LDFLAGS += -fsanitize=$(SANITIZE)
  ifneq ($(findstring thread,$(SANITIZE)),)
    OPT := -O1
  endif
endif

ABS_BUILD := $(abspath $(BUILD))
OBJ       := $(BUILD)/obj

# ---------------------------------------------------------------- sources
DAT_SRC   := $(sort $(wildcard lib/dat/*.c))
PROV_SRC  := $(sort $(wildcard lib/provider/*.c))
EMU_SRC   := $(sort $(wildcard emu/*.c))
TOOLS     := $(notdir $(patsubst %/,%,$(sort $(dir $(wildcard tools/*/*.c)))))
UT_DAT    := $(basename $(notdir $(wildcard test/unit/dat/*.c)))
UT_PROV   := $(basename $(notdir $(wildcard test/unit/provider/*.c)))
UT_EMU    := $(basename $(notdir $(wildcard test/unit/emu/*.c)))
HELPERS   := $(basename $(notdir $(wildcard test/helpers/*.c)))
EXAMPLES  := $(basename $(notdir $(wildcard examples/*.c)))

DAT_OBJ   := $(DAT_SRC:%.c=$(OBJ)/%.o)
PROV_OBJ  := $(PROV_SRC:%.c=$(OBJ)/%.o)
EMU_OBJ   := $(EMU_SRC:%.c=$(OBJ)/%.o)

LIBDAT2      := $(BUILD)/lib/libdat2.so.2
LIBDAT2_LINK := $(BUILD)/lib/libdat2.so
LIBDAT2_A    := $(OBJ)/libdat2.a
LIBPROV      := $(BUILD)/lib/libdaplsoft.so.2
LIBPROV_A    := $(OBJ)/libdaplsoft.a
LIBEMU_A     := $(OBJ)/libsoftrnic.a
DATCONF      := $(BUILD)/dat.conf

TOOL_BINS    := $(TOOLS:%=$(BUILD)/bin/%)
UT_BINS      := $(UT_DAT:%=$(BUILD)/test/dat/%) $(UT_PROV:%=$(BUILD)/test/provider/%) \
                $(UT_EMU:%=$(BUILD)/test/emu/%)
HELPER_BINS  := $(HELPERS:%=$(BUILD)/test/helpers/%)
EXAMPLE_BINS := $(EXAMPLES:%=$(BUILD)/examples/%)

# Tools and test programs find build/lib (or PREFIX/lib once installed) on
# their own; LD_LIBRARY_PATH still wins over RUNPATH, so Debian's libdat2 can
# be swapped in for interop runs.
RUNPATH := -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/../lib'
RUNPATH2 := -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/../../lib'
# dlopen() of a bare name in dat.conf also searches the caller's RUNPATH:
# libdat2 then finds a provider installed beside it.
LIBDAT2_RUNPATH := -Wl,--enable-new-dtags,-rpath,'$$ORIGIN'

.PHONY: all libs tools tests examples check check-mpi asan tsan install uninstall clean distclean help
all: libs tools tests examples $(DATCONF)
libs: $(LIBDAT2) $(LIBDAT2_LINK) $(LIBPROV)
tools: $(TOOL_BINS)
tests: $(UT_BINS) $(HELPER_BINS)
examples: $(EXAMPLE_BINS)

# A relative name for a build product (make build/lib/libdat2.so.2) is the
# absolute target.
ifneq ($(BUILD_ARG),$(BUILD))
$(patsubst %/,%,$(BUILD_ARG))/%: $(BUILD)/% ;
endif

# Every object and program depends on this stamp, whose name changes when a
# Makefile change must rebuild them all once (make does not track flags):
# 2 = .d files with absolute targets (those written before BUILD was made
# absolute name relative targets no rule matches) and _FORTIFY_SOURCE.
DEPS_STAMP := $(BUILD)/stamp/build-format-2
$(DEPS_STAMP):
	@mkdir -p $(@D) && touch $@

-include $(DAT_OBJ:.o=.d) $(PROV_OBJ:.o=.d) $(EMU_OBJ:.o=.d)

$(OBJ)/%.o: %.c $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# The registry's fallback dat.conf is the one `make install` writes. A stamp
# holding PREFIX (rewritten only when it differs) rebuilds the objects that
# embed it, so `make; make install PREFIX=/opt/x` does not install a libdat2
# that looks in /usr/local/etc. The version stamp does the same for VERSION.
STAMPS := $(BUILD)/stamp
$(STAMPS)/prefix $(STAMPS)/version: stamp_check
	@mkdir -p $(@D)
	@v='$(if $(findstring prefix,$(@F)),$(PREFIX),$(VERSION))'; \
	  echo "$$v" | cmp -s - $@ || echo "$$v" > $@
.PHONY: stamp_check
$(DAT_OBJ): CPPFLAGS += -DSOFTDAT_SYSCONFDIR='"$(PREFIX)/etc"'
$(DAT_OBJ): $(STAMPS)/prefix
$(OBJ)/lib/provider/ia_attr.o $(patsubst %.c,$(OBJ)/%.o,$(wildcard tools/*/*.c)): $(STAMPS)/version

$(OBJ)/emu/evlib.o: CPPFLAGS += $(EVENT_SONAMES)

# The provider hides everything but its entry points (RTLD_GLOBAL load).
$(PROV_OBJ) $(EMU_OBJ): CFLAGS += -fvisibility=hidden
# Thread-local variables through TLS descriptors: in a library that libdat2
# dlopen()s, the default model calls __tls_get_addr on every access (eleven
# calls in each pass of a polling consumer); a descriptor resolves to a
# plain offset once glibc placed the library's 120 bytes in static TLS.
TLS_DESC := $(shell $(CC) -mtls-dialect=gnu2 -x c -c /dev/null -o /dev/null 2>/dev/null && echo -mtls-dialect=gnu2)
ifeq ($(SANITIZE),)
$(PROV_OBJ) $(EMU_OBJ): CFLAGS += $(TLS_DESC)
endif

# What is installed and packaged (libraries, tools) is built with glibc's
# checked string and I/O functions, as Debian's hardening flags ask
# (lintian: hardening-no-fortify-functions); it needs an optimised,
# unsanitised build. Test programs are left as they are.
ifeq ($(SANITIZE),)
ifneq ($(filter -O1 -O2 -O3 -Os,$(OPT)),)
$(DAT_OBJ) $(PROV_OBJ) $(EMU_OBJ) $(patsubst %.c,$(OBJ)/%.o,$(wildcard tools/*/*.c)): CPPFLAGS += -D_FORTIFY_SOURCE=2
endif
endif

# ---------------------------------------------------------------- libraries
$(LIBDAT2): $(DAT_OBJ) lib/dat/libdat2.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(DAT_OBJ) -Wl,-soname,libdat2.so.2 \
	  -Wl,--version-script=lib/dat/libdat2.map $(LIBDAT2_RUNPATH) $(LDFLAGS) -ldl

$(LIBDAT2_LINK): $(LIBDAT2)
	ln -sf libdat2.so.2 $@

$(LIBDAT2_A): $(DAT_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBEMU_A): $(EMU_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBPROV_A): $(PROV_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# No libdat2 on the link line: dat_registry_* and dats_get_ia_handle resolve
# against whichever registry (ours or Debian's) loaded the provider.
$(LIBPROV): $(PROV_OBJ) $(LIBEMU_A) lib/provider/libdaplsoft.map
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(PROV_OBJ) $(LIBEMU_A) -Wl,-soname,libdaplsoft.so.2 \
	  -Wl,--version-script=lib/provider/libdaplsoft.map $(LDFLAGS) $(EVENT_LIBS) -lm

$(DATCONF): conf/dat.conf $(LIBPROV)
	@mkdir -p $(@D)
	sed -e 's|libdaplsoft\.so\.2|$(ABS_BUILD)/lib/libdaplsoft.so.2|' conf/dat.conf > $@

# ---------------------------------------------------------------- tools
define tool_rule
$(BUILD)/bin/$(1): $(patsubst %.c,$(OBJ)/%.o,$(wildcard tools/$(1)/*.c)) $(LIBDAT2_LINK) $(LIBEMU_A)
	@mkdir -p $$(@D)
	$$(CC) -o $$@ $$(filter %.o,$$^) -L$(BUILD)/lib -ldat2 $(LIBEMU_A) $$(RUNPATH) $$(LDFLAGS) $(EVENT_LIBS) -lm
-include $(patsubst %.c,$(OBJ)/%.d,$(wildcard tools/$(1)/*.c))
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))

# ---------------------------------------------------------------- tests
# Test programs track the headers they include (-MMD: PROGRAM.d).
-include $(UT_BINS:%=%.d) $(HELPER_BINS:%=%.d)

# Support code the test programs share, linked rather than copied.
TESTLIB_OBJ := $(patsubst %.c,$(OBJ)/%.o,$(wildcard test/lib/*.c))
TESTLIB_A   := $(OBJ)/libsdtest.a
-include $(TESTLIB_OBJ:.o=.d)
$(TESTLIB_A): $(TESTLIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/test/dat/%: test/unit/dat/%.c $(TESTLIB_A) $(LIBDAT2_LINK) $(LIBDAT2_A) $(LIBPROV) $(DATCONF) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -MMD -MP -rdynamic -o $@ $< $(TESTLIB_A) $(LIBDAT2_A) $(RUNPATH2) $(LDFLAGS) $(CHECK_LIBS) -ldl

$(BUILD)/test/provider/%: test/unit/provider/%.c $(TESTLIB_A) $(LIBPROV_A) $(LIBEMU_A) $(LIBDAT2_LINK) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(TESTLIB_A) $(LIBPROV_A) $(LIBEMU_A) \
	  -L$(BUILD)/lib -ldat2 $(RUNPATH2) $(LDFLAGS) $(CHECK_LIBS) $(EVENT_LIBS) -lm

$(BUILD)/test/emu/%: test/unit/emu/%.c $(TESTLIB_A) $(LIBEMU_A) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(TESTLIB_A) $(LIBEMU_A) $(LDFLAGS) $(CHECK_LIBS) $(EVENT_LIBS) -lm

$(BUILD)/test/helpers/%: test/helpers/%.c $(LIBDAT2_LINK) $(LIBEMU_A) $(TESTLIB_A) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< $(TESTLIB_A) -L$(BUILD)/lib -ldat2 $(LIBEMU_A) $(RUNPATH2) $(LDFLAGS) $(EVENT_LIBS) -lm

# The examples are what a user's own program looks like: public headers,
# libdat2, nothing else (examples/run NAME runs one, both sides).
-include $(EXAMPLE_BINS:%=%.d)
$(BUILD)/examples/%: examples/%.c $(LIBDAT2_LINK) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -o $@ $< -L$(BUILD)/lib -ldat2 $(RUNPATH) $(LDFLAGS)

# Host programs that export libevent 1.4's symbol names (symbol_capture.sh).
HOSTILE_HELPERS := $(BUILD)/test/helpers/dat_dto_peer_hostile $(BUILD)/test/helpers/libevent_capture_probe
$(HOSTILE_HELPERS): LDFLAGS += -rdynamic

# -- registry test fixture (owner: lib/dat) ----------------------------------
# A tiny DAT provider that test/unit/dat programs dlopen through dat.conf
# files they write. Like a real provider it does not link libdat2: its
# dat_registry_* references resolve against the test program (-rdynamic).
DATFIX_SO := $(BUILD)/test/fixtures/libdatfix.so
$(DATFIX_SO): test/fixtures/datfix_provider.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -shared -o $@ $< $(LDFLAGS)
tests: $(DATFIX_SO)
$(UT_DAT:%=$(BUILD)/test/dat/%): $(DATFIX_SO)
# -- end registry test fixture ------------------------------------------------

# ---------------------------------------------------------------- ABI test
# test/dat/test_abi compares include/dat2 with the Debian libdapl-dev headers
# found under DEBIAN_DAT_INCLUDE at build/test time. test/abi/abi_gen.py
# (needs python3 and clang) enumerates every reference name and writes one
# table of sizes, offsets and values, compiled once against each header set;
# test/abi/test_abi.c compares the two. Without libdapl-dev, clang or python3
# the test still builds, and fails naming what is missing.
DEBIAN_DAT_INCLUDE ?= /usr/include
ABI_GEN  := $(OBJ)/test/abi
ABI_TEST := $(BUILD)/test/dat/test_abi
ABI_OBJS := $(ABI_GEN)/abi_ours.o $(ABI_GEN)/abi_ref.o $(ABI_GEN)/abi_findings.o

# Regenerate when libdapl-dev, clang or python3 appear or go (package files
# keep old timestamps, so the header list alone would not notice).
ABI_STATE := $(wildcard $(DEBIAN_DAT_INCLUDE)/dat2/udat.h) $(shell command -v clang; command -v python3)
$(ABI_GEN)/state: abi_state_check
	@mkdir -p $(@D)
	@echo '$(ABI_STATE)' | cmp -s - $@ || echo '$(ABI_STATE)' > $@
.PHONY: abi_state_check

$(ABI_GEN)/abi_table.c: test/abi/abi_gen.py $(wildcard include/dat2/*.h) \
                        $(wildcard $(DEBIAN_DAT_INCLUDE)/dat2/*.h) $(ABI_GEN)/state
	@mkdir -p $(@D)
	@if command -v python3 >/dev/null 2>&1; then \
	  python3 test/abi/abi_gen.py --ref $(DEBIAN_DAT_INCLUDE) --ours include --outdir $(@D); \
	else \
	  printf '%s\n' '#include "test/abi/abi_table.h"' \
	    'const struct abi_entry ABI_TABLE[] = { { 0, 0, 0, 0 } };' > $@; \
	  printf '%s\n' '#include "test/abi/abi_table.h"' \
	    'const char *const abi_findings[] = { "python3 not found: the ABI test needs python3 and clang", 0 };' \
	    'const char *const abi_accepted[] = { 0 };' \
	    'const char *const abi_counts = "nothing compared";' > $(@D)/abi_findings.c; \
	fi
$(ABI_GEN)/abi_findings.c: $(ABI_GEN)/abi_table.c ;

$(ABI_GEN)/abi_ours.o: $(ABI_GEN)/abi_table.c test/abi/abi_table.h
	$(CC) -std=gnu11 -D_GNU_SOURCE -w -I. -Iinclude -DABI_TABLE=abi_table_ours -c $< -o $@
$(ABI_GEN)/abi_ref.o: $(ABI_GEN)/abi_table.c test/abi/abi_table.h
	$(CC) -std=gnu11 -D_GNU_SOURCE -w -I. -I$(DEBIAN_DAT_INCLUDE) -DABI_TABLE=abi_table_ref -c $< -o $@
$(ABI_GEN)/abi_findings.o: $(ABI_GEN)/abi_findings.c test/abi/abi_table.h
	$(CC) -std=gnu11 -w -I. -c $< -o $@

$(ABI_TEST): test/abi/test_abi.c test/abi/abi_table.h $(ABI_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -o $@ $< $(ABI_OBJS) $(LDFLAGS) $(CHECK_LIBS)

tests: $(ABI_TEST)
# ---------------------------------------------------------------- end ABI test

check: all
	BUILD=$(ABS_BUILD) SANITIZE=$(SANITIZE) test/run-tests

# Open MPI 1.6.5's uDAPL transport over softdat (test/ompi/run.sh): builds
# Open MPI once into $(BUILD)/ompi (about 5 minutes on 2 cores), then 20 MPI
# jobs per registry, on loopback and between two network namespaces.
check-mpi: all
	@BUILD=$(BUILD) test/ompi/run.sh; rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "check-mpi: skipped"; else exit $$rc; fi

asan:
	$(MAKE) BUILD=build-asan SANITIZE=address,undefined check

tsan:
	$(MAKE) BUILD=build-tsan SANITIZE=thread check

# ---------------------------------------------------------------- fuzz (issue 13 §1)
# libFuzzer targets in test/fuzz/fuzz_*.c, built with clang into
# $(BUILD)/fuzz: the code under test is recompiled there with
# -fsanitize=fuzzer-no-link,address,undefined (coverage + sanitizers), so
# the normal objects are untouched. `make fuzz` builds every target and runs
# each for FUZZ_SECONDS (default: its own budget in test/fuzz/run, enough
# for 10 million executions) from its committed seed corpus
# (test/fuzz/corpus/TARGET/, copied: new inputs never land in the tree);
# `make fuzz-build` only builds (test/e2e/fuzz_smoke.sh uses it).
# docs/reliability.md has the figures.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= default
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -O1 -g $(FUZZ_SAN) -pthread $(WARN) -Wno-unused-command-line-argument
FUZZ_CPP     := -D_GNU_SOURCE -Iinclude -I. $(EVENT_CFLAGS) -DSOFTDAT_VERSION='"$(VERSION)"'
FUZZ_TARGETS := $(basename $(notdir $(wildcard test/fuzz/fuzz_*.c)))
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
FUZZ_LIB_SRC := $(EMU_SRC) lib/dat/conf.c lib/dat/dbg.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_LIB_A   := $(FUZZ_DIR)/obj/libfuzzed.a

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BINS:%=%.d)

$(FUZZ_DIR)/obj/%.o: %.c $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPP) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(FUZZ_DIR)/obj/emu/evlib.o: FUZZ_CPP += $(EVENT_SONAMES)

$(FUZZ_LIB_A): $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/%: test/fuzz/%.c $(FUZZ_LIB_A) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPP) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FUZZ_LIB_A) \
	  $(EVENT_LIBS) -lm

# The seed generator is no fuzz target: a plain ASan build (the coverage
# hooks in the archive resolve to the sanitizer runtime's defaults).
$(FUZZ_DIR)/mkseeds: test/fuzz/mkseeds.c $(FUZZ_LIB_A)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPP) $(FUZZ_CFLAGS) -MMD -MP -o $@ $< $(FUZZ_LIB_A) $(EVENT_LIBS) -lm

.PHONY: fuzz fuzz-build fuzz-seeds
fuzz-build: $(FUZZ_BINS)
# Regenerates the committed seed corpus (run after a wire format change).
fuzz-seeds: $(FUZZ_DIR)/mkseeds
	$(FUZZ_DIR)/mkseeds test/fuzz/corpus
fuzz: fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) test/fuzz/run $(FUZZ_TARGETS)
# ---------------------------------------------------------------- end fuzz

# ---------------------------------------------------------------- install
# The installed dat.conf names the provider by its absolute installed path
# (PREFIX, never DESTDIR), so it loads without LD_LIBRARY_PATH or ldconfig; the
# tools find PREFIX/lib through RUNPATH $ORIGIN/../lib, libdat2 finds a
# provider beside it through RUNPATH $ORIGIN, and dat2.pc gives programs an
# rpath to PREFIX/lib. install needs no test programs, only libs and tools.
LIBDIR := $(PREFIX)/lib
INCDIR := $(PREFIX)/include/dat2
SYSCONF := $(PREFIX)/etc
MANDIR := $(PREFIX)/share/man

install: libs tools $(DATCONF)
	install -d $(DESTDIR)$(INCDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(SYSCONF) \
	  $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7
	install -m 644 include/dat2/*.h $(DESTDIR)$(INCDIR)/
	install -m 755 $(LIBDAT2) $(DESTDIR)$(LIBDIR)/libdat2.so.2
	ln -sf libdat2.so.2 $(DESTDIR)$(LIBDIR)/libdat2.so
	install -m 755 $(LIBPROV) $(DESTDIR)$(LIBDIR)/libdaplsoft.so.2
	ln -sf libdaplsoft.so.2 $(DESTDIR)$(LIBDIR)/libdaplsoft.so
	sed -e 's|libdaplsoft\.so\.2|$(LIBDIR)/libdaplsoft.so.2|' conf/dat.conf \
	  > $(DESTDIR)$(SYSCONF)/dat.conf
	chmod 644 $(DESTDIR)$(SYSCONF)/dat.conf
	$(if $(TOOL_BINS),install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/)
	$(if $(wildcard docs/man/*.1),install -m 644 docs/man/*.1 $(DESTDIR)$(MANDIR)/man1/)
	$(if $(wildcard docs/man/*.5),install -m 644 docs/man/*.5 $(DESTDIR)$(MANDIR)/man5/)
	$(if $(wildcard docs/man/*.7),install -m 644 docs/man/*.7 $(DESTDIR)$(MANDIR)/man7/)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' conf/dat2.pc.in \
	  > $(DESTDIR)$(LIBDIR)/pkgconfig/dat2.pc

uninstall:
	rm -rf $(DESTDIR)$(INCDIR)
	rm -f $(DESTDIR)$(LIBDIR)/libdat2.so* $(DESTDIR)$(LIBDIR)/libdaplsoft.so* \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/dat2.pc $(DESTDIR)$(SYSCONF)/dat.conf \
	  $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%)

# ---------------------------------------------------------------- Debian package
# `make deb`: $(BUILD)/deb/softdat_$(VERSION)-1_ARCH.deb, built with dpkg-deb
# from the libs and tools of this build (scripts/mkdeb has the layout and
# the reasons). It ships the provider (private libdir), the tools and the
# docs, and uses Debian's libdat2 registry (libdapl2) and /etc/dat.conf.
# The tools are relinked without RUNPATH: in /usr/bin they use the system's
# libdat2.so.2 (Debian policy forbids a custom search path there).
# The packaged binaries are linked with full RELRO (-z relro -z now), as
# Debian's hardening flags ask (lintian: hardening-no-bindnow); the
# provider's registry symbols are weak, so binding them at load time is safe
# under either registry.
DEB_REVISION ?= 1
DEB_BINS := $(TOOLS:%=$(BUILD)/deb/bin/%)
DEB_LDFLAGS := -Wl,-z,relro -Wl,-z,now
define deb_tool_rule
$(BUILD)/deb/bin/$(1): $(BUILD)/bin/$(1)
	@mkdir -p $$(@D)
	$$(CC) -o $$@ $(patsubst %.c,$(OBJ)/%.o,$(wildcard tools/$(1)/*.c)) -L$(BUILD)/lib -ldat2 \
	  $(LIBEMU_A) $$(LDFLAGS) $(DEB_LDFLAGS) $(EVENT_LIBS) -lm
endef
$(foreach t,$(TOOLS),$(eval $(call deb_tool_rule,$(t))))
DEB_PROV := $(BUILD)/deb/lib/libdaplsoft.so.2
$(DEB_PROV): $(LIBPROV)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $(PROV_OBJ) $(LIBEMU_A) -Wl,-soname,libdaplsoft.so.2 \
	  -Wl,--version-script=lib/provider/libdaplsoft.map $(LDFLAGS) $(DEB_LDFLAGS) $(EVENT_LIBS) -lm
deb: libs $(DEB_BINS) $(DEB_PROV)
	scripts/mkdeb --build "$(BUILD)" --version "$(VERSION)-$(DEB_REVISION)" --out "$(BUILD)/deb"
.PHONY: deb

clean:
	rm -rf build build-asan build-tsan

distclean: clean

help:
	@sed -n '2,20p' Makefile
