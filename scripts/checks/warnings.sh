#!/usr/bin/env bash
# Zero warnings from the compiler on the project's own files and from SwiftPM about the package,
# debug and release. Reads the whole output
# of the builds `make test` already ran (.build/build.log: the debug build; .build/release-build.log:
# demo.sh's release build); a log that is missing is made here. On a clean clone (CI) those
# builds compile every file, so every warning shows; on an incremental build only the files
# that were compiled again do.
set -euo pipefail
cd "$(dirname "$0")/../.."
status=0
for pair in "debug:.build/build.log" "release:.build/release-build.log"; do
  configuration=${pair%%:*}
  log=${pair#*:}
  if [ ! -f "$log" ]; then
    mkdir -p .build
    swift build -c "$configuration" > "$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
  fi
  warnings=$(grep -E "^($PWD/.*: )?warning:" "$log" | sort -u || true)
  if [ -n "$warnings" ]; then
    echo "warnings: FAILED: the $configuration build warns:"
    echo "$warnings" | head -n 40
    status=1
  else
    echo "warnings: $configuration build without a warning from the compiler or SwiftPM ($log)"
  fi
done
# `swift test` builds the test targets: scripts/swift-test.sh keeps its output in .build/test.log.
if [ -f .build/test.log ]; then
  warnings=$(grep -E "^($PWD/.*: )?warning:" .build/test.log | sort -u || true)
  if [ -n "$warnings" ]; then
    echo "warnings: FAILED: the test build warns:"
    echo "$warnings" | head -n 40
    status=1
  else
    echo "warnings: test build without a warning (.build/test.log)"
  fi
fi
exit $status
