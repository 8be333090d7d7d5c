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

# nginx_start NAME CONF: nginx in the foreground (daemon off) with prefix $WORK and config CONF,
# its startup errors in $WORK/run/NAME.startup.log; its PID appended to PIDS and left in NGINX_PID.
nginx_start() {
    nginx -p "$WORK" -e "$WORK/run/$1.startup.log" -c "$2" -g 'daemon off;' &
    NGINX_PID=$!
    PIDS+=("$NGINX_PID")
}

# gateway_start CONFIG LOG: `$BIN serve --config CONFIG --loops 1`, stdout to /dev/null, stderr to
# LOG, with ACCESS_FLAG (also left set for the script): --no-access-log when ACCESS_LOG=0, as
# nginx_access_log turns nginx's off. Its PID appended to PIDS and left in GW_PID.
gateway_start() {
    ACCESS_FLAG=""
    if [ "${ACCESS_LOG:-1}" = 0 ]; then ACCESS_FLAG="--no-access-log"; fi
    "$BIN" serve --config "$1" --loops 1 $ACCESS_FLAG > /dev/null 2> "$2" &
    GW_PID=$!
    PIDS+=("$GW_PID")
}

# CPU per request: CLK_TCK, and tree_ticks PID, the utime+stime (clock ticks) of PID and its
# children from /proc.
CLK_TCK="$(getconf CLK_TCK)"
tree_ticks() {
    local total=0 p f
    for p in $1 $(pgrep -P "$1" 2>/dev/null); do
        [ -r "/proc/$p/stat" ] || continue
        f=$(sed 's/^.*) //' "/proc/$p/stat"); set -- $f
        total=$(( total + ${12} + ${13} ))
    done
    echo "$total"
}

