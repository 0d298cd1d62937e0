# SPDX-License-Identifier: MIT
# libcommtrace-devprof.so: the devprof host runtime (user/devprof/ less its CLI, and the C
# ABI of include/commtrace/devprof_api.h) for the Python package python/commtrace/, which
# loads it with ctypes. Its own position-independent objects, hidden symbols except the
# ctdp_ ones. Always the unsanitized build: Python cannot load an ASan library.
DEVPROF_LIB      := build/libcommtrace-devprof.so
DEVPROF_LIB_SRCS := $(filter-out user/devprof/cli.c,$(wildcard user/devprof/*.c))
DEVPROF_LIB_OBJS := $(patsubst %.c,build/pic/%.o,$(DEVPROF_LIB_SRCS))
PY_PKG           := $(wildcard python/commtrace/*.py)

.PHONY: devprof-lib
devprof-lib: $(DEVPROF_LIB)

build/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
		-Wno-missing-field-initializers -MMD -MP -Iinclude -Iuser $(CJSON_CFLAGS) \
		-fPIC -fvisibility=hidden -c -o $@ $<

$(DEVPROF_LIB): $(DEVPROF_LIB_OBJS)
	$(CC) -shared -Wl,--no-undefined -Wl,-soname,libcommtrace-devprof.so -o $@ $^ -lcjson -lm

-include $(DEVPROF_LIB_OBJS:.o=.d)
install: $(DEVPROF_LIB)
