#!/usr/bin/env bash
# Single-core CPU time per operation of the HTTP/1.1 parsers and head writers (the HTTP1 module),
# from the Benchmarks package's http-bench (release build). Not a test: it asserts nothing.
#   HTTP_BENCH_ITERATIONS (default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --package-path Benchmarks --product http-bench >&2
Benchmarks/.build/release/http-bench "${HTTP_BENCH_ITERATIONS:-1000000}"
