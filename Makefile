# SPDX-License-Identifier: MIT
# commtrace build. `make` builds ./commtrace-bpf; `make test` builds and runs the tests;
# `make bench` runs the benchmarks; `make demo` runs the tracer on the bundled workload.

OUTPUT   := build
BIN      := commtrace-bpf
# make SANITIZE=1: an AddressSanitizer + UBSan build, apart in build/asan/ (make test-asan).
ifeq ($(SANITIZE),1)
OUTPUT   := build/asan
BIN      := build/asan/commtrace-bpf
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ARCH     := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CLANG    ?= clang
BPFTOOL  ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
# make predefines CC (cc), so `CC ?= gcc` would never apply: replace only make's default,
# not a CC given on the command line or in the environment.
ifeq ($(origin CC),default)
CC       := gcc
endif
MPICC    ?= mpicc
NVCC     ?= $(shell command -v nvcc || echo /usr/local/cuda/bin/nvcc)
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

CJSON_CFLAGS := $(shell pkg-config --cflags libcjson 2>/dev/null || echo -I/usr/include/cjson)
CFLAGS   ?= -O2 -g
CFLAGS   += $(SAN_FLAGS) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	    -MMD -MP -Iinclude -Iuser -I$(OUTPUT) $(CJSON_CFLAGS)
LDLIBS   += -lbpf -lelf -lz -lcjson -lmicrohttpd -liberty -lpthread -lm

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -Iinclude \
	      -I/usr/include/$(shell uname -m)-linux-gnu -Wall -Wno-unused-function
# Explicit list: a pattern rule's $(wildcard) expands to nothing, and a header edit must rebuild.
BPF_HDRS := $(wildcard bpf/*.bpf.h) $(wildcard include/commtrace/*.h) \
	    $(wildcard vmlinux/$(ARCH)/vmlinux.h)

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS))
SKELS     := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))

USER_SRCS := $(wildcard user/*.c user/*/*.c)
USER_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(USER_SRCS))
LIB_OBJS  := $(filter-out $(OUTPUT)/user/main.o,$(USER_OBJS))

UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_OBJS := $(patsubst %.c,$(OUTPUT)/%.o,$(UNIT_SRCS))

