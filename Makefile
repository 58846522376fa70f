# Everything `npm start` and `npm test` need, built incrementally: make -j2
ROOT   := $(CURDIR)
BUILD  ?= $(ROOT)/build
LDLIBS := -lelf -lz -lzstd -llzma -lpthread -ldl
TESTCFLAGS := -O1 -g -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE -Inative/include -Inative/src -Itest/unit

UNIT_BINS := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(wildcard test/unit/*.c))
TOOL_BINS := $(patsubst test/tools/%.c,$(BUILD)/test/tools/%,$(wildcard test/tools/*.c))
TS_SRCS   := $(shell find commands lib -name '*.ts' 2>/dev/null)

.PHONY: all native ts unit tools fixtures clean
all: native ts unit tools fixtures

native:
	@$(MAKE) -s -C native BUILD=$(BUILD)

$(BUILD)/libdwunw.a: native

ts: dist/.stamp
dist/.stamp: $(TS_SRCS) tsconfig.json package.json
	@npx tsc -p .
	@touch $@

unit: $(UNIT_BINS)
$(BUILD)/test/%: test/unit/%.c test/unit/tap.h $(BUILD)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(CC) $(TESTCFLAGS) -o $@ $< $(BUILD)/libdwunw.a $(LDLIBS)

tools: $(TOOL_BINS)
$(BUILD)/test/tools/%: test/tools/%.c $(BUILD)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(CC) $(TESTCFLAGS) -O2 -o $@ $< $(BUILD)/libdwunw.a $(LDLIBS)

fixtures:
	@if [ -f fixtures/Makefile ]; then $(MAKE) -s -C fixtures; fi

clean:
	rm -rf build dist
	@if [ -f fixtures/Makefile ]; then $(MAKE) -s -C fixtures clean; fi
