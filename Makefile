# sandbox-run: the two commands a fresh machine needs are `make demo` and
# `make test`; both install bubblewrap first when it is missing.

GO      ?= go
BIN     := bin/sandbox-run
INIT_BIN := bin/sandbox-run-init
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/sandbox-run/sandbox-run/internal/cli.Version=$(VERSION)
# Packages whose tests run real bwrap; CI runs them again as an unprivileged user.
KERNEL_PKGS := ./sandbox/ ./e2e/ ./filter/ ./pathguard/ ./internal/limits/ ./mcp/
# What left package sandbox for packages of its own runs here too: its
# tests ran unprivileged when they were sandbox's.
KERNEL_PKGS += ./internal/mechanism/... ./internal/hostnet/ ./internal/plan/... ./internal/protect/ ./internal/hostwalk/ ./internal/gitrepo/
# The escape matrix (egress-cases.json, package check) runs bwrap too.
KERNEL_PKGS += ./internal/matrix/
# The connect broker's escape cases: unprivileged, sandbox-run owns the
# sandbox's user namespace instead of holding CAP_SYS_PTRACE.
KERNEL_PKGS += ./internal/connbroker/
FUZZTIME ?= 20s
# A package's tests may take longer than go test's default 10 minutes on
# a loaded 2-core machine (e2e drives hundreds of real sandboxes, the MCP
# conformance suite and real SDK servers it builds).
TEST_TIMEOUT ?= 40m
# staticcheck, pinned (its module version; it prints 2026.2.2), built into
# .cache/tools by make vet (a new version, a new directory).
STATICCHECK_VERSION := v0.8.2
STATICCHECK := .cache/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck

export GOTOOLCHAIN := local

.PHONY: all deps deps-run build demo test test-unit test-kernel test-race soak fuzz bench bench-startup vet lint clean
.PHONY: mcp-deps install uninstall
.PHONY: e2e-sandbox test-vm container-rootfs
.PHONY: bench-quick bench-go bench-image bench-transparent

all: build

deps:
	@scripts/install-deps.sh

# Only what running needs (bubblewrap, runsc): make demo installs no
# test-only package.
deps-run:
	@scripts/install-deps.sh run

# The real MCP servers the tests wrap, pinned in scripts/mcp-servers, into
# .cache/mcp (needs node and npm; idempotent).
mcp-deps:
	@scripts/install-mcp-servers.sh

# CGO_ENABLED=0: a static binary. sandbox-run starts on every run, and on
# the network path again as init inside the sandbox; linked dynamically (net
# and os/user use cgo by default) each start also loads ld.so and libc,
# about 0.75 ms here. Go's own resolver and user lookup do the rest: names
# from /etc/hosts and DNS, users and groups from /etc/passwd and /etc/group.
#
# sandbox-run-init, built first, is init inside the sandbox on the runs that
# need one: it links only init and starts about 1 ms sooner than
# sandbox-run would. Its Go build ID is stamped into sandbox-run, which uses
# the file beside it only when it carries that ID (sandbox.InitBinary).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(INIT_BIN) ./cmd/sandbox-run-init
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -X github.com/sandbox-run/sandbox-run/internal/cli.InitBuildID=$$($(GO) tool buildid $(INIT_BIN))" -o $(BIN) ./cmd/sandbox-run

# PREFIX (default /usr/local) and DESTDIR as usual; the binary reports the
# version it was built from (git describe) with sandbox-run version.
PREFIX  ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN) $(INIT_BIN) $(DESTDIR)$(PREFIX)/bin/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/sandbox-run $(DESTDIR)$(PREFIX)/bin/sandbox-run-init

demo: deps-run build
	@scripts/demo.sh $(BIN)

vet: $(STATICCHECK)
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	$(STATICCHECK) ./...

# The readability bar and staticcheck for both platforms the code ships
# for: no function over 80 lines or complexity 20 but those listed in
# scripts/lint/over.txt (a list that may only get shorter).
lint: $(STATICCHECK)
	GOOS=darwin $(STATICCHECK) ./...
	GOOS=windows $(GO) build ./...
	$(GO) run ./scripts/lint
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then \
		echo "lint: not gofmt-formatted: $$unformatted; fix: gofmt -w $$unformatted"; exit 1; fi

