# The library and test_nowait (DWUNW_REGS_NOWAIT captures beside a loader thread) under
# ThreadSanitizer (make tsan, from the root Makefile), into build/tsan/: obj/, libdwunw.a,
# test/test_nowait. test/tsan.test.ts runs it. clang: gcc 12's TSan runtime is the same, but
# clang's reports name the racing accesses with their inlined frames. -DDW_RACE_POINTS: the library
# yields the CPU at its race points (internal.h), where a concurrent update may land mid-read.
ROOT     := $(CURDIR)
BUILD    ?= $(ROOT)/build
OUT      := $(BUILD)/tsan
TSAN_CC  ?= clang
LDLIBS   := -lelf -lz -lzstd -llzma -lpthread -ldl
CFLAGS_T := -O1 -g -fsanitize=thread -DDW_RACE_POINTS -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Inative/include -Inative/src

include test/unit/wrap.mk

LIB_SRCS := $(wildcard native/src/*.c native/src/utils/*.c native/src/arch/*/*.c native/src/python/*.c)
LIB_OBJS := $(patsubst native/src/%.c,$(OUT)/obj/%.o,$(LIB_SRCS))

.PHONY: all
all: $(OUT)/test/test_nowait

$(OUT)/obj/%.o: native/src/%.c
	@mkdir -p $(dir $@)
	@$(TSAN_CC) $(CFLAGS_T) -fvisibility=hidden -MMD -MP -c $< -o $@

$(OUT)/libdwunw.a: $(LIB_OBJS)
	@rm -f $@
	@ar rcs $@ $^

$(OUT)/test/test_nowait: test/unit/test_nowait.c test/unit/tap.h $(OUT)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(TSAN_CC) $(CFLAGS_T) -Itest/unit -o $@ $< $(OUT)/libdwunw.a $(LDLIBS) $(NOWAIT_WRAP)

-include $(LIB_OBJS:.o=.d)
