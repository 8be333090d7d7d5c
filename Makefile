# attest-gateway: make deps | build | check | test | run | bench | bench-android | bench-redis | bench-counter-floor | bench-instructions | bench-verify | bench-http | bench-websocket | fuzz | fuzz-long | soak
# The measuring programs (verify-bench, bench-mint, http-bench) are the Benchmarks/ package's:
# `swift build` does not build them; the bench scripts do (swift build --package-path Benchmarks).
SHELL := /bin/bash
.DEFAULT_GOAL := build

SWIFT ?= swift
# What building and `make run` need; the tests add servers and clients (nginx, caddy and
# testssl.sh's packages start services on port 80 on a systemd host: `make run` does not install them).
RUN_PACKAGES := libssl-dev libhiredis-dev libyaml-dev libnghttp2-dev libcjose-dev libjansson-dev redis-server redis-tools openssl curl python3
TEST_PACKAGES := python3-yaml nghttp2-client python3-h2 python3-grpcio nginx caddy testssl.sh node-express nodejs python3-flask prometheus chromium python3-websockets node-ws python3-jwt python3-jwcrypto python3-venv
APT_PACKAGES := $(RUN_PACKAGES) $(TEST_PACKAGES)
BENCH_PACKAGES := nginx haproxy wrk gcc
# The load-independent counts (callgrind; gcc builds the sigsuspend shim valgrind needs).
INSTRUCTIONS_PACKAGES := valgrind gcc binutils
# bench-counter-floor's verify-inside-the-proxy figure (perf record).
COUNTER_FLOOR_PACKAGES := linux-perf
# The soak's plot: Debian's matplotlib, for Debian's python3 (/usr/bin/python3).
SOAK_PACKAGES := python3-matplotlib
SOAK_SECONDS ?= 1800
SOAK_PYTHON ?= /usr/bin/python3

.PHONY: otel-venv deps run-deps bench-deps instructions-deps soak-deps build release check test run bench bench-android bench-redis bench-counter-floor bench-instructions bench-verify bench-http bench-websocket fuzz fuzz-long soak clean

# Installs the named Debian packages that are missing (idempotent, no prompt); every *deps target.
install_missing = @missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

deps:
	$(call install_missing,$(APT_PACKAGES))
	@$(MAKE) --no-print-directory otel-venv

# The OTLP receiver of the trace tests (scripts/otlp-receiver.py) decodes with the
# opentelemetry-proto package from PyPI, in a venv of its own under .build (no global pip);
# idempotent.
OTEL_VENV := .build/otel-venv
otel-venv: $(OTEL_VENV)/.installed
$(OTEL_VENV)/.installed:
	python3 -m venv $(OTEL_VENV)
	$(OTEL_VENV)/bin/pip install -q opentelemetry-proto
	touch $@

run-deps:
	$(call install_missing,$(RUN_PACKAGES))

bench-deps: deps
	$(call install_missing,$(BENCH_PACKAGES))

instructions-deps: bench-deps
	$(call install_missing,$(INSTRUCTIONS_PACKAGES))

soak-deps: deps
	$(call install_missing,$(SOAK_PACKAGES))

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# Build plus the unit tests (GatewayUnitTests, VerificationTests: no sockets, no processes, no
# clocks), in parallel; a couple of minutes from a built tree on the 2-core machine.
check: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) bash scripts/swift-test.sh unit --skip-build

# Unit tests in parallel, then integration (real redis-server, started by the tests) and
# end-to-end tests with --no-parallel: the loopback and Redis outage tests measure bounded
# latencies; on a 2-core machine, parallel suites that block threads starve them.
# scripts/swift-test.sh keeps the whole output in .build/test.log and, on a failure, ends with
# the failing tests and their first issues.
# scripts/check-all.sh then runs scripts/checks/*.sh, among them testssl.sh against a TLS
# listener (~2 min; fails on any finding rated HIGH or CRITICAL).
test: deps
	@mkdir -p .build
	$(SWIFT) build 2>&1 | tee .build/build.log; exit $${PIPESTATUS[0]}
	SWIFT=$(SWIFT) bash scripts/swift-test.sh
	bash scripts/check-all.sh

