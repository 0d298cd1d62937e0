# SPDX-License-Identifier: MIT
# Fuzzing the device-profile decoder and the fusion input parser with libFuzzer.
#   make fuzz-devprof        build build/fuzz/fuzz_devprof_{decode,fuse}
#   make fuzz-devprof-run    run each for FUZZ_TIME seconds (default 30) from the goldens
# And two devprof programs with rules of their own (at the end): the MegaKernel as a
# shared library (`make cuda`) and the host recorder-cost benchmark (`make progs`).
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 30
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	      -std=gnu11 -Iinclude -Iuser $(CJSON_CFLAGS)
DEVPROF_SRCS := $(wildcard user/devprof/*.c)
DEVPROF_HDRS := $(wildcard user/devprof/*.h) include/commtrace/devprof.h
DEVPROF_FUZZ := $(OUTPUT)/fuzz/fuzz_devprof_decode $(OUTPUT)/fuzz/fuzz_devprof_fuse

.PHONY: fuzz-devprof fuzz-devprof-run
fuzz-devprof: $(DEVPROF_FUZZ)

$(OUTPUT)/fuzz/fuzz_devprof_%: tests/fuzz/fuzz_devprof_%.c $(DEVPROF_SRCS) $(DEVPROF_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $< $(DEVPROF_SRCS) -lcjson -lm -o $@

# Seeds: every golden buffer for the decoder; the profiler traces alone and a decoded
# device trace joined to one by a NUL for the fusion parser. A crash leaves its input
# in build/fuzz/ and fails the target.
fuzz-devprof-run: $(DEVPROF_FUZZ)
	@mkdir -p $(OUTPUT)/fuzz/corpus-decode $(OUTPUT)/fuzz/corpus-fuse
	cp tests/golden/devprof/*.bin $(OUTPUT)/fuzz/corpus-decode/
	cp tests/golden/devprof/kineto_gpu.json tests/golden/devprof/torch113_cpu.json \
		$(OUTPUT)/fuzz/corpus-fuse/
	{ cat tests/golden/devprof/multi.json; printf '\0'; \
	  cat tests/golden/devprof/kineto_gpu.json; } > $(OUTPUT)/fuzz/corpus-fuse/multi+kineto
	$(OUTPUT)/fuzz/fuzz_devprof_decode -max_total_time=$(FUZZ_TIME) -max_len=16384 \
		$(FUZZ_RUN_FLAGS) $(OUTPUT)/fuzz/corpus-decode
	$(OUTPUT)/fuzz/fuzz_devprof_fuse -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		$(FUZZ_RUN_FLAGS) $(OUTPUT)/fuzz/corpus-fuse

# The MegaKernel as a shared library (no main; C entry points mk_open/mk_call/mk_run/...)
# for tests/workloads/megakernel_profiled.py, which loads it with ctypes under
# torch.profiler. Built with the programs by `make cuda`.
$(OUTPUT)/progs/libmegakernel.so: tests/progs/megakernel.cu include/commtrace/devprof.h
	@mkdir -p $(@D)
	$(NVCC) -O2 -Iinclude -shared -Xcompiler -fPIC -DMK_LIBRARY -o $@ $<
cuda: $(OUTPUT)/progs/libmegakernel.so

# The recorder's cost on the host (scripts/bench.py devprof): -O2, as a runtime would
# build it, instead of the -O1 of the other test programs.
$(OUTPUT)/progs/devprof_cost: tests/progs/devprof_cost.c include/commtrace/devprof.h
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Iinclude -o $@ $<
