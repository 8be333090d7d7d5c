#!/usr/bin/env bash
# Single-core throughput of the HTTP/1.1 parsers, serializer and header rewriting (swiftc -O).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/http-parser-bench
mkdir -p "$work"
swiftc -O -wmo -parse-as-library -package-name attest_gateway -module-name HTTPParserBench \
  Sources/Gateway/HTTP1/*.swift Sources/Gateway/Proxy/HeaderRewriting.swift Fuzz/http-parser/bench.swift \
  -o "$work/bench"
"$work/bench"
