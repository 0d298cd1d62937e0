# SPDX-License-Identifier: MIT
# ELF fixtures for tests/unit/test_elf.c: tiny libraries and executables whose
# symbol tables exercise the resolver's rules (weak aliases, versions, C++,
# stripped .dynsym-only, non-PIE). Built with fixed flags so their shape does
# not follow the project's CFLAGS.
# Fixed, not under $(OUTPUT): the sanitized build (build/asan) uses the same ones.
FIXTURE_DIR    := build/fixtures
FIXTURE_CFLAGS := -O1 -g -Wall -fno-inline -fcf-protection=none
CXX            ?= g++
STRIP          ?= strip

FIXTURES := $(FIXTURE_DIR)/libweak.so $(FIXTURE_DIR)/libweak-stripped.so \
	    $(FIXTURE_DIR)/libver.so $(FIXTURE_DIR)/libcxx.so $(FIXTURE_DIR)/nopie

$(FIXTURE_DIR)/libweak.so: tests/fixtures/weak_a.c tests/fixtures/weak_b.c
	@mkdir -p $(@D)
	$(CC) $(FIXTURE_CFLAGS) -shared -fPIC -o $@ $^

$(FIXTURE_DIR)/libweak-stripped.so: $(FIXTURE_DIR)/libweak.so
	$(STRIP) --strip-all -o $@ $<

$(FIXTURE_DIR)/libver.so: tests/fixtures/ver.c tests/fixtures/ver.map
	@mkdir -p $(@D)
	$(CC) $(FIXTURE_CFLAGS) -shared -fPIC -Wl,--version-script=tests/fixtures/ver.map -o $@ $<

$(FIXTURE_DIR)/libcxx.so: tests/fixtures/cxx.cpp
	@mkdir -p $(@D)
	$(CXX) $(FIXTURE_CFLAGS) -shared -fPIC -o $@ $<

$(FIXTURE_DIR)/nopie: tests/fixtures/nopie.c tests/fixtures/nopie_b.c
	@mkdir -p $(@D)
	$(CC) $(FIXTURE_CFLAGS) -fno-pie -no-pie -o $@ $^

.PHONY: fixtures
fixtures: $(FIXTURES)

# Order-only: the link recipe uses $^, and the fixtures are read at run time, not linked.
$(OUTPUT)/unit-tests: | $(FIXTURES)
