# SPDX-License-Identifier: MIT
# Fuzzing the tracer's parsers of untrusted input (libFuzzer, clang): ELF files of the
# target's libraries, /proc text, pid lists, profile files, symbol names.
#   make fuzz            build build/fuzz/fuzz_{elf,text}
#   make fuzz-run        run each for FUZZ_TIME seconds (default 30); a crash fails, and so
#                        does one input that runs past FUZZ_UNIT_TIMEOUT seconds (a hang)
FUZZ_CC   ?= clang
FUZZ_TIME ?= 30
FUZZ_UNIT_TIMEOUT ?= 20
# What every fuzz run passes (here and in mk/devprof.mk).
FUZZ_RUN_FLAGS = -rss_limit_mb=2048 -timeout=$(FUZZ_UNIT_TIMEOUT) -artifact_prefix=$(OUTPUT)/fuzz/ \
		 -print_final_stats=1
TRACER_FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		     -std=gnu11 -D_GNU_SOURCE -Iinclude -Iuser
TRACER_FUZZ := $(OUTPUT)/fuzz/fuzz_elf $(OUTPUT)/fuzz/fuzz_text $(OUTPUT)/fuzz/fuzz_replay
ELF_SRCS  := $(wildcard user/elf/*.c)

.PHONY: fuzz fuzz-run
fuzz: $(TRACER_FUZZ)

$(OUTPUT)/fuzz/fuzz_elf: tests/fuzz/fuzz_elf.c $(ELF_SRCS) user/elf/elfsym.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(TRACER_FUZZ_FLAGS) $< $(ELF_SRCS) -lelf -liberty -o $@

$(OUTPUT)/fuzz/fuzz_text: tests/fuzz/fuzz_text.c $(ELF_SRCS) user/target/proc.c \
			   user/python/profiles.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(TRACER_FUZZ_FLAGS) $< $(ELF_SRCS) user/target/proc.c \
		user/python/profiles.c -lelf -liberty -o $@

# `replay FILE` (user/record/): the file, then the whole event path and text exporters,
# so every user-space source but main.c.
REPLAY_FUZZ_SRCS := $(filter-out user/main.c,$(USER_SRCS))
$(OUTPUT)/fuzz/fuzz_replay: tests/fuzz/fuzz_replay.c $(REPLAY_FUZZ_SRCS) $(SKELS) \
			    $(OUTPUT)/ct_version.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(TRACER_FUZZ_FLAGS) -I$(OUTPUT) $(CJSON_CFLAGS) -DCT_VERSION='"fuzz"' $< \
		$(REPLAY_FUZZ_SRCS) $(LDLIBS) -o $@

# Seeds: the fixture libraries (real ELF files of every shape the resolver handles) and
# lines of real /proc maps and profiles.
fuzz-run: $(TRACER_FUZZ) | $(FIXTURES)
	@mkdir -p $(OUTPUT)/fuzz/corpus-elf $(OUTPUT)/fuzz/corpus-text
	cp $(FIXTURES) $(OUTPUT)/fuzz/corpus-elf/
	head -c 20000 /proc/self/maps > $(OUTPUT)/fuzz/corpus-text/maps
	printf 'module Module._call_impl */torch/nn/modules/module.py self\n' \
		> $(OUTPUT)/fuzz/corpus-text/profile
	printf '_ZN4c10d16ProcessGroupGloo9allreduceERSt6vectorIN2at6TensorESaIS3_EERKNS_16AllreduceOptionsE' \
		> $(OUTPUT)/fuzz/corpus-text/mangled
	$(OUTPUT)/fuzz/fuzz_elf -max_total_time=$(FUZZ_TIME) -max_len=65536 $(FUZZ_RUN_FLAGS) \
		$(OUTPUT)/fuzz/corpus-elf
	$(OUTPUT)/fuzz/fuzz_text -max_total_time=$(FUZZ_TIME) -max_len=4096 $(FUZZ_RUN_FLAGS) \
		$(OUTPUT)/fuzz/corpus-text
	@mkdir -p $(OUTPUT)/fuzz/corpus-replay
	$(OUTPUT)/fuzz/fuzz_replay -max_total_time=$(FUZZ_TIME) -max_len=16384 $(FUZZ_RUN_FLAGS) \
		$(OUTPUT)/fuzz/corpus-replay
