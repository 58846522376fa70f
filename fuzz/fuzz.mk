# libFuzzer targets (make fuzz, from the root Makefile): build/fuzz/<target> for every
# fuzz/fuzz_*.c, each with every library source compiled in (not the gcc-built archive) by clang
# with -fsanitize=fuzzer,address,undefined; and their seed corpora in build/fuzz/seeds/<target>/
# (fuzz/make-seeds: system libraries, the fixtures, .eh_frame sections, real stacks and cores).
# Run them with fuzz/run (npm run fuzz -- --seconds N).
ROOT     := $(CURDIR)
BUILD    ?= $(ROOT)/build
OUT      := $(BUILD)/fuzz
FUZZ_CC  ?= clang
LDLIBS   := -lelf -lz -lzstd -llzma -lpthread -ldl
# pointer-overflow and nonnull-attribute stay recoverable only for fuzz/ubsan.supp (known bugs not fixed yet); runs set
# UBSAN_OPTIONS=halt_on_error=1, so any other report still ends the run.
SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize-recover=pointer-overflow,nonnull-attribute \
            -fno-omit-frame-pointer
CFLAGS_F := -g -O1 $(SAN) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
            -Inative/include -Inative/src -I.

LIB_SRCS := $(wildcard native/src/*.c native/src/utils/*.c native/src/arch/*/*.c native/src/python/*.c)
LIB_OBJS := $(patsubst native/src/%.c,$(OUT)/obj/%.o,$(LIB_SRCS))
# fuzz_core needs core.c (dwunw_core_load)
TARGETS  := $(patsubst fuzz/%.c,$(OUT)/%,$(filter-out $(if $(wildcard native/src/core.c),,fuzz/fuzz_core.c),\
              $(wildcard fuzz/fuzz_*.c)))

.PHONY: all targets seeds
all: targets seeds
targets: $(TARGETS)

$(OUT)/obj/%.o: native/src/%.c
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) $(CFLAGS_F) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(OUT)/%: fuzz/%.c $(LIB_OBJS)
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) $(CFLAGS_F) -fsanitize=fuzzer -o $@ $< $(LIB_OBJS) $(LDLIBS)

# A helper of make-seeds: the expressions of real tables, for fuzz_expr.
$(OUT)/seed_exprs: fuzz/seed_exprs.c $(LIB_OBJS)
	@$(FUZZ_CC) $(CFLAGS_F) -fsanitize=fuzzer-no-link -o $@ $< $(LIB_OBJS) $(LDLIBS)

# Seeds are made once (delete build/fuzz/seeds to make them again).
seeds: $(OUT)/seeds/.stamp
$(OUT)/seeds/.stamp: fuzz/make-seeds $(TARGETS) $(OUT)/seed_exprs
	@fuzz/make-seeds $(OUT)
	@touch $@

-include $(LIB_OBJS:.o=.d)