run: run-deps
	bash scripts/run-demo.sh --check-ports
	$(SWIFT) build -c release
	bash scripts/run-demo.sh

bench: bench-deps release
	bash scripts/bench.sh

# The Android rows of `make bench` alone (scripts/bench-android.sh; INSTRUCTIONS=1 for callgrind counts).
bench-android: bench-deps release
	SHARED_DIR=$${SHARED_DIR:-$(CURDIR)/../shared} bash scripts/bench-android.sh

# Issue 14's store rows: enforced route on one node, a 3-primary cluster, and a replica with
# counter_durability: replica (three bench-enforced.sh runs).
bench-redis: bench-deps release
	SHARED_DIR=$${SHARED_DIR:-$(CURDIR)/../shared} bash scripts/bench-redis-topologies.sh

# Issue 14's counter goal with the counter in Redis beside no counter at all (the in-process
# store), alternated PAIRS=3 times, then the verify's cost inside the proxy (perf); ~10 min.
bench-counter-floor: bench-deps release
	$(call install_missing,$(COUNTER_FLOOR_PACKAGES))
	SHARED_DIR=$${SHARED_DIR:-$(CURDIR)/../shared} bash scripts/bench-counter-floor.sh

# User-space instructions per request under callgrind (the same whatever the machine's load,
# ~6 min): the passthrough route beside nginx, then the enforced route beside gateway-off
# (issue 14's counter ratio, in instructions), then issue 31's: gRPC beside grpc_pass and the
# HTTP/1.1 -> h2c bridge beside the HTTP/1.1 path, the enforced route over HTTP/2 beside
# HTTP/1.1. valgrind cannot read the DWARF 5 of the release build: the scripts run a copy
# stripped of it.
bench-instructions: instructions-deps release
	strip --strip-debug -o .build/attest-gateway.nodebug .build/release/attest-gateway
	BIN=$(CURDIR)/.build/attest-gateway.nodebug bash scripts/cpu-per-request.sh instructions
	SHARED_DIR=$${SHARED_DIR:-$(CURDIR)/../shared} INSTRUCTIONS=1 bash scripts/bench-enforced.sh
	INSTRUCTIONS=1 bash scripts/bench-grpc.sh
	SHARED_DIR=$${SHARED_DIR:-$(CURDIR)/../shared} SKIP_TIMED=1 bash scripts/bench-enforced-h2.sh

bench-verify: deps
	bash scripts/bench-verify.sh

bench-http: deps
	bash scripts/bench-http.sh

# The WebSocket rows of `make bench` alone (scripts/bench-websocket.sh; WS_DURATION, ROUNDS, IDLE_TUNNELS).
bench-websocket: bench-deps
	bash scripts/bench-websocket.sh

# Every Fuzz/<target>/run.sh, each bounded in time; FUZZ_RUNS overrides the run count.
fuzz: deps
	bash scripts/fuzz.sh

# Every fuzz target from an empty corpus for 10,000,000 executions or FUZZ_LONG_SECONDS (default
# 1800) per target, whichever first; FUZZ_TARGETS picks targets. Prints each final stats line.
fuzz-long: deps
	bash scripts/fuzz-long.sh

# 30 minutes (SOAK_SECONDS) of mixed traffic against the debug build, with a reload a minute
# and a Redis restart at half time; fails on growth, unexpected statuses, leaks or a crash.
# Samples, logs and the summary in .soak/run/, the plot in .soak/soak.png (RELIABILITY.md).
soak: soak-deps build
	rm -rf .soak/run
	$(SOAK_PYTHON) scripts/soak.py --seconds $(SOAK_SECONDS) --dir .soak/run --plot .soak/soak.png

clean:
	rm -rf .build .fuzz .soak Benchmarks/.build
