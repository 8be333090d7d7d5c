# Sourced by the bench scripts (ROOT set). bench_requirements NAME TOOL...: BIN (default the release
# binary, built if missing) and the tools the script runs, or exit naming the missing one.
bench_requirements() {
    local name="$1"; shift
    BIN="${BIN:-$ROOT/.build/release/attest-gateway}"
    [ -x "$BIN" ] || (cd "$ROOT" && swift build -c release >&2)
    for tool in "$@"; do
        command -v "$tool" > /dev/null || { echo "$name: $tool missing (make bench-deps)" >&2; exit 1; }
    done
}

# Also: a scratch directory ($WORK, with $WORK/run) and the processes
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

# nginx's temporary-file directives, all under run/ with PREFIX (one nginx per PREFIX in a
# scratch directory), indented for an http block.
nginx_temp_paths() { # prefix
    printf '    client_body_temp_path run/%s_body;\n    proxy_temp_path run/%s_proxy;\n    fastcgi_temp_path run/%s_fcgi;\n    uwsgi_temp_path run/%s_uwsgi;\n    scgi_temp_path run/%s_scgi;\n' "$1" "$1" "$1" "$1" "$1"
}

# The access log of an nginx measured beside the gateway, so both log each request or neither
# does: with ACCESS_LOG=1 (the default), `combined` lines to /dev/null, gathered 16 KiB at a
# time (the gateway gathers its JSON lines per loop the same way, AccessLogBuffer) and flushed
# within 100 ms; with ACCESS_LOG=0 (the gateway's --no-access-log), off.
nginx_access_log() {
    if [ "${ACCESS_LOG:-1}" = 0 ]; then
        echo "access_log off;"
    else
        echo "access_log /dev/null combined buffer=16k flush=100ms;"
    fi
}

# Sets CALLGRIND_GATEWAY: the command prefix that runs the gateway under callgrind, dumps in
# $WORK/callgrind.out.<pid>. dispatchMain() under valgrind 3.19 needs the sigsuspend shim
# (scripts/valgrind-sigsuspend.c), built here into $WORK. CALLGRIND_ARGS: more callgrind options
# (e.g. --dump-instr=yes, for costs per instruction address).
callgrind_gateway_prefix() {
    gcc -shared -fPIC -O2 -o "$WORK/sigsuspend.so" "$ROOT/scripts/valgrind-sigsuspend.c" -ldl || return 1
    CALLGRIND_GATEWAY=(env LD_PRELOAD="$WORK/sigsuspend.so" valgrind --tool=callgrind --compress-strings=no
        --callgrind-out-file="$WORK/callgrind.out.%p" ${CALLGRIND_ARGS:-})
}
