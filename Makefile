# sandbox-run: the two commands a fresh machine needs are `make demo` and
# `make test`; both install bubblewrap first when it is missing.

GO      ?= go
BIN     := bin/sandbox-run
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/sandbox-run/sandbox-run/internal/cli.Version=$(VERSION)
# Packages whose tests run real bwrap; CI runs them again as an unprivileged user.
KERNEL_PKGS := ./sandbox/ ./e2e/ ./filter/ ./pathguard/
FUZZTIME ?= 20s

export GOTOOLCHAIN := local

.PHONY: all deps build demo test test-unit test-kernel fuzz bench bench-startup vet clean

all: build

deps:
	@scripts/install-deps.sh

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandbox-run

demo: deps build
	@scripts/demo.sh $(BIN)

vet:
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) build ./...

# Everything CI runs. SANDBOX_REQUIRE=1 turns every "cannot run bwrap here"
# skip into a failure.
test: deps build vet
	$(GO) test -count=1 ./...
	$(MAKE) --no-print-directory fuzz

test-kernel: build
	$(GO) test -count=1 $(KERNEL_PKGS)

fuzz:
	@for t in $$(scripts/fuzz-targets.sh); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

bench: deps build
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-startup: deps build
	@scripts/bench-startup.sh $(BIN)

clean:
	rm -rf bin
