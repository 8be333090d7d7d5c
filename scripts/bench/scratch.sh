# Sourced by the bench scripts: a scratch directory ($WORK, with $WORK/run) and the processes
# the script starts (append their PIDs to PIDS), all stopped and removed on exit: TERM, up to
# 5 s, then KILL; KEEP_WORK=1 keeps the directory. A script may define bench_before_cleanup
# (called first, e.g. to stop client processes). Usage: bench_scratch NAME.
bench_scratch() {
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/attest-gateway-$1.XXXXXX")"
    mkdir -p "$WORK/run"
    PIDS=()
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

bench_cleanup() {
    if declare -F bench_before_cleanup > /dev/null; then bench_before_cleanup || true; fi
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
