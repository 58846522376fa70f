# Everything `npm start` and `npm test` need, built incrementally: make -j2
ROOT   := $(CURDIR)
BUILD  ?= $(ROOT)/build
LDLIBS := -lelf -lz -lzstd -llzma -lpthread -ldl
TESTCFLAGS := -O1 -g -Wall -Wextra -Werror -std=gnu11 -D_GNU_SOURCE -Inative/include -Inative/src -Itest/unit

UNIT_BINS := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(wildcard test/unit/*.c))
TOOL_BINS := $(patsubst test/tools/%.c,$(BUILD)/test/tools/%,$(wildcard test/tools/*.c))
TS_SRCS   := $(shell find commands lib -name '*.ts' 2>/dev/null)

.PHONY: all native ts unit tools fixtures bench bpf examples clean
all: native ts unit tools fixtures bench bpf examples otlp

native:
	@$(MAKE) -s -C native BUILD=$(BUILD)

$(BUILD)/libdwunw.a: native

# tsc checks the types and compiles dist/lib, dist/commands (scripts/ use them); esbuild bundles
# what bin/dwunw runs into dist/cli/: cli.js (the start) and one chunk per command, loaded lazily
# (a few files to load instead of ~60; koffi, a native addon, stays a package); string-width is
# replaced by lib/text-width.cjs (its import alone cost ~40 ms of every start with yargs).
ts: dist/.stamp
dist/.stamp: $(TS_SRCS) lib/text-width.cjs tsconfig.json package.json
	@npx tsc -p .
	@rm -rf dist/cli
	@npx esbuild lib/cli.ts --bundle --splitting --format=esm --platform=node --target=node20 \
	  --outdir=dist/cli --external:koffi --alias:string-width=./lib/text-width.cjs \
	  --chunk-names='[name]-[hash]' --log-level=warning \
	  "--banner:js=import { createRequire as __dwunwRequire } from 'node:module'; const require = __dwunwRequire(import.meta.url);"
	@touch $@

include test/unit/wrap.mk
unit: $(UNIT_BINS)
$(BUILD)/test/test_nowait: TEST_LDFLAGS = $(NOWAIT_WRAP)
$(BUILD)/test/%: test/unit/%.c test/unit/tap.h test/unit/testutil.h $(BUILD)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(CC) $(TESTCFLAGS) -o $@ $< $(BUILD)/libdwunw.a $(LDLIBS) $(TEST_LDFLAGS)

tools: $(TOOL_BINS)
$(BUILD)/test/tools/%: test/tools/%.c $(BUILD)/libdwunw.a
	@mkdir -p $(dir $@)
	@$(CC) $(TESTCFLAGS) -O2 -o $@ $< $(BUILD)/libdwunw.a $(LDLIBS)

fixtures:
	@if [ -f fixtures/Makefile ]; then $(MAKE) -s -C fixtures; fi

# dwunw bench's harness (libunwind and libdwfl from Debian packages) and its reference snapshots
# of the cross-arch fixtures: after the library and the fixtures.
bench: native fixtures
	@$(MAKE) -s -C bench BUILD=$(BUILD)

# memleak and the reusable stack capture (bpf/): vmlinux.h from the running kernel's BTF, the
# CO-RE object and its bpftool skeleton, build/bpf/memleak (libdwunw.a) and memleak-fp.
bpf: native
	@$(MAKE) -s -C bpf BUILD=$(BUILD)

# examples/: the example memleak before and after its patch (memleak-dwarf.patch), and the API
# programs of doc/api_usage.md §6, into build/examples/ (test/examples.test.ts runs them).
examples: native bpf
	@$(MAKE) -s -C examples BUILD=$(BUILD)

# The engines of the export tests (a Collector) and the OTLP profiles schema (test/engines/engines.mk,
# scripts/otlp-descriptors): not in `all` (Go builds take minutes cold); npm test builds them.
.PHONY: engines otlp
include test/engines/engines.mk
engines: $(BUILD)/engines/otelcol $(BUILD)/engines/pyroscope-push otlp
otlp: $(BUILD)/otlp/profiles.desc
$(BUILD)/otlp/profiles.desc: scripts/otlp-descriptors
	@mkdir -p $(@D)
	@python3 scripts/otlp-descriptors $@

# Cross builds (test/verify-cross.test.ts checks them): libdwunw.a for arm64 and mips32, and
# memleak for arm64 and mips32 (build/aarch64-linux-gnu/bpf/, build/mipsel-linux-gnu/bpf/).
.PHONY: cross
cross:
	@$(MAKE) -s -C native CROSS=aarch64-linux-gnu- BUILD=$(BUILD)/aarch64-linux-gnu lib
	@$(MAKE) -s -C native CROSS=mipsel-linux-gnu- BUILD=$(BUILD)/mipsel-linux-gnu lib
	@$(MAKE) -s -C bpf CROSS=aarch64-linux-gnu- BUILD=$(BUILD)
	@$(MAKE) -s -C bpf CROSS=mipsel-linux-gnu- BUILD=$(BUILD)

clean:
	rm -rf build dist
	@if [ -f fixtures/Makefile ]; then $(MAKE) -s -C fixtures clean; fi

# Fuzzing (clang, libFuzzer): build/fuzz/<target> for each fuzz/fuzz_*.c, and their seed corpora
# (fuzz/fuzz.mk). Run them with `npm run fuzz -- --seconds N`; test/fuzz.test.ts runs them briefly.
.PHONY: fuzz asan tsan
fuzz:
	@$(MAKE) -s -f fuzz/fuzz.mk BUILD=$(BUILD)

# The library, the C unit tests and the test tools under ASan + UBSan: build/asan/ (fuzz/asan.mk).
# test/sanitizers.test.ts runs them.
asan:
	@$(MAKE) -s -f fuzz/asan.mk BUILD=$(BUILD)

# The library and test_nowait under ThreadSanitizer (clang): build/tsan/ (fuzz/tsan.mk).
# test/tsan.test.ts runs it.
tsan:
	@$(MAKE) -s -f fuzz/tsan.mk BUILD=$(BUILD)
