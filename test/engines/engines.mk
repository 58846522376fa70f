# The engines the export tests send to, built from their own modules at pinned versions
# (test/engines/*/go.mod, go.sum): build/engines/otelcol, an OpenTelemetry Collector with the OTLP
# receiver, the file and debug exporters; build/engines/pyroscope-push, a receiver of Pyroscope's
# push API made of Pyroscope's own api module (the server does not build from its module: see
# test/engines/README.md). `make engines`; the export tests run it too.
# Go: the newest found (the image's /usr/local/go first; Debian's golang-go 1.19 is too old for
# go.mod's `go 1.26`); GOTOOLCHAIN=local: no toolchain download, a clear error instead.
ENGINES_GO ?= $(firstword $(wildcard /usr/local/go/bin/go) $(shell command -v go))
ENGINES_DIR := $(BUILD)/engines

$(ENGINES_DIR)/otelcol: test/engines/otelcol/main.go test/engines/otelcol/go.mod test/engines/otelcol/go.sum
	@mkdir -p $(@D)
	@echo "engines: building the Collector (Go modules; minutes when the module cache is cold)"
	@cd test/engines/otelcol && GOTOOLCHAIN=local CGO_ENABLED=0 $(ENGINES_GO) build -trimpath -o $@.tmp . && mv $@.tmp $@

$(ENGINES_DIR)/pyroscope-push: test/engines/pyroscope/main.go test/engines/pyroscope/go.mod test/engines/pyroscope/go.sum
	@mkdir -p $(@D)
	@echo "engines: building the Pyroscope push receiver (Go modules; minutes when the module cache is cold)"
	@cd test/engines/pyroscope && GOTOOLCHAIN=local CGO_ENABLED=0 $(ENGINES_GO) build -trimpath -o $@.tmp . && mv $@.tmp $@