# bench_rounds MEASURE A... -- B...: ROUNDS interleaved rounds of `MEASURE ROUND A...` and
# `MEASURE ROUND B...`, A first in odd rounds and B first in even ones (A is nginx, B the gateway).
bench_rounds() {
    local measure="$1" first=() second=() r
    shift
    while [ "$1" != -- ]; do first+=("$1"); shift; done
    shift
    second=("$@")
    for r in $(seq "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then
            "$measure" "$r" "${first[@]}"
            "$measure" "$r" "${second[@]}"
        else
            "$measure" "$r" "${second[@]}"
            "$measure" "$r" "${first[@]}"
        fi
    done
}

# h2load_record ROUND LABEL OUT TICKS: from h2load's output OUT, the line `round target rps
# requests errors cpu_ticks` of $WORK/rounds.tsv (requests: succeeded; errors: failed + errored +
# timed out, and responses that are not 2xx), a warning when there are errors, a progress line.
h2load_record() {
    local round="$1" label="$2" out="$3" ticks="$4" rps reqs errs
    rps=$(awk '/^finished in/{gsub(",", "", $4); print $4}' <<< "$out")
    reqs=$(awk '/^requests:/{print $8}' <<< "$out")
    errs=$(awk '/^requests:/{e += $10 + $12 + $14} /^status codes:/{e += $5 + $7 + $9} END{print e + 0}' <<< "$out")
    [ "$errs" = 0 ] || echo "# warning: round $round $label: $errs failed/errored/timed-out or non-2xx requests" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$label" "$rps" "$reqs" "$errs" "$ticks" >> "$WORK/rounds.tsv"
    echo "# round $round $label: $rps req/s ($reqs succeeded)" >&2
}

# h2load_summary TITLE ROW GOAL: the table of $WORK/rounds.tsv (h2load_record's lines, header
# first): per target the median req/s, its ratio paired per round with nginx, the median CPU
# microseconds per request and its ratio to nginx's, the errors, the per-round ratios; GOAL last.
h2load_summary() {
    python3 - "$WORK/rounds.tsv" "$CLK_TCK" "$1" "$2" "$3" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
title, row, goal = sys.argv[3:6]
width = len(row) + 1
by = {}
for rnd, target, rps, reqs, errs, ticks in rows:
    by.setdefault(target, {})[rnd] = dict(rps=float(rps), cpu=int(ticks) / hz * 1e6 / max(int(reqs), 1), errs=int(errs))
ngx = by["nginx"]
print("%-*s %-8s %10s %9s %10s %9s %6s  %s" % (width, title, "target", "req/s", "rps/ngx", "cpu_us/r", "cpu/ngx", "errs", "per round rps/ngx"))
for target in ("nginx", "gateway"):
    rounds = by[target]
    keys = sorted(rounds, key=int)
    ratios = [rounds[k]["rps"] / ngx[k]["rps"] for k in keys]
    cpu = st.median(v["cpu"] for v in rounds.values())
    print("%-*s %-8s %10.0f %9.2f %10.1f %9.2f %6d  %s" % (
        width, row, target, st.median(v["rps"] for v in rounds.values()), st.median(ratios), cpu,
        cpu / st.median(v["cpu"] for v in ngx.values()), sum(v["errs"] for v in rounds.values()),
        " ".join("%.2f" % x for x in ratios)))
print(goal)
PY
}

# bench_certificate DIR: a throwaway CA (DIR/ca.pem) and an ECDSA P-256 leaf for localhost /
# 127.0.0.1 signed by it (DIR/cert.pem, DIR/key.pem), as the TLS rows use.
bench_certificate() {
    local d="$1"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -subj "/CN=attest-gateway bench CA" -days 2 \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign -out "$d/ca.pem" 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/key.pem" 2>/dev/null
    openssl req -new -key "$d/key.pem" -subj "/CN=localhost" -out "$d/leaf.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$d/leaf.ext"
    openssl x509 -req -in "$d/leaf.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
        -sha256 -extfile "$d/leaf.ext" -out "$d/cert.pem" 2>/dev/null
}

# callgrind_difference PID SHORT LONG HEADER LOAD...: PID runs under callgrind (dumps in $WORK).
# For ARG = SHORT, then LONG: counters zeroed, `LOAD... ARG` (a load of ARG seconds or requests,
# as LOAD takes it; it prints the requests it completed and nothing else), a dump. Prints HEADER
# (a printf format given the two counts), then the instructions per request of the difference
# of the two totals over the difference of the two counts (what setting the load's connections
# up costs each run drops out) and of the longer run alone. Leaves the longer run's dump in
# CALLGRIND_DUMP and its count in CALLGRIND_COUNT; returns 1 if LOAD fails.
callgrind_total() { # dump -> total Ir
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}
callgrind_difference() {
    local pid="$1" short="$2" long="$3" header="$4" arg count totals=() counts=()
    shift 4
    for arg in "$short" "$long"; do
        callgrind_control -z "$pid" > /dev/null 2>&1
        count="$("$@" "$arg")" || return 1
        counts+=("$count")
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 0.5
        CALLGRIND_DUMP="$(ls -t "$WORK"/callgrind.out."$pid".* | head -n1)"
        totals+=("$(callgrind_total "$CALLGRIND_DUMP")")
    done
    CALLGRIND_COUNT="${counts[1]}"
    # shellcheck disable=SC2059
    printf "$header\n" "${counts[0]}" "${counts[1]}"
    awk -v a="${totals[0]}" -v b="${totals[1]}" -v n="${counts[0]}" -v m="${counts[1]}" 'BEGIN {
        printf "  %10.0f instructions per request, setup excluded ((%.0f - %.0f) / (%d - %d))\n", (b - a) / (m - n), b, a, m, n
        printf "  %10.0f per request of the longer run, its setup included\n", b / m }'
}

# h2load_requests URL [h2load arguments...] N: `h2load -t1 -cCONNS -mSTREAMS ... -n N URL` (over TLS:
# ALPN h2 checked); prints the requests that succeeded, fails on any failed or non-2xx one.
h2load_requests() {
    local url="$1" n="${@: -1}" out errs
    set -- "${@:2:$#-2}"
    out=$(h2load -t1 -c"$CONNS" -m"${STREAMS:-10}" "$@" -n "$n" "$url")
    case "$url" in
        https:*) grep -q '^Application protocol: h2' <<< "$out" || { echo "h2load_requests: $url did not speak h2" >&2; return 1; } ;;
    esac
    errs=$(awk '/^requests:/{e += $10 + $12 + $14} /^status codes:/{e += $5 + $7 + $9} END{print e + 0}' <<< "$out")
    [ "$errs" = 0 ] || { echo "h2load_requests: $url: $errs failed or non-2xx requests" >&2; return 1; }
    awk '/^requests:/{print $8}' <<< "$out"
}

