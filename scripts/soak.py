#!/usr/bin/env python3
"""Soak: the built gateway under steady mixed traffic, watched for leaks (RELIABILITY.md).

Starts redis-server, scripts/upstream.py and `attest-gateway serve` on free loopback ports,
then for --seconds runs, at a steady pace, the traffic of many apps at once:

  app workers     attest a key (challenge, `sim attest`, POST /app-attest/attest -> 201), then loop:
                  an asserted POST /v1/orders (200, upstream sees X-App-Attest-Status: verified),
                  its replay (401 counter_replay), a tampered body (401 invalid_signature), no
                  assertion (401 assertion_missing), a challenge-bound GET /v1/premium (200), the
                  same challenge again (401 challenge_invalid), no challenge (428 challenge_missing);
                  every 25th round a new key is attested. Assertions are minted by `sim assert`.
                  Half the workers keep one keep-alive connection, half open one per request.
  public workers  GET /public/... (200, X-App-Attest-Status: skipped), keep-alive and new connections.
  slow clients    a head dribbled over ~1 s (200), and a head that stops halfway (408 request_timeout
                  after limits.header_read_timeout, then the gateway closes).
  operations      SIGHUP with an edited policy every --reload-every seconds (the reload must count
                  as ok); Redis shut down and restarted at half time (store routes may answer
                  503 store_error only while it is down and until the gateway's store is ready again).

Every --sample seconds it records the gateway's RSS and open fds (/proc/PID), its open client
connections (attest_gateway_active_connections), Redis used memory and key count, request
latency percentiles and counts. It fails (exit 1) on:
  - any status (or error code) other than the one its request must get;
  - the gateway exiting before the end, or not exiting 0 on SIGTERM;
  - growth: RSS or fds, median of the last tenth of the run above 110% of the median of the
    tenth right after warm-up (+ 4 fds of slack: a few keep-alive sockets in flight);
  - leaked connections: once the load stops, open client connections not back to 0 within 5 s,
    or the upstream pool above its max_connections;
  - Redis keys: permanent ones beyond the attested keys + 8, or expiring ones (used-challenge
    marks) beyond the challenges issued in the last challenge lifetime (20 s here) + 16.
Writes DIR/samples.jsonl, DIR/summary.json (with the verdict) and, with --plot, a PNG.

Usage: soak.py --seconds N [--bin PATH] [--dir DIR] [--plot FILE] [--sample S] [--reload-every S]
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

APP_ID = "ABCDE12345.com.example.app"
HOST = "127.0.0.1"
HEADER_READ_TIMEOUT = 2.0  # the policy's limits.header_read_timeout (slow clients get 408 after it)
UPSTREAM_POOL = 32
# Short, so that the used-challenge marks Redis keeps (they expire with the challenge) level off
# within the 60-second run: a leak of expiring keys shows as much as one of permanent keys.
CHALLENGE_TTL = 20


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def client_data(method, target, body, challenge):
    """base64 of the bytes an assertion signs (docs/protocol.md, binding: request)."""
    text = "appattest-v1\n%s\n%s\n%s\n%s" % (method, target, hashlib.sha256(body).hexdigest(), challenge)
    return base64.b64encode(text.encode()).decode()


class Stack:
    """redis-server, the echo upstream and the gateway, each started and stopped by us."""

    def __init__(self, root, binary, run_dir):
        self.root, self.bin, self.dir = root, binary, run_dir
        self.proxy, self.admin, self.redis, self.upstream = (free_port() for _ in range(4))
        self.sim = os.path.join(run_dir, "sim")
        self.policy = os.path.join(run_dir, "policies.yaml")
        self.redis_proc = self.upstream_proc = self.gateway = None
        self.generation = 0

    def policy_text(self):
        # Each reload writes another challenge lifetime: a real change the gateway must take.
        ttl = CHALLENGE_TTL + self.generation % 2
        return f"""listen: {HOST}:{self.proxy}
admin_listen: {HOST}:{self.admin}
redis: redis://{HOST}:{self.redis}/0
app_ids: ["{APP_ID}"]
environment: development
challenge_ttl_seconds: {ttl}
trust_roots: [{self.sim}/root_ca.pem]
limits:
  header_read_timeout: {int(HEADER_READ_TIMEOUT)}s
  keep_alive_idle_timeout: 30s
  challenge_rate_per_second: 10000
  challenge_burst: 10000
