# The library, every C unit test and every test tool under AddressSanitizer + UndefinedBehavior-
# Sanitizer (make asan, from the root Makefile), into build/asan/: obj/, libdwunw.a, libdwunw.so
# (for the CLI: LD_PRELOAD=$(gcc -print-file-name=libasan.so) DWUNW_LIB=build/asan/libdwunw.so),
# test/<unit test>, test/tools/<tool>. test/sanitizers.test.ts runs them.
ROOT     := $(CURDIR)
BUILD    ?= $(ROOT)/build
OUT      := $(BUILD)/asan
ASAN_CC  ?= gcc
LDLIBS   := -lelf -lz -lzstd -llzma -lpthread -ldl
# pointer-overflow and nonnull-attribute stay recoverable only for fuzz/ubsan.supp (known bugs not
# fixed yet); the tests run with UBSAN_OPTIONS=halt_on_error=1, so any other report still fails.
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
            -fsanitize-recover=pointer-overflow,nonnull-attribute
# The library's own warnings are checked by the normal build (-Werror there, not here: -O1 warns
# differently).
CFLAGS_A := -O1 -g $(SAN) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -fPIC -Inative/include -Inative/src

LIB_SRCS := $(wildcard native/src/*.c native/src/utils/*.c native/src/arch/*/*.c native/src/python/*.c)
LIB_OBJS := $(patsubst native/src/%.c,$(OUT)/obj/%.o,$(LIB_SRCS))
UNITS    := $(patsubst test/unit/%.c,$(OUT)/test/%,$(wildcard test/unit/*.c))
TOOLS    := $(patsubst test/tools/%.c,$(OUT)/test/tools/%,$(wildcard test/tools/*.c))

include test/unit/wrap.mk
$(OUT)/test/test_nowait: TEST_LDFLAGS = $(NOWAIT_WRAP)

.PHONY: all
all: $(OUT)/libdwunw.a $(OUT)/libdwunw.so $(UNITS) $(TOOLS)

$(OUT)/obj/%.o: native/src/%.c
	@mkdir -p $(dir $@)
	@$(ASAN_CC) $(CFLAGS_A) -fvisibility=hidden -MMD -MP -c $< -o $@

$(OUT)/libdwunw.a: $(LIB_OBJS)
	@rm -f $@
	@ar rcs $@ $^

$(OUT)/libdwunw.so: $(LIB_OBJS)
	@$(ASAN_CC) $(SAN) -shared -o $@ $^ $(LDLIBS)

$(OUT)/test/%: test/unit/%.c test/unit/tap.h $(OUT)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(ASAN_CC) $(CFLAGS_A) -Itest/unit -o $@ $< $(OUT)/libdwunw.a $(LDLIBS) $(TEST_LDFLAGS)

$(OUT)/test/tools/%: test/tools/%.c $(OUT)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(ASAN_CC) $(CFLAGS_A) -o $@ $< $(OUT)/libdwunw.a $(LDLIBS)

-include $(LIB_OBJS:.o=.d)