$(STATICCHECK):
	GOBIN=$(CURDIR)/$(dir $(STATICCHECK)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Everything CI runs. SANDBOX_REQUIRE=1 turns every "cannot run bwrap here"
# skip into a failure. The fuzzers (a fixed time each, CPU-bound) run beside
# the race lane (mostly waiting on sandboxes), not after it; the fuzzers'
# output is printed when both have ended, and either failing fails the run.
test: deps mcp-deps build vet lint
	@if [ "$$(id -u)" = 0 ]; then scripts/container-rootfs.sh >/dev/null; fi
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestSoak$$' ./...
	$(MAKE) --no-print-directory soak
	@log=$$(mktemp); \
	$(MAKE) --no-print-directory fuzz >"$$log" 2>&1 & fuzz=$$!; \
	race=0; $(MAKE) --no-print-directory test-race || race=$$?; \
	f=0; wait $$fuzz || f=$$?; \
	echo "== make fuzz (its output)"; cat "$$log"; rm -f "$$log"; \
	[ $$f -eq 0 ] || echo "make fuzz failed ($$f)"; \
	[ $$race -eq 0 ] || echo "make test-race failed ($$race)"; \
	[ $$f -eq 0 ] && [ $$race -eq 0 ]

# The node proxy under 500 clients for 60 s and 20,000 requests (root: the
# upstream is a test host in a network namespace), verbose so that its
# latency, memory, socket and goroutine figures are printed.
soak:
	$(GO) test -count=1 -v -run '^TestSoak$$' ./proxy/

# The unit and integration suites once more under the race detector (the
# sandbox-run binary the e2e tests build is not instrumented; the packages
# they drive in-process are).
test-race: mcp-deps
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

test-kernel: mcp-deps build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(KERNEL_PKGS)

# The suites that need another kernel than the host's (cgroup v2 limits,
# Yama and --ptrace, user namespaces disabled), in a VM that boots Debian's
# linux-image-amd64 under qemu (installed, downloaded and cached under
# .cache/vm on first use; as root, or with qemu installed). About 5 minutes
# under TCG emulation; see scripts/test-vm.sh.
test-vm:
	@scripts/test-vm.sh

# The Debian root filesystem the container tests run podman on
# (debootstrap, bookworm minbase plus bubblewrap; root; about a minute,
# once, cached under .cache/rootfs). The tests build it themselves when it
# is missing; this builds it ahead.
container-rootfs:
	@scripts/container-rootfs.sh

# The whole escape matrix, every case with its positive control, through
# a freshly built binary, then the tier-0 column. CI runs it (inside make
# test and make test-kernel) as root and as an unprivileged user with
# SANDBOX_REQUIRE=1.
e2e-sandbox: build
	$(GO) test -count=1 -v -run '^TestEscapeMatrix' ./internal/matrix/

fuzz:
	@FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# sandbox-run against raw bwrap, srt and codex sandbox (pinned, installed
# into .cache/srt and .cache/codex), interleaved; writes docs/BENCHMARKS.md.
# The network tables need root.
bench: deps build
	@scripts/bench.sh $(BIN)

# A one-minute subset of `make bench`; its report goes to .cache/bench.
bench-quick: deps build
	@scripts/bench.sh $(BIN) -quick -out .cache/bench/BENCHMARKS.quick.md

# The Go micro-benchmarks alone (`make bench` includes the hot-path ones).
bench-go: deps build
	$(GO) test -run '^$$' -bench . -benchmem ./...

# run --image against podman run --runtime runsc and runsc do, interleaved
# (the image section of make bench alone; prints, writes nothing).
bench-image: deps build
	$(GO) build -o .cache/bench/sbx-bench ./scripts/bench
	.cache/bench/sbx-bench images -bin $(BIN) -n 15

# Transparent egress alone: downloads and connection set-up, direct,
# straight through the proxy and through the netstack, interleaved (prints,
# writes nothing). BENCH_FLAGS such as -n 25 -size 134217728
# -baseline-bin /path/to/old/sandbox-run.
bench-transparent: build
	$(GO) build -o .cache/bench/sbx-bench ./scripts/bench
	.cache/bench/sbx-bench transparent -bin $(BIN) $(BENCH_FLAGS)

bench-startup: deps build
	@scripts/bench-startup.sh $(BIN)

clean:
	rm -rf bin