# Test targets: mpi_*.c with mpicc, lib*.c as shared libraries, *.bpf.c as the BPF programs
# of the program of their name, the rest with cc.
PROG_SRCS := $(filter-out %.bpf.c,$(wildcard tests/progs/*.c))
PROG_MPI  := $(patsubst tests/progs/%.c,$(OUTPUT)/progs/%,$(filter tests/progs/mpi_%.c,$(PROG_SRCS)))
PROG_LIBS := $(patsubst tests/progs/%.c,$(OUTPUT)/progs/%.so,$(filter tests/progs/lib%.c,$(PROG_SRCS)))
PROG_BINS := $(patsubst tests/progs/%.c,$(OUTPUT)/progs/%,$(filter-out tests/progs/mpi_%.c tests/progs/lib%.c,$(PROG_SRCS)))
PROGS     := $(PROG_MPI) $(PROG_LIBS) $(PROG_BINS)

.SECONDARY:
.PHONY: all test test-asan unit progs bench demo install uninstall clean format lint cuda
all: $(BIN)

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUTPUT)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $* > $@.tmp && mv $@.tmp $@

$(OUTPUT)/%.o: %.c $(SKELS) | $(OUTPUT)/ct_version.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# The version, in a header rewritten only when it changes: the few objects that print it
# are rebuilt then (their .d files name it), and only they.
$(OUTPUT)/ct_version.h: FORCE
	@mkdir -p $(@D)
	@v='#ifndef CT_VERSION\n#define CT_VERSION "$(VERSION)"\n#endif'; \
	[ "$$(cat $@ 2>/dev/null)" = "$$(printf "$$v")" ] || printf "$$v\n" > $@

.PHONY: FORCE
FORCE:

$(BIN): $(USER_OBJS)
	$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

$(OUTPUT)/unit-tests: $(UNIT_OBJS) $(LIB_OBJS)
	$(CC) $(CFLAGS) $^ $(LDLIBS) -ldl -o $@

$(OUTPUT)/progs/mpi_%: tests/progs/mpi_%.c
	@mkdir -p $(@D)
	$(MPICC) -O1 -g -Wall -o $@ $<

$(OUTPUT)/progs/lib%.so: tests/progs/lib%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g -Wall -shared -fPIC -Iinclude -o $@ $<

$(OUTPUT)/progs/%.bpf.o: tests/progs/%.bpf.c $(BPF_HDRS)
	@mkdir -p $(@D)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/progs/%.skel.h: $(OUTPUT)/progs/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $* > $@.tmp && mv $@.tmp $@

$(OUTPUT)/progs/read_cost: tests/progs/read_cost.c $(OUTPUT)/progs/read_cost.skel.h
	$(CC) -O1 -g -Wall -I$(OUTPUT)/progs -o $@ $< -lbpf -lelf -lz

$(OUTPUT)/progs/%: tests/progs/%.c $(PROG_LIBS)
	@mkdir -p $(@D)
	$(CC) -O1 -g -Wall -Iinclude -Iuser -o $@ $< -ldl -lpthread

progs: $(PROGS)

unit: $(OUTPUT)/unit-tests

# The README's two commands set themselves up: the installer first (well under a second
# when everything is there), then the build, in a make that reads the tools it installed.
# The PyTorch 2.x tests run in a Debian 13 root (scripts/torch2-root.sh, kept in build/):
# where it cannot be built, they skip and say why.
test:
	scripts/install-deps.sh
	scripts/torch2-root.sh || echo "make test: no PyTorch 2.x root; its tests will skip"
	$(MAKE) $(BIN) unit progs devprof-lib
	tests/run

# The whole suite against the sanitized tracer and unit tests: any report fails it.
test-asan:
	$(MAKE) SANITIZE=1 build/asan/commtrace-bpf build/asan/unit-tests
	$(MAKE) progs devprof-lib
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	COMMTRACE_BPF=build/asan/commtrace-bpf COMMTRACE_UNIT=build/asan/unit-tests tests/run

bench: $(BIN) progs
	/usr/bin/python3 scripts/bench.py

demo:
	scripts/install-deps.sh
	$(MAKE) $(BIN) progs
	scripts/demo.sh

# sudo make install [PREFIX=/usr/local] [DESTDIR=...]: the binary, the man page, the docs,
# the Python package commtrace.devprof (in the dist-packages Debian's python3 reads under
# PREFIX), its shared library in PREFIX/lib (where the package looks, three folders up)
# and the device-side headers for a MegaKernel's build.
PREFIX  ?= /usr/local
BINDIR  := $(DESTDIR)$(PREFIX)/sbin
MANDIR  := $(DESTDIR)$(PREFIX)/share/man/man8
DOCDIR  := $(DESTDIR)$(PREFIX)/share/doc/commtrace
LIBDIR  := $(DESTDIR)$(PREFIX)/lib
INCDIR  := $(DESTDIR)$(PREFIX)/include/commtrace
PYDIR   := $(DESTDIR)$(PREFIX)/lib/python3.$(shell /usr/bin/python3 -c 'import sys; print(sys.version_info[1])')/dist-packages/commtrace
DOCS    := README.md $(wildcard docs/*.md)
HDRS    := include/commtrace/devprof.h include/commtrace/devprof_api.h
install: commtrace-bpf
	install -d $(BINDIR) $(MANDIR) $(DOCDIR) $(LIBDIR) $(INCDIR) $(PYDIR)
	install -m 0755 commtrace-bpf $(BINDIR)/commtrace-bpf
	install -m 0644 docs/commtrace-bpf.8 $(MANDIR)/commtrace-bpf.8
	install -m 0644 $(DOCS) $(DOCDIR)/
	install -m 0755 $(DEVPROF_LIB) $(LIBDIR)/
	install -m 0644 $(HDRS) $(INCDIR)/
	install -m 0644 $(PY_PKG) $(PYDIR)/

# Exactly what install put there, and the folders of ours that nothing else is left in.
uninstall:
	rm -f $(BINDIR)/commtrace-bpf $(MANDIR)/commtrace-bpf.8 $(addprefix $(DOCDIR)/,$(notdir $(DOCS)))
	rm -f $(LIBDIR)/$(notdir $(DEVPROF_LIB)) $(addprefix $(INCDIR)/,$(notdir $(HDRS)))
	rm -f $(addprefix $(PYDIR)/,$(notdir $(PY_PKG)))
	rm -rf $(PYDIR)/__pycache__
	-rmdir $(DOCDIR) $(INCDIR) $(PYDIR) 2>/dev/null

cuda:
	@mkdir -p $(OUTPUT)/progs
	for f in tests/progs/*.cu; do $(NVCC) -O2 -Iinclude -o $(OUTPUT)/progs/$$(basename $$f .cu) $$f || exit 1; done

format:
	clang-format -i $$(git ls-files '*.c' '*.h' | grep -v -e '^vmlinux/' -e '_offsets.h$$' -e 'pyoffsets.h$$')

lint:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' | grep -v -e '^vmlinux/' -e '_offsets.h$$' -e 'pyoffsets.h$$')
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
		--inline-suppr -Iinclude -Iuser --suppress=missingIncludeSystem --suppress=unknownMacro \
		user tests/unit

$(OUTPUT):
	mkdir -p $@

clean:
	rm -rf $(OUTPUT) commtrace-bpf

-include $(USER_OBJS:.o=.d) $(UNIT_OBJS:.o=.d)
# Fragments for optional parts (fuzz targets, CUDA programs): one per topic.
-include $(wildcard mk/*.mk)