# The TLS rows (bench-tls.sh, bench-h2.sh): nginx terminating TLS in front of the upstream on
# UP_PORT with the gateway's TLS settings (Sources/GatewayIO/Transport/TLS/TLSCipherPolicy.swift),
# 1 worker, a keep-alive pool of 64 (as nginx-proxy.conf), logging each request as the gateway
# does (nginx_access_log), the certificate of bench_certificate; and the gateway's policy: a TLS
# listener (ALPN h2 on by default: tls.http2) and a passthrough route to the same upstream.
# nginx_tls_front_conf NAME UP_PORT PORT LISTEN_FLAGS [HTTP_LINE]: $WORK/nginx.conf, pid and
# error log run/NAME.*, `listen 127.0.0.1:PORT LISTEN_FLAGS` (e.g. "ssl" or "ssl http2").
TLS12_CIPHERS="ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
TLS13_SUITES="TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
nginx_tls_front_conf() {
    cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1;
worker_rlimit_nofile $(ulimit -n);
pid run/$1.pid;
error_log run/$1.error.log warn;
events { worker_connections 16384; }
http {
    $(nginx_access_log)
    keepalive_requests 1000000;
    keepalive_timeout 600s;
${5:-}
$(nginx_temp_paths "${1#nginx-}")
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers $TLS12_CIPHERS;
    ssl_conf_command Ciphersuites $TLS13_SUITES;
    ssl_ecdh_curve X25519:prime256v1:secp384r1;
    # The gateway's order: the server's, ChaCha20 first only for clients that list it first.
    ssl_prefer_server_ciphers on;
    ssl_conf_command Options PrioritizeChaCha;
    ssl_session_tickets on;
    ssl_session_cache builtin:20480;
    ssl_session_timeout 12h;
    upstream up {
        server 127.0.0.1:$2;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$3 $4 reuseport backlog=4096;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
NGINX
}
# gateway_tls_passthrough_policy PORT UP_PORT: $WORK/policy.yaml.
gateway_tls_passthrough_policy() {
    cat > "$WORK/policy.yaml" <<POLICY
listen:
  - address: 127.0.0.1:$1
    tls: { certificate: cert.pem, private_key: key.pem, handshake_timeout: 10s }
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
  keep_alive_idle_timeout: 600s
upstreams:
  bench: { url: "http://127.0.0.1:$2", max_connections: 64 }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
POLICY
}

# enforced_route_yaml NAME PATH [KEY...]: route NAME of the enforced rows' policies (GET PATH to
# upstream `bench`, mode enforce, binding request, no challenge, deny on a store error), each
# non-empty KEY (e.g. "counter_window: 64") one more key of it; indented for a `routes:` list.
enforced_route_yaml() {
    local name="$1" path="$2" key
    shift 2
    printf '  - name: %s\n    match: { path: %s, methods: [GET] }\n    upstream: bench\n    mode: enforce\n' "$name" "$path"
    printf '    challenge: none\n    binding: request\n    on_store_error: deny\n'
    for key in "$@"; do [ -z "$key" ] || printf '    %s\n' "$key"; done
}

# idle_rss_summary TITLE GATEWAY_ROW NGINX_ROW: the idle-connections table of the TLS and HTTP/2
# rows; a row is "label rss_kb_before rss_kb_after connections [rss_kb_after_malloc_trim]".
idle_rss_summary() {
    python3 - "$@" <<'PY'
import sys
title = sys.argv[1]
rows = [a.split() for a in sys.argv[2:]]
grow = {r[0]: (int(r[2]) - int(r[1])) for r in rows}
after = {r[0]: int(r[2]) for r in rows}
print("%-30s %10s %10s %10s" % (title, "RSS before", "RSS after", "per conn"))
for label, before, after_kb, n, *trimmed in rows:
    print("%-30s %7.1f MB %7.1f MB %7.1f KB" % (
        "%s (%s conns)" % (label, n), int(before) / 1024, int(after_kb) / 1024, grow[label] * 1.024 / int(n)))
    if trimmed:  # bench-h2.sh IDLE_TRIM=1
        print("%-30s %10s %7.1f MB %7.1f KB" % (
            "  after malloc_trim(0)", "", int(trimmed[0]) / 1024, (int(trimmed[0]) - int(before)) * 1.024 / int(n)))
print("RSS with the connections open, gateway / nginx worker: %.2fx (goal <= 1.5x); growth only: %.2fx" % (
    after["gateway"] / max(after["nginx"], 1), grow["gateway"] / max(grow["nginx"], 1)))
PY
}