upstreams:
  demo:
    url: http://{HOST}:{self.upstream}
    max_connections: {UPSTREAM_POOL}
endpoints:
  challenge: /app-attest/challenge
  attest: /app-attest/attest
routes:
  - name: premium
    match: {{ path_prefix: /v1/premium }}
    upstream: demo
    mode: enforce
    challenge: required
    binding: request
  - name: api
    match: {{ path_prefix: /v1/ }}
    upstream: demo
    mode: enforce
    binding: request
  - name: public
    match: {{ path_prefix: /public }}
    upstream: demo
    mode: "off"
"""

    def write_policy(self):
        tmp = self.policy + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.policy_text())
        os.replace(tmp, self.policy)

    def start_redis(self):
        os.makedirs(os.path.join(self.dir, "redis"), exist_ok=True)
        self.redis_proc = subprocess.Popen(
            ["redis-server", "--bind", HOST, "--port", str(self.redis), "--dir", os.path.join(self.dir, "redis"),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
             "--logfile", os.path.join(self.dir, "redis.log")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.redis_cli("ping") == "PONG", 10, "redis-server")

    def stop_redis(self):
        # SHUTDOWN flushes the append-only file: attested keys survive the restart.
        self.redis_cli("shutdown")
        self.redis_proc.wait(timeout=10)

    def redis_cli(self, *words):
        try:
            out = subprocess.run(["redis-cli", "-h", HOST, "-p", str(self.redis), *words],
                                 capture_output=True, text=True, timeout=5)
            return out.stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def start(self):
        self.start_redis()
        self.upstream_proc = subprocess.Popen(
            [sys.executable, os.path.join(self.root, "scripts/upstream.py"), "--port", str(self.upstream)],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "upstream.log"), "w"))
        wait_until(lambda: http_status(HOST, self.upstream, "/_stats") == 200, 15, "upstream")
        subprocess.run([self.bin, "sim", "init", "--dir", self.sim], check=True, capture_output=True)
        self.write_policy()
        self.gateway = subprocess.Popen(
            [self.bin, "serve", "--config", self.policy],
            stdout=open(os.path.join(self.dir, "access.log"), "w"),
            stderr=open(os.path.join(self.dir, "gateway.log"), "w"))
        wait_until(lambda: http_status(HOST, self.admin, "/readyz") == 200, 60, "gateway /readyz")

    def reload(self):
        self.generation += 1
        self.write_policy()
        self.gateway.send_signal(signal.SIGHUP)

    def stop(self):
        code = None
        if self.gateway and self.gateway.poll() is None:
            self.gateway.send_signal(signal.SIGTERM)
            try:
                code = self.gateway.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.gateway.kill()
                code = "killed after 30 s"
        elif self.gateway:
            code = self.gateway.returncode
        for proc in (self.upstream_proc,):
            if proc and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        if self.redis_proc and self.redis_proc.poll() is None:
            self.redis_proc.terminate()
            self.redis_proc.wait(timeout=10)
        return code


def wait_until(check, seconds, label):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit("soak: %s did not come up within %d s" % (label, seconds))


def http_status(host, port, path):
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def metrics(port):
    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                pass
    return values


def metric_sum(values, prefix):
    return sum(v for k, v in values.items() if k == prefix or k.startswith(prefix + "{"))


class Ledger:
    """Counts, latencies per sampling window, and every unexpected answer (kept, with context)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.latencies = []
        self.unexpected = []
        self.total = 0
        self.outage_tolerated = 0
        self.challenges = []  # when each challenge was issued (the bound on expiring Redis keys)

    def record(self, kind, seconds, ok, detail):
        with self.lock:
            self.total += 1
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.latencies.append(seconds)
            if not ok:
                self.unexpected.append({"t": time.time(), "kind": kind, "detail": detail})

    def challenge_issued(self):
        with self.lock:
            self.challenges.append(time.time())

    def challenges_since(self, moment):
        with self.lock:
            self.challenges = [t for t in self.challenges if t >= moment]
            return len(self.challenges)

    def tolerated(self):
        with self.lock:
            self.outage_tolerated += 1

    def take_window(self):
        with self.lock:
            window, self.latencies = self.latencies, []
            return window


