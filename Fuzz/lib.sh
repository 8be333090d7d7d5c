# Shared steps of the libFuzzer runners (sourced by Fuzz/<target>/run.sh).
#
#   fuzz_build NAME                     builds the package's `fuzz-NAME` product (Fuzz/NAME) with
#                                       libFuzzer + ASan, $FUZZ_SWIFT_OPT (default -O), into
#                                       $FUZZ_BUILD_PATH (default .build/fuzz; incremental), copied
#                                       to .fuzz/NAME/fuzz-NAME
#   fuzz_run NAME                       runs it for FUZZ_RUNS executions, capped at FUZZ_MAX_TIME
#                                       seconds, over .fuzz/NAME/corpus (with FUZZ_DICT, when set,
#                                       as libFuzzer's -dict); exit 1 on any crash
# Callers set FUZZ_RUNS / FUZZ_MAX_TIME defaults and seed .fuzz/NAME/corpus between the two.

fuzz_build() {
  local name="$1" work=".fuzz/$1"
  mkdir -p "$work/corpus" "$work/artifacts"
  local opt="${FUZZ_SWIFT_OPT:--O}" path="${FUZZ_BUILD_PATH:-.build/fuzz}"
  echo "building fuzz-$name (swift build --product fuzz-$name, libFuzzer + ASan, $opt, $path)"
  # The debug configuration with -O: optimized like the release build, without its
  # cross-module optimization (which doubles compile time) and with the debug-only checks on.
  # The smoke check builds with -Onone instead: 2,000 runs need no speed, the build does.
  swift build -c debug --product "fuzz-$name" --build-path "$path" \
    -Xswiftc "$opt" -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING >"$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log" >&2; return 1; }
  cp "$path/debug/fuzz-$name" "$work/fuzz-$name"
}

fuzz_run() {
  local name="$1" work=".fuzz/$1" status start end
  echo "fuzzing $name: runs=$FUZZ_RUNS max_total_time=${FUZZ_MAX_TIME}s corpus=$(ls "$work/corpus" | wc -l) files"
  start=$(date +%s)
  set +e
  "$work/fuzz-$name" -runs="$FUZZ_RUNS" -max_total_time="$FUZZ_MAX_TIME" -max_len=8192 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    ${FUZZ_DICT:+-dict="$FUZZ_DICT"} "$work/corpus" \
    2>"$work/last-run.log"
  status=$?
  set -e
  end=$(date +%s)
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ +DONE" "$work/last-run.log" || true
  if [ $status -ne 0 ]; then
    echo "FUZZ FAILURE (exit $status): see $work/last-run.log and $work/artifacts/" >&2
    tail -40 "$work/last-run.log" >&2
    return 1
  fi
  echo "fuzz $name: 0 crashes in $((end - start)) s"
}