class Outage:
    """While Redis is down (and until the gateway's store is ready again), store-backed answers
    may be 503 store_error; nothing else is tolerated at any time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active = False

    def set(self, value):
        with self.lock:
            self.active = value

    def __bool__(self):
        with self.lock:
            return self.active


class Client:
    """One app's HTTP connection: kept alive, or a new one per request."""

    def __init__(self, port, keep_alive):
        self.port, self.keep_alive, self.conn = port, keep_alive, None

    def send(self, method, target, body=b"", headers=None):
        headers = dict(headers or {})
        if not self.keep_alive:
            headers["Connection"] = "close"
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(HOST, self.port, timeout=15)
            try:
                self.conn.request(method, target, body=body or None, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                if not self.keep_alive or response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the gateway closed while idle: retry once on a new one.
                self.close()
                if attempt == 1 or not self.keep_alive:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def error_code(data):
    try:
        return json.loads(data).get("error")
    except Exception:
        return None


def echoed(data, name):
    try:
        for key, value in json.loads(data).get("headers", []):
            if key.lower() == name.lower():
                return value
    except Exception:
        pass
    return None


class Load:
    def __init__(self, stack, ledger, outage, stop):
        self.stack, self.ledger, self.outage, self.stop = stack, ledger, outage, stop
        self.attested = 0
        self.attested_lock = threading.Lock()

    def timed(self, kind, client, method, target, body, headers, expect_status, expect_code=None, check=None,
              store_backed=True):
        start = time.perf_counter()
        try:
            status, data = client.send(method, target, body, headers)
        except Exception as error:
            status, data = 0, repr(error).encode()
        elapsed = time.perf_counter() - start
        ok = status == expect_status and (expect_code is None or error_code(data) == expect_code)
        if ok and check is not None:
            ok = check(data)
        if not ok and store_backed and self.outage and status == 503 and error_code(data) == "store_error":
            self.ledger.tolerated()
            ok = True
        self.ledger.record(kind, elapsed, ok, {"status": status, "want": expect_status, "code": error_code(data),
                                               "want_code": expect_code, "body": data[:200].decode("latin-1")})
        return status, data

    def sim(self, *words):
        out = subprocess.run([self.stack.bin, "sim", *words, "--dir", self.stack.sim, "--app-id", APP_ID],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError("sim %s: %s" % (words[0], out.stderr.strip()))
        return json.loads(out.stdout)

    def assertion(self, key_id, method, target, body, challenge=""):
        return self.sim("assert", "--key-id", key_id, "--client-data",
                        client_data(method, target, body, challenge))["assertion"]

    def challenge(self, client):
        self.ledger.challenge_issued()
        status, data = self.timed("challenge", client, "POST", "/app-attest/challenge", b"", {}, 200)
        return json.loads(data)["challenge"] if status == 200 else None

    def attest(self, client):
        challenge = self.challenge(client)
        if challenge is None:
            return None
        minted = self.sim("attest", "--challenge", challenge, "--environment", "development")
        body = json.dumps({"key_id": minted["key_id"], "attestation": minted["attestation"],
                           "challenge": challenge}).encode()
        status, _ = self.timed("attest", client, "POST", "/app-attest/attest", body,
                               {"Content-Type": "application/json"}, 201)
        if status != 201:
            return None
        with self.attested_lock:
            self.attested += 1
        return minted["key_id"]

    def app(self, worker, pace):
        client = Client(self.stack.proxy, keep_alive=worker % 2 == 0)
        key_id, rounds = None, 0
        verified = lambda data: echoed(data, "X-App-Attest-Status") == "verified"
        while not self.stop.is_set():
            began = time.time()
            if key_id is None or rounds % 25 == 24:
                key_id = self.attest(client) or key_id
            rounds += 1
            if key_id is None:
                self.stop.wait(1)
                continue
            target = "/v1/orders?worker=%d&round=%d" % (worker, rounds)
            body = json.dumps({"item": "sku-%d" % rounds, "quantity": 1}).encode()
            hdrs = {"Content-Type": "application/json", "X-App-Attest-Key-Id": key_id,
                    "X-App-Assertion": self.assertion(key_id, "POST", target, body)}
            status, _ = self.timed("verified", client, "POST", target, body, hdrs, 200, check=verified)
            if status == 200:
                self.timed("replay", client, "POST", target, body, hdrs, 401, "counter_replay")
            tampered = dict(hdrs, **{"X-App-Assertion": self.assertion(key_id, "POST", target, body)})
            self.timed("tampered", client, "POST", target, body.replace(b"1}", b"100}"), tampered, 401,
                       "invalid_signature")
            self.timed("missing", client, "GET", "/v1/orders", b"", {}, 401, "assertion_missing", store_backed=False)
            challenge = self.challenge(client)
            if challenge:
                premium = "/v1/premium/report?round=%d" % rounds
                bound = {"X-App-Attest-Key-Id": key_id, "X-App-Attest-Challenge": challenge,
                         "X-App-Assertion": self.assertion(key_id, "GET", premium, b"", challenge)}
                status, _ = self.timed("premium", client, "GET", premium, b"", bound, 200, check=verified)
                if status == 200:
                    again = dict(bound, **{"X-App-Assertion": self.assertion(key_id, "GET", premium, b"", challenge)})
                    self.timed("challenge_reuse", client, "GET", premium, b"", again, 401, "challenge_invalid")
            unbound = {"X-App-Attest-Key-Id": key_id,
                       "X-App-Assertion": self.assertion(key_id, "GET", "/v1/premium/x", b"")}
            self.timed("challenge_missing", client, "GET", "/v1/premium/x", b"", unbound, 428, "challenge_missing",
                       store_backed=False)
            self.stop.wait(max(0.0, pace - (time.time() - began)))
        client.close()

    def public(self, worker, pace):
        client = Client(self.stack.proxy, keep_alive=worker % 2 == 0)
        skipped = lambda data: echoed(data, "X-App-Attest-Status") == "skipped"
        n = 0
        while not self.stop.is_set():
            n += 1
            self.timed("public", client, "GET", "/public/hello?n=%d" % n, b"", {}, 200, check=skipped,
                       store_backed=False)
            self.stop.wait(pace)
        client.close()

    def slow(self, pace):
        n = 0
        while not self.stop.is_set():
            n += 1
            head = b"GET /public/slow?n=%d HTTP/1.1\r\nHost: soak\r\nUser-Agent: slow-client\r\nConnection: close\r\n\r\n" % n
            if n % 3 == 0:
                self.raw("stalled", head[: len(head) // 2], 0.0, 408, HEADER_READ_TIMEOUT + 5)
            else:
                self.raw("dribbled", head, 1.0, 200, 15)
            self.stop.wait(pace)

    def raw(self, kind, head, over, expect_status, timeout):
        """Sends `head` in 8 pieces spread over `over` seconds and reads the answer to the close."""
        start = time.perf_counter()
        status, reply = 0, b""
        try:
            with socket.create_connection((HOST, self.stack.proxy), timeout=timeout) as sock:
                step = max(1, len(head) // 8)
                for i in range(0, len(head), step):
                    sock.sendall(head[i:i + step])
                    time.sleep(over / 8)
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
            line = reply.split(b"\r\n", 1)[0].split(b" ")
            status = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
        except Exception as error:
            reply = repr(error).encode()
        body = reply.split(b"\r\n\r\n", 1)[-1]
        ok = status == expect_status and (expect_status != 408 or error_code(body) == "request_timeout")
        self.ledger.record(kind, time.perf_counter() - start, ok,
                           {"status": status, "want": expect_status, "body": reply[:200].decode("latin-1")})


def percentile(values, fraction):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def sample(stack, ledger, load, started):
    pid = stack.gateway.pid
    with open("/proc/%d/status" % pid) as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    try:
        m = metrics(stack.admin)
    except Exception:
        m = {}
    # keys=N,expires=M: permanent keys are key records (one per attested key); expiring ones
    # are used-challenge marks, gone with the challenge's lifetime.
    keyspace = stack.redis_cli("info", "keyspace")
    db0 = next((l.split(":", 1)[1] for l in keyspace.splitlines() if l.startswith("db0:")), None)
    fields = dict(kv.split("=") for kv in db0.split(",")) if db0 else {}
    expiring_bound = ledger.challenges_since(time.time() - CHALLENGE_TTL - 2) + 16
    memory = stack.redis_cli("info", "memory")
    used = next((int(l.split(":")[1]) for l in memory.splitlines() if l.startswith("used_memory:")), None)
    window = ledger.take_window()
    with ledger.lock:
        total, unexpected = ledger.total, len(ledger.unexpected)
    with load.attested_lock:
        attested = load.attested
    return {
        "t": round(time.time() - started, 1), "rss_mib": round(rss_kib / 1024, 2), "fds": fds,
        "open_connections": metric_sum(m, "attest_gateway_active_connections") if m else None,
        "store_ready": m.get("attest_gateway_store_ready"),
        "redis_keys": int(fields["keys"]) if "keys" in fields else None,
        "redis_expiring_keys": int(fields["expires"]) if "expires" in fields else None,
        "redis_expiring_bound": expiring_bound, "redis_used_mib":
            round(used / 1048576, 3) if used else None, "attested_keys": attested,
        "requests": total, "window_requests": len(window), "unexpected": unexpected,
        "p50_ms": ms(percentile(window, 0.5)), "p90_ms": ms(percentile(window, 0.9)),
        "p99_ms": ms(percentile(window, 0.99)),
        "reloads_ok": metric_sum(m, 'attest_gateway_config_reloads_total{result="ok"}') if m else None,
        "reloads_failed": metric_sum(m, 'attest_gateway_config_reloads_total{result="failed"}') if m else None,
    }


def ms(seconds):
    return None if seconds is None else round(seconds * 1000, 2)


def growth_check(samples, name, warm_until, seconds, slack):
    window = max(seconds * 0.1, 6)
    early = [s[name] for s in samples if warm_until <= s["t"] < warm_until + window]
    late = [s[name] for s in samples if s["t"] >= seconds - window]
    if not early or not late:
        return {"name": name, "ok": False, "why": "too few samples"}
    base, end = statistics.median(early), statistics.median(late)
    bound = base * 1.10 + slack
    return {"name": name, "ok": end <= bound, "after_warm_up": base, "end": end, "bound": round(bound, 2),
            "max": max(s[name] for s in samples if s["t"] >= warm_until)}


def plot(samples, events, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = [s["t"] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    series = [("rss_mib", "gateway RSS (MiB)"), ("fds", "gateway open fds"),
              ("open_connections", "open client connections")]
    for axis, (key, label) in zip(axes, series):
        axis.plot(t, [s[key] if s[key] is not None else float("nan") for s in samples])
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
    for key in ("p50_ms", "p90_ms", "p99_ms"):
        axes[3].plot(t, [s[key] if s[key] is not None else float("nan") for s in samples], label=key[:-3])
    axes[3].set_ylabel("latency (ms)")
    axes[3].set_yscale("log")
    axes[3].legend()
    axes[3].set_xlabel("minutes")
    for axis in axes:
        for when, label in events:
            axis.axvline(when / 60, color="grey", linestyle=":", linewidth=0.8)
    axes[0].set_title("attest-gateway soak: %d s, dotted lines: Redis restart" % samples[-1]["t"])
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS", "1800")))
    parser.add_argument("--bin", default=os.environ.get("GATEWAY_BIN", ".build/debug/attest-gateway"))
    parser.add_argument("--dir", default=os.environ.get("SOAK_DIR", ".soak"))
    parser.add_argument("--plot")
    parser.add_argument("--sample", type=float)
    parser.add_argument("--reload-every", type=float, default=60)
    parser.add_argument("--apps", type=int, default=4)
    parser.add_argument("--public", type=int, default=2)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run_dir = os.path.abspath(args.dir)
    os.makedirs(run_dir, exist_ok=True)
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        raise SystemExit("soak: %s is not built (swift build)" % binary)
    seconds = args.seconds
    sample_every = args.sample or (2.0 if seconds <= 120 else 10.0)
    warm_up = min(max(15.0, seconds * 0.1), 180.0)
    reload_every = min(args.reload_every, max(10.0, seconds / 4))

    stack = Stack(root, binary, run_dir)
    ledger, outage, stop = Ledger(), Outage(), threading.Event()
    load = Load(stack, ledger, outage, stop)
    samples, events, failures = [], [], []
    code = None
    try:
        stack.start()
        started = time.time()
        idle_fds = len(os.listdir("/proc/%d/fd" % stack.gateway.pid))
        threads = [threading.Thread(target=load.app, args=(i, 0.5), daemon=True) for i in range(args.apps)]
        threads += [threading.Thread(target=load.public, args=(i, 0.05), daemon=True) for i in range(args.public)]
        threads.append(threading.Thread(target=load.slow, args=(2.0,), daemon=True))
        for thread in threads:
            thread.start()
        next_sample, next_reload, restarted, reloads = started + sample_every, started + reload_every, False, 0
        out = open(os.path.join(run_dir, "samples.jsonl"), "w")
        while time.time() < started + seconds:
            now = time.time()
            if stack.gateway.poll() is not None:
                failures.append("the gateway exited (status %s) at %.0f s" % (stack.gateway.returncode, now - started))
                break
            if now >= next_reload:
                stack.reload()
                reloads += 1
                next_reload += reload_every
            if not restarted and now >= started + seconds / 2:
                restarted = True
                events.append((now - started, "redis stop"))
                outage.set(True)
                stack.stop_redis()
                time.sleep(3)
                stack.start_redis()
                events.append((time.time() - started, "redis start"))
                wait_until(lambda: metrics(stack.admin).get("attest_gateway_store_ready") == 1, 30, "store ready")
                time.sleep(1)  # answers in flight when the store came back
                outage.set(False)
            if now >= next_sample:
                s = sample(stack, ledger, load, started)
                samples.append(s)
                out.write(json.dumps(s) + "\n")
                out.flush()
                print("soak %5.0fs rss %6.1f MiB fds %3d conns %s redis keys %s p99 %s ms requests %d unexpected %d"
                      % (s["t"], s["rss_mib"], s["fds"], s["open_connections"], s["redis_keys"], s["p99_ms"],
                         s["requests"], s["unexpected"]), flush=True)
                next_sample += sample_every
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        # No connection leaks: with every client gone, the gateway holds no client connection.
        drained = None
        for _ in range(50):
            m = metrics(stack.admin)
            # The scrape's own admin connection is the one allowed.
            if metric_sum(m, "attest_gateway_active_connections") <= 1:
                drained = m
                break
            time.sleep(0.1)
        if drained is None:
            failures.append("client connections still open 5 s after the load stopped: %s"
                            % metric_sum(metrics(stack.admin), "attest_gateway_active_connections"))
        quiet_fds = len(os.listdir("/proc/%d/fd" % stack.gateway.pid))
        if quiet_fds > idle_fds + UPSTREAM_POOL * 2 + 8:
            failures.append("%d fds open after the load (%d before it; the upstream pools hold at most %d)"
                            % (quiet_fds, idle_fds, UPSTREAM_POOL * 2))
        final = metrics(stack.admin)
        if metric_sum(final, 'attest_gateway_config_reloads_total{result="ok"}') < reloads:
            failures.append("reloads: %d sent, %s counted ok" % (
                reloads, metric_sum(final, 'attest_gateway_config_reloads_total{result="ok"}')))
        if metric_sum(final, 'attest_gateway_config_reloads_total{result="failed"}') > 0:
            failures.append("a reload failed")
    finally:
        stop.set()
        code = stack.stop()
    if code != 0:
        failures.append("the gateway's exit status on SIGTERM was %s, not 0" % code)
    checks = []
    if samples:
        checks = [growth_check(samples, "rss_mib", warm_up, seconds, 0),
                  growth_check(samples, "fds", warm_up, seconds, 4)]
        for check in checks:
            if not check["ok"]:
                failures.append("growth of %s: %s" % (check["name"], check))
        for s in samples:
            if s["redis_keys"] is None:
                continue  # Redis was down for this sample
            permanent = s["redis_keys"] - s["redis_expiring_keys"]
            if permanent > s["attested_keys"] + 8:
                failures.append("at %.0f s Redis holds %d keys without a lifetime for %d attested keys (bound +8)"
                                % (s["t"], permanent, s["attested_keys"]))
                break
            if s["redis_expiring_keys"] > s["redis_expiring_bound"]:
                failures.append("at %.0f s Redis holds %d expiring keys; the challenges of the last %d s bound them "
                                "to %d" % (s["t"], s["redis_expiring_keys"], CHALLENGE_TTL + 2,
                                           s["redis_expiring_bound"]))
                break
    if ledger.unexpected:
        failures.append("%d unexpected answers, first: %s" % (len(ledger.unexpected), ledger.unexpected[:3]))
    latencies = [s["p99_ms"] for s in samples if s["p99_ms"] is not None]
    summary = {"seconds": seconds, "warm_up_seconds": warm_up, "requests": ledger.total, "by_kind": ledger.counts,
               "unexpected": len(ledger.unexpected), "tolerated_store_errors_during_redis_restart":
               ledger.outage_tolerated, "events": events, "checks": checks,
               "worst_p99_ms": max(latencies) if latencies else None,
               "median_p99_ms": statistics.median(latencies) if latencies else None,
               "failures": failures, "passed": not failures}
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if args.plot and samples:
        plot(samples, events, args.plot)
    print(json.dumps(summary, indent=2))
    print("soak: %s" % ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
