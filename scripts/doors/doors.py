#!/usr/bin/python3
"""Every door judges alike (issue 29): one suite of hostile requests through every door.

    /usr/bin/python3 scripts/doors/doors.py --gateway-bin BIN --work DIR [--suite FILE] [--only REGEX]

Started here (free loopback ports, each picked with a socket bound to port 0; all stopped at exit,
their pids also listed in WORK/pids for the calling script's trap):
  redis-server, the simulator's CA (`attest-gateway sim init`) and Android test root (`sim
  android-enroll`; one App Attest key and one Android key are enrolled through the attest endpoint
  once the gateways run, for @assert and @android), two gateways sharing that Redis
  and a challenge key (one per upstream: `listen`, `authz_listen`, `admin_listen`), the upstreams
  express-upstream.js (Debian's Express 4) and flask-upstream.py (Debian's Flask), both with
  method-override middleware on, one real nginx with the `tested-config: nginx` server block of
  docs/integrations.md twice (one per upstream), and two real Caddy processes with the
  `tested-config: caddy` Caddyfile (one per upstream). The configurations are read out of the
  document at run time and only their ports are replaced, so a doc edit is what gets tested.

The doors (each request of scripts/doors/suite.txt goes through all fourteen):
  inline/express, inline/flask   the gateway's `listen` in front of the upstream
  nginx/express, nginx/flask     real nginx `auth_request` -> the gateway's `authz_listen`
  caddy/express, caddy/flask     real Caddy `forward_auth` -> the gateway's `authz_listen`
  envoy                          by transcript: the check Envoy's documented `ext_authz` filter
                                 (docs/integrations.md's Envoy block) would send for the request:
                                 the original method, `path_prefix` + the original target, Host,
                                 the headers its `allowed_headers` patterns pass (lower-cased, as
                                 Envoy's codec has them, repeats kept), x-forwarded-for with the
                                 client's address appended (an edge Envoy), a generated
                                 x-request-id, x-envoy-expected-rq-timeout-ms and, because of
                                 `with_request_body`, the body and x-envoy-auth-partial-body: false;
                                 the block's headers_with_underscores_action applied first (a name
                                 with `_` dropped from check and upstream, or the request refused
                                 by the front)
  traefik                        by transcript: Traefik's `forwardAuth` (the doc's Traefik block,
                                 trustForwardHeader false): GET to the address's path, every client
                                 header but hop-by-hop ones, Host and Content-Length (names in Go's
                                 canonical form, grouped and sorted as Go writes them), and
                                 X-Forwarded-Method/-Uri/-Host/-Proto/-For set from the request
  h2/express, h2/flask           the same `listen` (it has `h2c: true`) spoken to in HTTP/2 with
                                 prior knowledge by Python `h2` (Debian python3-h2), one fresh
                                 connection and one stream per request: METHOD as `:method`, TARGET
                                 as `:path`, `:scheme http`, `:authority` the Host the line would
                                 have sent (or its @authority), a line's Host as a `host` field,
                                 the other fields exactly as written (h2's outbound validation and
                                 normalisation off: an upper-case name goes out upper-case and tests
                                 the gateway's refusal), the harness's own fields in lower case, no
                                 Connection: close, @body as DATA with content-length unless the line
                                 sets one. A line whose meaning is HTTP/1.1 framing (CR or LF in a
                                 field, whitespace or controls in METHOD or TARGET, or `@not-h2
                                 REASON`) is not sent: `N/A` with the reason, neither passed nor
                                 failed. Transfer-Encoding lines are sent: that field is the h2->h1
                                 downgrade smuggling vector, which the gateway must refuse.
  h2lc/express, h2lc/flask       as h2, names lower-cased (what a conforming HTTP/2 client sends):
                                 the upper-case lines reach the gateway's rules over HTTP/2 too; a
                                 line without an upper-case name is N/A here (h2 sent it already)
  h2tls/express, h2tls/flask     as h2, over TLS: the gateway's second `listen` (a `tls:` listener
                                 with a self-signed P-256 certificate for 127.0.0.1 that the script
                                 makes with openssl), Python ssl with ALPN `h2` (the door fails to
                                 start a stream unless the gateway picks h2), the certificate
                                 verified, `:scheme https`
  Whether Envoy or Traefik would accept the client's request at all is not modelled: the gateway
  is always asked. Their answer's allow (Envoy: 200; Traefik: 2xx) or deny is their verdict. For
  an allowed answer the headers the upstream would then receive are computed from the doc's
  `allowed_upstream_headers` + `x-envoy-auth-headers-to-remove` (Envoy) or `authResponseHeaders`
  (Traefik), and the leak rule below applies to them.

What each door's verdict is:
  - inline: `allowed` when the gateway forwarded (the upstream recorded the request, or the answer
    is not a gateway refusal: gateway refusals are JSON with an "error" field), else `refused`
    with the JSON body's `error` code.
  - h2: as inline (the upstream recorded the request, or the answer is not a gateway refusal);
    a RST_STREAM or GOAWAY before any upstream record is `refused` with its error code
    (`RST_STREAM PROTOCOL_ERROR`), which is not compared with inline's code.
  - nginx / caddy: the gateway's decision on the check (its attest_gateway_authz_decisions_total
    counters before and after the request). When the gateway was not asked at all, the front
    proxy refused the request itself (nginx answers 400 to a lower-case method before any check):
    that is recorded as `refused-by-front`, counts as a refusal, and is not compared (verdicts are
    compared only where the gateway was asked). The refusal code is what the door shows the
    client: the JSON body's `error` (Caddy passes ours; the nginx block rebuilds it from
    X-App-Attest-Error for 401 and 403) or the X-App-Attest-Error header. nginx turns every other
    check status into its own 500 page: no code then, only the verdict is compared.

What fails a (request, door) pair:
  1. a protected handler of an upstream (POST /buy, DELETE and PUT /item, GET /v1/..., GET
     /v1/admin/..., GET /cs/...) ran with X-App-Attest-Status other than exactly `verified`
     (absent, `skipped`, `debug`, two values...), or ran `verified` for a request that carried no
     valid assertion (a spoofed status got through); `token` passes only for a line that sends
     a valid attestation token (@token: an accept_token route admitted it). A line marked `@unless-warned REGEX` is
     excused when one of check-config's warnings about the policy matches REGEX (a policy mistake
     the gateway cannot see at run time, such as a case_sensitive route in front of a
     case-insensitive router, is fixed by check-config saying so);
  2. a header the client sent in the gateway's namespace (X-App-Attest-*, X-App-Assertion) or a
     trust header other proxies set (X-Real-IP, X-Forwarded-Client-Cert, X-SSL-Client-*,
     X-Client-Cert, Client-Cert, Client-Cert-Chain) reached the upstream with the client's value
     (the key ID the gateway itself sets after a valid @assert excepted); `_` in a sent name
     counts as `-` (x_app_attest_status is HTTP_X_APP_ATTEST_STATUS, so X-App-Attest-Status, to
     a CGI/WSGI upstream such as Flask);
  3. the verdict differs from inline's (real doors: the same upstream's inline door; inline/flask
     and the transcripts: inline/express): allowed vs refused, and both codes where both are
     known. Two equivalences: a door that sends no body (nginx, Caddy, Traefik) may refuse with
     `authz_body_required` where inline refuses with another code (docs/integrations.md, "What
     can be checked without the body"); a check door may refuse with `underscore_gateway_header`
     where inline allowed, or refused with another code, a line that sends a name with `_`
     (inline drops such a field; a check cannot drop one from what its front forwards,
     docs/integrations.md "Header names with `_`"); a check door may refuse a request for one of
     the gateway's endpoints (`/app-attest/...`, `/.well-known/...`) with `authz_endpoint`
     (nginx: without a code) whatever inline answered, since the endpoints are served on
     `listen` and never checked; a check door may refuse with `websocket_not_allowed` where
     inline allowed, or refused with another code, a line that sends `Sec-WebSocket-Key` or
     `Upgrade: websocket` (inline serves an upgrade on a route without `websocket: true` as plain
     HTTP with `Upgrade` removed; a check cannot remove the upgrade from what its front forwards,
     and Traefik forwards it: docs/integrations.md "WebSocket upgrades"). A door that the line marks
     `@front-rewrites DOOR REASON` (that proxy replaces what the line tests before the gateway or the upstream sees it) is not
     compared, and `@expect` does not apply to it;
     The h2 doors are compared with the same upstream's inline door by their own rule: allowed
     where inline refuses always fails; refused where inline allows passes only when HTTP/2
     itself makes the request malformed (RFC 9113: an upper-case name, a connection-specific
     field, `te` other than trailers, controls or edge whitespace in a value, userinfo in
     `:authority`, `host` not `:authority`, content-length not the DATA length), printed as
     "stricter" with that reason; both refused with two gateway codes fails unless one of those
     reasons explains the h2 code;
  4. the line's `@expect` is not met (h2 doors: unless not applicable; a check door's
     `websocket_not_allowed` meets `@expect allow` where rule 3 accepts it, for the same reason).

Output: one line per (request, door), a summary of the failing lines, and `N passed, M failed`
counting (request, door) pairs; exit status 1 on any failure or when the harness cannot start.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid

import yaml

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
except ImportError:  # reported by World.start as a setup failure
    h2 = None

APP_ID = "ABCDE12345.com.example.app"
ANDROID_PACKAGE = "com.example.app"  # the package `sim android-enroll` attests by default
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(ROOT, "docs", "integrations.md")

UPSTREAMS = ("express", "flask")
DOORS = [
    ("inline/express", "inline", "express"),
    ("inline/flask", "inline", "flask"),
    ("nginx/express", "nginx", "express"),
    ("nginx/flask", "nginx", "flask"),
    ("caddy/express", "caddy", "express"),
    ("caddy/flask", "caddy", "flask"),
    ("envoy", "envoy", None),
    ("traefik", "traefik", None),
    ("h2/express", "h2", "express"),
    ("h2/flask", "h2", "flask"),
    ("h2lc/express", "h2lc", "express"),
    ("h2lc/flask", "h2lc", "flask"),
    ("h2tls/express", "h2tls", "express"),
    ("h2tls/flask", "h2tls", "flask"),
]
# Doors whose check carries no body: they may refuse with authz_body_required (rule 3).
BODILESS = {"nginx", "caddy", "traefik"}
H2_KINDS = ("h2", "h2lc", "h2tls")
# Doors that ask the check listener. Where a front passes a client's `_` name to the check (Caddy
# and Traefik pass every field), the check refuses an underscore spelling of a gateway or trust
# header (underscore_gateway_header) that inline drops (rule 3).
CHECK_DOORS = {"nginx", "caddy", "envoy", "traefik"}
# The gateway's endpoints (the doors policy keeps the default paths): a check of one is refused
# (404 authz_endpoint: they are served on `listen` only), which nginx's block turns into its 500
# page without the code (rule 3's third equivalence).
ENDPOINT_PREFIXES = (b"/app-attest/", b"/.well-known/")


def websocket_not_allowed(outcome, kind):
    """A check door refused a line that marks a WebSocket upgrade (Sec-WebSocket-Key or
    Upgrade: websocket) with websocket_not_allowed: inline serves such a request as plain HTTP on a
    route without websocket: true, but a check cannot remove the upgrade from what its front
    forwards (Traefik forwards it), so it refuses (rules 3 and 4)."""
    if outcome.verdict != "refused" or kind not in CHECK_DOORS or outcome.code != "websocket_not_allowed":
        return False
    return any(n.lower() == b"sec-websocket-key" or (n.lower() == b"upgrade" and b"websocket" in v.lower())
               for n, v in outcome.sent)
TRUST_HEADERS = {"x-real-ip", "x-forwarded-client-cert", "x-client-cert", "client-cert", "client-cert-chain"}
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "trailers", "transfer-encoding", "upgrade"}


def watched(name):
    lower = name.lower()
    return (lower.startswith("x-app-attest-") or lower == "x-app-assertion" or lower in TRUST_HEADERS
            or lower.startswith("x-ssl-client-"))


# ----------------------------------------------------------------------------------------------
# The suite
# ----------------------------------------------------------------------------------------------

def unescape(text):
    out, i = bytearray(), 0
    raw = text.encode("utf-8")
    while i < len(raw):
        c = raw[i:i + 1]
        if c == b"\\" and i + 1 < len(raw):
            n = raw[i + 1:i + 2]
            if n in (b"r", b"n", b"t", b"\\"):
                out += {b"r": b"\r", b"n": b"\n", b"t": b"\t", b"\\": b"\\"}[n]
                i += 2
                continue
            if n == b"x" and re.fullmatch(rb"[0-9a-fA-F]{2}", raw[i + 2:i + 4]):
                out.append(int(raw[i + 2:i + 4], 16))
                i += 4
                continue
        out += c
        i += 1
    return bytes(out)


class Line(object):
    def __init__(self, number, text):
        self.number, self.text = number, text
        parts = [p.strip() for p in text.split(" | ")]
        request = parts[0].split(" ")
        if len(request) != 2 or not request[0] or not request[1]:
            raise ValueError("line %d: expected METHOD TARGET first, got %r" % (number, parts[0]))
        self.method, self.target = unescape(request[0]), unescape(request[1])
        self.headers, self.body = [], None
        self.assertion = self.challenge = self.debug_token = self.token = self.replay = False
        self.platform, self.binding, self.counter_bytes = "ios", "request", None
        self.signed_body = self.signed_target = None
        self.expect, self.front_rewrites, self.unless_warned = None, {}, None
        self.not_h2, self.authority = None, None
        for part in parts[1:]:
            if part.startswith("@body "):
                self.body = unescape(part[len("@body "):])
            elif part in ("@assert", "@android"):
                if self.assertion:
                    raise ValueError("line %d: one of @assert and @android" % number)
                self.assertion = True
                self.platform = "android" if part == "@android" else "ios"
            elif part == "@replay":
                self.replay = True
            elif part.startswith("@signed-body "):
                self.signed_body = unescape(part[len("@signed-body "):])
            elif part.startswith("@signed-target "):
                self.signed_target = unescape(part[len("@signed-target "):])
            elif part.startswith("@binding "):
                self.binding = part.split(" ", 1)[1].strip()
                if self.binding not in ("request", "head"):
                    raise ValueError("line %d: @binding request or head, not %r" % (number, self.binding))
            elif part.startswith("@counter-bytes "):
                try:
                    self.counter_bytes = bytes.fromhex(part.split(" ", 1)[1].strip())
                except ValueError:
                    raise ValueError("line %d: @counter-bytes takes hex digits" % number)
            elif part == "@challenge":
                self.challenge = True
            elif part == "@debug-token":
                self.debug_token = True
            elif part == "@token":
                self.token = True
            elif part.startswith("@expect "):
                self.expect = part.split(" ", 1)[1].strip()
                if self.expect not in ("allow", "refuse"):
                    raise ValueError("line %d: @expect allow or refuse, not %r" % (number, self.expect))
            elif part.startswith("@unless-warned "):
                self.unless_warned = re.compile(part.split(" ", 1)[1].strip(), re.IGNORECASE)
            elif part.startswith("@front-rewrites "):
                words = part.split(" ", 2)
                if len(words) < 3 or words[1] not in ("nginx", "caddy", "envoy", "traefik"):
                    raise ValueError("line %d: @front-rewrites DOOR REASON" % number)
                self.front_rewrites[words[1]] = words[2]
            elif part.startswith("@not-h2 "):
                self.not_h2 = part.split(" ", 1)[1].strip()
            elif part.startswith("@authority "):
                self.authority = unescape(part[len("@authority "):])
            elif ":" in part and not part.startswith("@"):
                name, value = part.split(":", 1)
                if not name or name != name.strip():
                    raise ValueError("line %d: bad header field %r" % (number, part))
                self.headers.append((unescape(name), unescape(value.lstrip(" "))))
            else:
                raise ValueError("line %d: unknown field %r" % (number, part))
        if self.challenge and not self.assertion:
            raise ValueError("line %d: @challenge needs @assert" % number)
        signing = self.replay or self.binding != "request" or self.signed_body is not None \
            or self.signed_target is not None or self.counter_bytes is not None
        if signing and not self.assertion:
            raise ValueError("line %d: @replay, @binding, @signed-body, @signed-target and @counter-bytes need "
                             "@assert or @android" % number)
        if self.counter_bytes is not None and self.platform != "android":
            raise ValueError("line %d: @counter-bytes is for @android lines" % number)

    def has_header(self, name):
        return any(n.lower() == name.lower().encode() for n, _ in self.headers)


def read_suite(path):
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.rstrip("\n")
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            lines.append(Line(number, text.strip()))
    return lines


# ----------------------------------------------------------------------------------------------
# Processes and ports
# ----------------------------------------------------------------------------------------------

class Processes(object):
    def __init__(self, work):
        self.work, self.children = work, []

    def start(self, label, argv, env=None, cwd=None):
        out = open(os.path.join(self.work, label + ".out"), "wb")
        err = open(os.path.join(self.work, label + ".err"), "wb")
        child = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                 start_new_session=True)
        self.children.append((label, child))
        with open(os.path.join(self.work, "pids"), "a") as pids:
            pids.write("%d\n" % child.pid)
        return child

    def stop(self, child):
        if child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except OSError:
                    pass
                child.wait(timeout=5)

    def stop_all(self):
        for _, child in reversed(self.children):
            self.stop(child)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path, lines=20):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
    except OSError:
        return ""


def connectable(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_until(predicate, child, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if child is not None and child.poll() is not None:
            return False
        if predicate():
            return True
        time.sleep(0.05)
    return False


class SetupError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Raw HTTP/1.1 (odd methods, targets and repeated fields go on the wire as written)
# ----------------------------------------------------------------------------------------------

class Response(object):
    def __init__(self, status=None, headers=(), body=b"", error=None):
        self.status, self.headers, self.body, self.error = status, list(headers), body, error

    def header(self, name):
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None

    def json(self):
        try:
            value = json.loads(self.body.decode("utf-8"))
            return value if isinstance(value, dict) else None
        except ValueError:
            return None


def serialize(method, target, headers, body):
    head = method + b" " + target + b" HTTP/1.1\r\n"
    for name, value in headers:
        head += name + b": " + value + b"\r\n"
    return head + b"\r\n" + (body or b"")


def exchange(port, raw, timeout=10.0):
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as error:
        return Response(error="connect: %s" % error)
    data = b""
    try:
        sock.sendall(raw)
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
            parsed = parse_response(data, complete=False)
            if parsed is not None:
                return parsed
    except OSError as error:
        if not data:
            return Response(error="send: %s" % error)
    finally:
        sock.close()
    parsed = parse_response(data, complete=True)
    return parsed if parsed is not None else Response(error="no response (%d bytes)" % len(data))


def parse_response(data, complete):
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].split(b"\r\n")
    match = re.match(rb"HTTP/1\.[01] (\d{3})", lines[0])
    if not match:
        return Response(error="bad status line %r" % lines[0][:80]) if complete else None
    headers = []
    for line in lines[1:]:
        if b":" in line:
            name, value = line.split(b":", 1)
            headers.append((name.decode("latin1"), value.strip().decode("latin1")))
    status = int(match.group(1))
    rest = data[end + 4:]
    response = Response(status, headers)
    length = response.header("Content-Length")
    if (response.header("Transfer-Encoding") or "").lower() == "chunked":
        body, position = b"", 0
        while True:
            eol = rest.find(b"\r\n", position)
            if eol < 0:
                return response if complete else None
            size = int(rest[position:eol].split(b";")[0] or b"0", 16)
            if size == 0:
                response.body = body
                return response
            if len(rest) < eol + 2 + size + 2:
                return response if complete else None
            body += rest[eol + 2:eol + 2 + size]
            position = eol + 2 + size + 2
    if length is not None:
        if len(rest) >= int(length):
            response.body = rest[:int(length)]
            return response
        return None if not complete else Response(status, headers, rest)
    if status in (204, 304) or 100 <= status < 200:
        return response
    response.body = rest
    return response if complete else None


def http_json(method, url, payload=None, timeout=10):
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


# ----------------------------------------------------------------------------------------------
# docs/integrations.md
# ----------------------------------------------------------------------------------------------

def documented_config(doc, name):
    """The fenced block after `<!-- tested-config: NAME -->` (as AuthzTests.documentedConfig)."""
    marker = doc.find("<!-- tested-config: %s -->" % name)
    if marker < 0:
        raise SetupError("docs/integrations.md has no tested %s configuration" % name)
    fence = doc.find("```", marker)
    start = doc.find("\n", fence) + 1
    end = doc.find("\n```", start)
    if fence < 0 or start <= 0 or end < 0:
        raise SetupError("docs/integrations.md: the %s block is not fenced" % name)
    return doc[start:end]


def section_yaml(doc, heading):
    """The first ```yaml block of the section whose heading starts with `heading`."""
    at = doc.find("\n## " + heading)
    if at < 0:
        raise SetupError("docs/integrations.md has no section %r" % heading)
    fence = doc.find("```yaml\n", at)
    end = doc.find("\n```", fence + 8)
    if fence < 0 or end < 0:
        raise SetupError("docs/integrations.md: no yaml block in %r" % heading)
    return yaml.safe_load(doc[fence + 8:end])


def localize(text, front, front_port, authz_port, upstream_port):
    for address in (front, "127.0.0.1:9191", "127.0.0.1:9000"):
        if address not in text:
            raise SetupError("the documented configuration no longer names %s" % address)
    return (text.replace(front, "127.0.0.1:%d" % front_port).replace("127.0.0.1:9191", "127.0.0.1:%d" % authz_port)
            .replace("127.0.0.1:9000", "127.0.0.1:%d" % upstream_port))


class Patterns(object):
    """Envoy StringMatcher patterns (`prefix`, `exact`, ...), matched on lower-case names."""

    def __init__(self, patterns):
        self.patterns = patterns or []

    def match(self, name):
        name = name.lower()
        for p in self.patterns:
            ignore = p.get("ignore_case", True)
            subject = name if ignore else name
            if "exact" in p and subject == p["exact"].lower():
                return True
            if "prefix" in p and subject.startswith(p["prefix"].lower()):
                return True
            if "suffix" in p and subject.endswith(p["suffix"].lower()):
                return True
            if "contains" in p and p["contains"].lower() in subject:
                return True
            if "safe_regex" in p and re.fullmatch(p["safe_regex"]["regex"], subject):
                return True
        return False


class Dialects(object):
    """What the doc says Envoy and Traefik are configured with."""

    def __init__(self, doc):
        envoy = section_yaml(doc, "Envoy")
        try:
            authz = envoy["http_filters"][0]["typed_config"]
            service = authz["http_service"]
            self.envoy_prefix = service["path_prefix"]
            self.envoy_request = Patterns(service["authorization_request"]["allowed_headers"]["patterns"])
            self.envoy_upstream = Patterns(service["authorization_response"]["allowed_upstream_headers"]["patterns"])
            self.envoy_timeout_ms = int(float(str(service["server_uri"]["timeout"]).rstrip("s")) * 1000)
            self.envoy_with_body = "with_request_body" in authz
            # The connection manager's headers_with_underscores_action (Envoy's default: ALLOW).
            options = envoy.get("common_http_protocol_options") or {}
            self.envoy_underscores = options.get("headers_with_underscores_action", "ALLOW")
            if self.envoy_underscores not in ("ALLOW", "DROP_HEADER", "REJECT_REQUEST"):
                raise SetupError("docs/integrations.md's Envoy block: unknown headers_with_underscores_action %r"
                                 % self.envoy_underscores)
        except (KeyError, IndexError, TypeError) as error:
            raise SetupError("docs/integrations.md's Envoy block changed shape: %r" % error)
        # The route's request_headers_to_remove the Envoy section prescribes (in its prose), and
        # X-Forwarded-Client-Cert, which Envoy sanitizes by default (forward_client_cert_details).
        section = doc[doc.find("\n## Envoy"):]
        listed = re.search(r"request_headers_to_remove: \[([^\]]*)\]", section)
        if listed is None:
            raise SetupError("docs/integrations.md's Envoy section no longer names request_headers_to_remove")
        self.envoy_removed = {n.strip().lower() for n in listed.group(1).replace("\n", " ").split(",") if n.strip()}
        self.envoy_removed.add("x-forwarded-client-cert")
        traefik = section_yaml(doc, "Traefik")
        try:
            forward = traefik["http"]["middlewares"]["app-attest"]["forwardAuth"]
            self.traefik_path = "/" + forward["address"].split("/", 3)[3]
            self.traefik_response_headers = list(forward["authResponseHeaders"])
            if forward.get("trustForwardHeader"):
                raise SetupError("the doc's Traefik block trusts X-Forwarded-*: the transcript assumes it does not")
        except (KeyError, IndexError, TypeError) as error:
            raise SetupError("docs/integrations.md's Traefik block changed shape: %r" % error)
        # Headers the doc's router middlewares clear (an empty customRequestHeaders value deletes
        # the field), and X-Real-Ip, which Traefik sets itself to the client address.
        self.traefik_removed = {"x-real-ip"}
        for name in traefik["http"]["routers"]["api"]["middlewares"]:
            custom = traefik["http"]["middlewares"][name].get("headers", {}).get("customRequestHeaders", {})
            self.traefik_removed |= {n.lower() for n, v in custom.items() if v == ""}


def go_canonical(name):
    """net/textproto.CanonicalMIMEHeaderKey."""
    if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
        return name
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


# ----------------------------------------------------------------------------------------------
# The world
# ----------------------------------------------------------------------------------------------

class World(object):
    def __init__(self, args):
        self.args, self.work = args, args.work
        self.procs = Processes(self.work)
        self.binary = os.path.abspath(args.gateway_bin)
        with open(DOC, encoding="utf-8") as f:
            self.doc = f.read()
        self.dialects = Dialects(self.doc)
        self.nginx_block = documented_config(self.doc, "nginx")
        self.caddy_block = documented_config(self.doc, "caddy")
        self.upstream, self.gateway, self.nginx, self.caddy = {}, {}, {}, {}
        self.warnings = []  # check-config's warnings about the policy

    def run(self, *argv, **kwargs):
        proc = subprocess.run([self.binary] + list(argv), capture_output=True, text=True, timeout=60, **kwargs)
        if proc.returncode != 0:
            raise SetupError("attest-gateway %s exited %d: %s %s" % (" ".join(argv[:2]), proc.returncode,
                                                                      proc.stdout[-400:], proc.stderr[-400:]))
        return proc.stdout

    def start(self):
        if h2 is None:
            raise SetupError("python3 has no h2 module (the h2 doors): make deps installs python3-h2")
        self.start_redis()
        self.root_ca = json.loads(self.run("sim", "init", "--dir", os.path.join(self.work, "sim")))["root_ca"]
        # The Android test root (made by the first android-enroll; that key is not used) and the
        # signing digest its keys claim: the policy's android block.
        bootstrap = json.loads(self.run("sim", "android-enroll", "--dir", os.path.join(self.work, "sim"),
                                        "--challenge", "doors-bootstrap"))
        self.android_root, self.android_digest = bootstrap["root"], bootstrap["signing_digest"]
        with open(os.path.join(self.work, "challenge.key"), "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        with open(os.path.join(self.work, "token-subject"), "w") as f:
            f.write(base64.b64encode(os.urandom(32)).decode() + "\n")
        # The h2tls doors' listener: a self-signed P-256 certificate for 127.0.0.1.
        self.tls_certificate = os.path.join(self.work, "tls-cert.pem")
        made = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                               "-nodes", "-keyout", os.path.join(self.work, "tls-key.pem"), "-out",
                               self.tls_certificate, "-days", "2", "-subj", "/CN=127.0.0.1",
                               "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, text=True)
        if made.returncode != 0:
            raise SetupError("openssl req: %s" % made.stderr.strip())
        made = subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                               "-out", os.path.join(self.work, "token-d1.pem")], capture_output=True, text=True)
        if made.returncode != 0:
            raise SetupError("openssl genpkey: %s" % made.stderr.strip())
        for name in UPSTREAMS:
            self.start_upstream(name)
        for name in UPSTREAMS:
            self.start_gateway(name)
        self.start_nginx()
        for name in UPSTREAMS:
            self.start_caddy(name)
        self.attest()
        self.android_enroll()
        self.debug_token = json.loads(self.run("debug-tokens", "create", "--name", "doors", "--ttl", "1h",
                                               "--redis", self.redis_url))["token"]
        self.token = self.attestation_token()

    def start_redis(self):
        for attempt in range(4):
            port = free_port()
            child = self.procs.start("redis-%d" % attempt, [
                "redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--dir", self.work])
            if wait_until(lambda: self.redis_ping(port), child, 10):
                self.redis_url = "redis://127.0.0.1:%d/0" % port
                return
            self.procs.stop(child)
        raise SetupError("redis-server did not start: %s" % log_tail(os.path.join(self.work, "redis-0.out")))

    @staticmethod
    def redis_ping(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start_upstream(self, name):
        records = os.path.join(self.work, "calls-%s.jsonl" % name)
        open(records, "w").close()
        if name == "express":
            env = dict(os.environ, NODE_PATH="/usr/share/nodejs")
            argv = [self.args.node, os.path.join(HERE, "express-upstream.js"), records]
        else:
            env = dict(os.environ)
            argv = ["/usr/bin/python3", os.path.join(HERE, "flask-upstream.py"), records]
        child = self.procs.start("upstream-" + name, argv, env=env)
        out = os.path.join(self.work, "upstream-%s.out" % name)
        port = []

        def listening():
            text = log_tail(out, 5)
            found = re.search(r"listening 127\.0\.0\.1:(\d+)", text)
            if found:
                port.append(int(found.group(1)))
            return bool(found)

        if not wait_until(listening, child, 20):
            raise SetupError("the %s upstream did not start: %s" % (name, log_tail(out.replace(".out", ".err"))))
        self.upstream[name] = {"port": port[0], "records": records}

    def policy(self, name, listen, authz, admin, tls):
        return """# The doors check's policy (scripts/doors/doors.py), upstream: %(name)s
listen:
  - { address: "127.0.0.1:%(listen)d", h2c: true }
  - { address: "127.0.0.1:%(tls)d", tls: { certificate: %(cert)s, private_key: %(cert_key)s } }
authz_listen: 127.0.0.1:%(authz)d
admin_listen: 127.0.0.1:%(admin)d
trusted_proxies: [127.0.0.1]
redis: %(redis)s
app_ids: ["%(app)s"]
environment: development
trust_roots: [%(root)s]
android:
  apps: [{ package: %(android_package)s, signing_digests: ["%(android_digest)s"] }]
  trust_anchors: [%(android_root)s]
  revocation: off
challenge_key_file: %(key)s
upstreams:
  app: { url: "http://127.0.0.1:%(upstream)d" }
tokens:
  issuer: https://doors.example
  active_kid: d1
  keys: [{ kid: d1, key_file: %(token_key)s }]
  subject_key_file: %(subject)s
  audiences: [{ name: doors }]
routes:
  - { name: ws, match: { path_prefix: /v1/ws/ }, upstream: app, mode: enforce, websocket: true }
  - { name: tok, match: { path_prefix: /v1/tok/ }, upstream: app, mode: enforce, accept_token: { audience: doors } }
  - { name: publicws, match: { path_prefix: /public/ws/ }, upstream: app, mode: "off", websocket: true }
  - { name: admin, match: { path_prefix: /v1/admin }, upstream: app, mode: enforce, challenge: required }
  - { name: debug, match: { path_prefix: /v1/debug }, upstream: app, mode: enforce, allow_debug_tokens: true }
  - { name: iosonly, match: { path_prefix: /v1/ios/ }, upstream: app, mode: enforce, platforms: [ios] }
  - { name: androidonly, match: { path_prefix: /v1/android/ }, upstream: app, mode: enforce, platforms: [android] }
  - { name: head, match: { path_prefix: /v1/head/ }, upstream: app, mode: enforce, binding: head }
  - { name: api, match: { path_prefix: /v1/ }, upstream: app, mode: enforce }
  - { name: buy, match: { path: /buy, methods: [POST] }, upstream: app, mode: enforce }
  - { name: item, match: { path: /item, methods: [DELETE, PUT] }, upstream: app, mode: enforce }
  - { name: cs, match: { path_prefix: /cs/ }, upstream: app, mode: enforce, case_sensitive: true }
  - { name: public, match: { path_prefix: /public }, upstream: app, mode: "off" }
  - { name: rest, match: { path_prefix: / }, upstream: app, mode: "off" }
""" % {"name": name, "listen": listen, "authz": authz, "admin": admin, "redis": self.redis_url, "app": APP_ID,
       "root": self.root_ca, "key": os.path.join(self.work, "challenge.key"),
       "android_package": ANDROID_PACKAGE, "android_digest": self.android_digest, "android_root": self.android_root,
       "token_key": os.path.join(self.work, "token-d1.pem"), "subject": os.path.join(self.work, "token-subject"),
       "tls": tls, "cert": self.tls_certificate, "cert_key": os.path.join(self.work, "tls-key.pem"),
       "upstream": self.upstream[name]["port"]}

    def start_gateway(self, name):
        for attempt in range(4):
            listen, authz, admin, tls = free_port(), free_port(), free_port(), free_port()
            path = os.path.join(self.work, "policy-%s.yaml" % name)
            with open(path, "w") as f:
                f.write(self.policy(name, listen, authz, admin, tls))
            check = subprocess.run([self.binary, "check-config", path], capture_output=True, text=True, timeout=60)
            if check.returncode != 0:
                raise SetupError("check-config refused %s: %s" % (path, check.stderr.strip()))
            if attempt == 0:
                for line in check.stdout.splitlines():
                    if line.strip().startswith("warning:"):
                        self.warnings.append(line.strip())
                        print("  check-config (%s): %s" % (name, line.strip()))
            label = "gateway-%s-%d" % (name, attempt)
            child = self.procs.start(label, [self.binary, "serve", "--config", path])
            if wait_until(lambda: self.ready(admin), child, 30):
                self.gateway[name] = {"listen": listen, "authz": authz, "admin": admin, "tls": tls, "child": child}
                return
            self.procs.stop(child)
        raise SetupError("the %s gateway did not start: %s" % (name, log_tail(os.path.join(self.work, label + ".err"))))

    @staticmethod
    def ready(admin):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % admin, timeout=1) as answer:
                return answer.status == 200
        except OSError:
            return False

    def start_nginx(self):
        d = self.work
        for attempt in range(4):
            ports = {name: free_port() for name in UPSTREAMS}
            servers = "\n".join(
                localize(self.nginx_block, "127.0.0.1:8000", ports[name], self.gateway[name]["authz"],
                         self.upstream[name]["port"]) for name in UPSTREAMS)
            conf = """daemon off;
master_process off;
pid %(d)s/nginx.pid;
error_log %(d)s/nginx-error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %(d)s/nginx-body;
    proxy_temp_path %(d)s/nginx-proxy;
    fastcgi_temp_path %(d)s/nginx-fastcgi;
    uwsgi_temp_path %(d)s/nginx-uwsgi;
    scgi_temp_path %(d)s/nginx-scgi;
%(servers)s
}
""" % {"d": d, "servers": servers}
            path = os.path.join(d, "nginx.conf")
            with open(path, "w") as f:
                f.write(conf)
            child = self.procs.start("nginx-%d" % attempt, [self.args.nginx, "-p", d, "-e", d + "/nginx-error.log",
                                                            "-c", path])
            if wait_until(lambda: all(connectable(p) for p in ports.values()), child, 10):
                self.nginx = ports
                return
            self.procs.stop(child)
        raise SetupError("nginx did not start: %s" % log_tail(os.path.join(d, "nginx-error.log")))

    def start_caddy(self, name):
        d = self.work
        for attempt in range(4):
            port = free_port()
            path = os.path.join(d, "Caddyfile-%s" % name)
            with open(path, "w") as f:
                f.write(localize(self.caddy_block, "127.0.0.1:8001", port, self.gateway[name]["authz"],
                                 self.upstream[name]["port"]))
            env = dict(os.environ, XDG_DATA_HOME=d + "/caddy-data", XDG_CONFIG_HOME=d + "/caddy-config")
            label = "caddy-%s-%d" % (name, attempt)
            child = self.procs.start(label, [self.args.caddy, "run", "--config", path, "--adapter", "caddyfile"],
                                     env=env)
            if wait_until(lambda: connectable(port), child, 15):
                self.caddy[name] = port
                return
            self.procs.stop(child)
        raise SetupError("caddy did not start: %s" % log_tail(os.path.join(d, label + ".err")))

    def challenge(self):
        status, body = http_json("POST", "http://127.0.0.1:%d/app-attest/challenge" % self.gateway["express"]["listen"])
        if status != 200 or "challenge" not in body:
            raise SetupError("no challenge: %s %s" % (status, body))
        return body["challenge"]

    def attest(self):
        challenge = self.challenge()
        out = json.loads(self.run("sim", "attest", "--dir", os.path.join(self.work, "sim"), "--app-id", APP_ID,
                                  "--challenge", challenge, "--environment", "development"))
        status, body = http_json("POST", "http://127.0.0.1:%d/app-attest/attest" % self.gateway["express"]["listen"],
                                 {"key_id": out["key_id"], "attestation": out["attestation"], "challenge": challenge})
        if status != 201:
            raise SetupError("the simulated device's attestation was refused: %s %s" % (status, body))
        self.key_id = out["key_id"]

    def android_enroll(self):
        """The simulated Android key (@android lines), enrolled through the attest endpoint."""
        challenge = self.challenge()
        out = json.loads(self.run("sim", "android-enroll", "--dir", os.path.join(self.work, "sim"),
                                  "--challenge", challenge))
        status, body = http_json("POST", "http://127.0.0.1:%d/app-attest/attest" % self.gateway["express"]["listen"],
                                 json.loads(out["body"]))
        if status != 201 or body.get("key_id") != out["key_id"] or body.get("platform") != "android":
            raise SetupError("the simulated Android key's enrollment was refused: %s %s" % (status, body))
        self.android_key_id, self.android_counter = out["key_id"], 0

    def sign(self, platform, client_data):
        """(key ID, X-App-Assertion) over client_data: an App Attest assertion from the simulated
        device, or an Android signed request (the next counter of the Android key)."""
        sim = os.path.join(self.work, "sim")
        encoded = base64.b64encode(client_data).decode()
        if platform == "android":
            self.android_counter += 1
            out = json.loads(self.run("sim", "android-sign", "--dir", sim, "--key-id", self.android_key_id,
                                      "--counter", str(self.android_counter), "--client-data", encoded))
            return self.android_key_id, out["assertion"]
        out = json.loads(self.run("sim", "assert", "--dir", sim, "--key-id", self.key_id, "--app-id", APP_ID,
                                  "--client-data", encoded))
        return self.key_id, out["assertion"]

    def attestation_token(self):
        """An attestation token for the `doors` audience (@token), from the token endpoint."""
        body = b'{"audience": "doors"}'
        assertion = self.assertion(b"POST", b"/app-attest/token", body, b"")
        request = urllib.request.Request(
            "http://127.0.0.1:%d/app-attest/token" % self.gateway["express"]["listen"], data=body, method="POST",
            headers={"Content-Type": "application/json", "X-App-Attest-Key-Id": self.key_id,
                     "X-App-Assertion": assertion})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                token = json.loads(answer.read().decode()).get("token")
        except (OSError, ValueError) as error:
            raise SetupError("no attestation token: %s" % error)
        if not token:
            raise SetupError("the token endpoint answered no token")
        return token

    def assertion(self, method, target, body, challenge):
        return self.sign("ios", client_data(method, target, body, challenge))[1]

    def decisions(self, name):
        """(allowed, denied) answers of this gateway's authz listener so far."""
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.gateway[name]["admin"], timeout=5) as m:
            text = m.read().decode()
        allowed = denied = 0.0
        for line in text.splitlines():
            if line.startswith("attest_gateway_authz_decisions_total{"):
                value = float(line.rsplit(" ", 1)[1])
                if 'decision="allowed"' in line:
                    allowed += value
                else:
                    denied += value
        return allowed, denied

    def records(self, name, door_id):
        out = []
        with open(self.upstream[name]["records"], encoding="utf-8") as f:
            for raw in f:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if record.get("id") == door_id:
                    out.append(record)
        return out


# ----------------------------------------------------------------------------------------------
# One request through one door
# ----------------------------------------------------------------------------------------------

class Outcome(object):
    def __init__(self, door):
        self.door = door
        self.verdict = None      # allowed | refused | refused-by-front | error
        self.code = None
        self.status = None
        self.records = []
        self.upstream_headers = None  # transcripts: what the upstream would receive
        self.notes = []
        self.problems = []
        self.sent = []           # the client's header fields (name, value) as bytes
        self.forbidden = None    # h2: why HTTP/2 itself makes the request malformed


def client_data(method, target, body, challenge, binding="request"):
    """docs/protocol.md section 3: `binding: request`'s clientData, or `binding: head`'s (the literal
    `head` in the body digest's place)."""
    digest = b"head" if binding == "head" else hashlib.sha256(body or b"").hexdigest().encode()
    return b"appattest-v1\n" + method + b"\n" + target + b"\n" + digest + b"\n" + challenge


def signed_fields(world, line):
    """An @assert or @android line's X-App-Attest-Key-Id, X-App-Assertion (and
    X-App-Attest-Challenge), minted afresh, over @signed-target / @signed-body instead of the line's
    when given, with @binding's clientData; @counter-bytes replaces an Android assertion's 8 counter
    bytes. With @replay the request is first sent once, as the line says, straight to
    inline/express, whose answer must be an allow: the door then gets the same bytes again.
    Returns (fields, problem): problem is why the first use of a @replay line failed, else None."""
    challenge = world.challenge().encode() if line.challenge else b""
    target = line.signed_target if line.signed_target is not None else line.target
    body = line.signed_body if line.signed_body is not None else line.body
    key_id, assertion = world.sign(line.platform, client_data(line.method, target, body, challenge, line.binding))
    if line.counter_bytes is not None:
        assertion = base64.b64encode(line.counter_bytes + base64.b64decode(assertion)[8:]).decode()
    fields = [(b"X-App-Attest-Key-Id", key_id.encode()), (b"X-App-Assertion", assertion.encode())]
    if line.challenge:
        fields.append((b"X-App-Attest-Challenge", challenge))
    if not line.replay:
        return fields, None
    port = world.gateway["express"]["listen"]
    headers = [(b"Host", b"127.0.0.1:%d" % port), (b"X-Doors-Id", b"replay-first-use")] + fields
    if line.body is not None:
        headers.append((b"Content-Length", str(len(line.body)).encode()))
    headers.append((b"Connection", b"close"))
    response = exchange(port, serialize(line.method, line.target, headers, line.body))
    answer = response.json()
    if response.status is None or (answer is not None and isinstance(answer.get("error"), str)):
        return fields, "@replay: the first use was not allowed (%s %s)" % (
            response.status, answer.get("error") if answer else response.error)
    return fields, None


def client_request(world, line, door, kind, port, door_id):
    """The client's request for this door: (method, target, headers, body, problem), all bytes
    but problem (signed_fields')."""
    headers = list(line.headers)
    problem = None
    if line.assertion:
        fields, problem = signed_fields(world, line)
        headers += fields
    if line.debug_token:
        headers.append((b"X-App-Attest-Debug-Token", world.debug_token.encode()))
    if line.token:
        headers.append((b"Authorization", b"Bearer " + world.token.encode()))
    defaults = []
    if not line.has_header("Host"):
        defaults.append((b"Host", b"127.0.0.1:%d" % port))
    defaults.append((b"X-Doors-Id", door_id.encode()))
    if line.body is not None and not line.has_header("Content-Length"):
        headers.append((b"Content-Length", str(len(line.body)).encode()))
    if not line.has_header("Connection"):
        headers.append((b"Connection", b"close"))
    return line.method, line.target, defaults + headers, line.body, problem


# ----------------------------------------------------------------------------------------------
# HTTP/2 with prior knowledge (the h2 doors): one connection, one stream per (line, door)
# ----------------------------------------------------------------------------------------------

H2_CONNECTION_SPECIFIC = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"}


def h2_not_applicable(line):
    """Why the line cannot be said in HTTP/2 (its meaning is HTTP/1.1 framing), or None."""
    if line.not_h2:
        return line.not_h2
    for what, text in (("method", line.method), ("target", line.target)):
        if re.search(rb"[\x00-\x20\x7f]", text):
            return "whitespace or controls in the %s split an HTTP/1.1 request line; :%s is one field" % (
                what, "method" if what == "method" else "path")
    for name, value in line.headers:
        if re.search(rb"[\r\n]", name + value):
            return "CR or LF in a field (bare LF, obs-fold) is HTTP/1.1 head framing"
    return None


def h2_forbids(line, method, target, authority, fields, body):
    """Why HTTP/2 itself makes this request malformed (RFC 9113), or None: the only grounds on
    which the h2 door may refuse what inline HTTP/1.1 allows."""
    for name, value in fields:
        if re.search(rb"[A-Z]", name):
            return "upper-case field name %s (RFC 9113 8.2.1)" % name.decode("latin1")
        if name.lower() in H2_CONNECTION_SPECIFIC:
            return "connection-specific field %s (8.2.2)" % name.decode("latin1")
        if name.lower() == b"te" and value.strip().lower() != b"trailers":
            return "te other than trailers (8.2.2)"
        if value != value.strip(b" \t") or re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", value):
            return "whitespace at the ends or controls in %s's value (8.2.1)" % name.decode("latin1")
    if b"@" in authority:
        return "userinfo in :authority (8.3.1)"
    hosts = [v for n, v in fields if n.lower() == b"host"]
    if any(h.lower() != authority.lower() for h in hosts):
        return "host differs from :authority (8.3.1)"
    lengths = [v for n, v in fields if n.lower() == b"content-length"]
    if lengths and any(v.strip() != str(len(body or b"")).encode() for v in lengths):
        return "content-length not the DATA length (8.1.1)"
    return None


def h2_client_request(world, line, port, door_id):
    """The h2 door's request: (method, path, authority, fields, body). The line's fields as
    written (a line's Host as a `host` field); the harness's own fields in lower case; no
    Connection: close; :authority the Host the line would have sent, or the line's @authority."""
    fields = [(b"x-doors-id", door_id.encode())]
    for name, value in line.headers:
        fields.append((b"host", value) if name.lower() == b"host" else (name, value))
    problem = None
    if line.assertion:
        signed, problem = signed_fields(world, line)
        fields += [(name.lower(), value) for name, value in signed]
    if line.debug_token:
        fields.append((b"x-app-attest-debug-token", world.debug_token.encode()))
    if line.token:
        fields.append((b"authorization", b"Bearer " + world.token.encode()))
    if line.body is not None and not line.has_header("Content-Length"):
        fields.append((b"content-length", str(len(line.body)).encode()))
    host = next((v for n, v in line.headers if n.lower() == b"host"), None)
    authority = line.authority if line.authority is not None else (host if host is not None else b"127.0.0.1:%d" % port)
    return line.method, line.target, authority, fields, line.body, problem


def h2_exchange(port, method, target, authority, fields, body, timeout=10.0, tls_ca=None):
    """One stream over a fresh h2c connection (prior knowledge), or with `tls_ca` over TLS
    with ALPN `h2` (the server's certificate verified against `tls_ca`, `:scheme https`). The
    client checks and fixes nothing (validation and normalisation off): the gateway sees what an
    attacker would send. A RST_STREAM or GOAWAY is returned as Response.reset
    ("RST_STREAM PROTOCOL_ERROR")."""
    def code_name(code):
        try:
            return h2.errors.ErrorCodes(code).name
        except ValueError:
            return str(code)

    config = h2.config.H2Configuration(client_side=True, header_encoding=None, validate_outbound_headers=False,
                                       normalize_outbound_headers=False, validate_inbound_headers=False)
    conn = h2.connection.H2Connection(config=config)
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as error:
        return Response(error="connect: %s" % error)
    if tls_ca is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(tls_ca)
        context.set_alpn_protocols(["h2"])
        try:
            sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
        except (OSError, ssl.SSLError) as error:
            sock.close()
            return Response(error="TLS handshake: %s" % error)
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            return Response(error="ALPN chose %r, not h2" % sock.selected_alpn_protocol())
    response = Response()
    response.reset = None
    body_parts = []
    try:
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        scheme = b"https" if tls_ca is not None else b"http"
        pseudo = [(b":method", method), (b":scheme", scheme), (b":authority", authority), (b":path", target)]
        conn.send_headers(stream, pseudo + list(fields), end_stream=body is None)
        if body is not None:
            conn.send_data(stream, body, end_stream=True)
        sock.sendall(conn.data_to_send())
        deadline = time.time() + timeout
        done = False
        while not done and time.time() < deadline:
            try:
                data = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not data:
                break
            try:
                events = conn.receive_data(data)
            except h2.exceptions.ProtocolError as error:
                response.error = "client h2: %r" % error
                break
            for event in events:
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    headers = [(n.decode("latin1"), v.decode("latin1")) for n, v in event.headers]
                    for n, v in headers:
                        if n == ":status":
                            response.status = int(v)
                    response.headers = [(n, v) for n, v in headers if not n.startswith(":")]
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    body_parts.append(event.data)
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                    done = True
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                    response.reset = "RST_STREAM " + code_name(event.error_code)
                    done = True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    if response.reset is None and not done:
                        response.reset = "GOAWAY " + code_name(event.error_code)
                    done = True
            pending = conn.data_to_send()
            if pending:
                try:
                    sock.sendall(pending)
                except OSError:
                    pass
        if not done and response.status is None and response.reset is None and response.error is None:
            response.error = "no HTTP/2 answer"
    except OSError as error:
        if response.status is None and response.reset is None:
            response.error = "h2: %s" % error
    finally:
        sock.close()
    response.body = b"".join(body_parts)
    return response


def envoy_check(world, method, target, headers, body):
    d = world.dialects
    out = []
    host = next((v for n, v in headers if n.lower() == b"host"), b"")
    out.append((b"host", host))
    xff = [v for n, v in headers if n.lower() == b"x-forwarded-for"]
    request_id = [v for n, v in headers if n.lower() == b"x-request-id"]
    for name, value in headers:
        lower = name.lower()
        if lower in (b"host", b"content-length", b"x-forwarded-for", b"x-request-id", b"connection"):
            continue
        if lower == b"authorization" or d.envoy_request.match(lower.decode("latin1")):
            out.append((lower, value))
    if d.envoy_request.match("x-forwarded-for"):
        out.append((b"x-forwarded-for", b", ".join(xff + [b"127.0.0.1"])))
    if d.envoy_request.match("x-request-id"):
        out.append((b"x-request-id", request_id[0] if request_id else str(uuid.uuid4()).encode()))
    out.append((b"x-envoy-expected-rq-timeout-ms", str(d.envoy_timeout_ms).encode()))
    check_body = b""
    if d.envoy_with_body:
        check_body = body or b""
        out.append((b"x-envoy-auth-partial-body", b"false"))
    out.append((b"content-length", str(len(check_body)).encode()))
    out.append((b"connection", b"close"))
    return serialize(method, d.envoy_prefix.encode() + target, out, check_body)


def traefik_check(world, method, target, headers, authz_port):
    d = world.dialects
    grouped = {}
    host = next((v for n, v in headers if n.lower() == b"host"), b"")
    for name, value in headers:
        lower = name.lower().decode("latin1")
        if lower in HOP_BY_HOP or lower in ("host", "content-length"):
            continue
        grouped.setdefault(go_canonical(name.decode("latin1")), []).append(value)
    for name, value in (("X-Forwarded-For", b"127.0.0.1"), ("X-Forwarded-Method", method),
                        ("X-Forwarded-Proto", b"http"), ("X-Forwarded-Host", host), ("X-Forwarded-Uri", target)):
        grouped[name] = [value]
    grouped.setdefault("User-Agent", [b"Go-http-client/1.1"])
    grouped.setdefault("Accept-Encoding", [b"gzip"])
    out = [(b"Host", b"127.0.0.1:%d" % authz_port)]
    for name in sorted(grouped):
        for value in grouped[name]:
            out.append((name.encode("latin1"), value))
    out.append((b"Connection", b"close"))
    return serialize(b"GET", d.traefik_path.encode(), out, b"")


def transcript_upstream(world, kind, headers, answer):
    """The header fields the upstream would receive after an allowed check (names lower-cased)."""
    client = [(n.decode("latin1").lower(), v.decode("latin1")) for n, v in headers]
    if kind == "envoy":
        remove = {n.strip().lower() for n in (answer.header("x-envoy-auth-headers-to-remove") or "").split(",") if n.strip()}
        copied = [(n.lower(), v) for n, v in answer.headers if world.dialects.envoy_upstream.match(n)]
        names = {n for n, _ in copied}
        result = [(n, v) for n, v in client if n not in names and n not in world.dialects.envoy_removed] + copied
        return [(n, v) for n, v in result if n not in remove]
    names = {n.lower() for n in world.dialects.traefik_response_headers}
    result = [(n, v) for n, v in client if n not in names and n not in world.dialects.traefik_removed]
    for n, v in answer.headers:
        if n.lower() in names:
            result.append((n.lower(), v))
    return result


def refusal_code(response):
    body = response.json()
    if body and isinstance(body.get("error"), str) and body["error"]:
        return body["error"]
    code = response.header("X-App-Attest-Error")
    return code or None


def run_door(world, line, door, kind, upstream):
    outcome = Outcome(door)
    door_id = "L%d-%s" % (line.number, door.replace("/", "-"))
    if kind == "inline":
        port = world.gateway[upstream]["listen"]
    elif kind == "nginx":
        port = world.nginx[upstream]
    elif kind == "caddy":
        port = world.caddy[upstream]
    else:
        port = world.gateway["express"]["listen"]  # the notional front the app addressed
    if kind in H2_KINDS:
        return run_h2_door(world, line, outcome, upstream, door_id, lower=kind == "h2lc", tls=kind == "h2tls")
    method, target, headers, body, problem = client_request(world, line, door, kind, port, door_id)
    outcome.sent = headers
    if problem:
        outcome.problems.append(problem)
    if kind == "envoy" and world.dialects.envoy_underscores != "ALLOW":
        underscored = [n for n, _ in headers if b"_" in n]
        if underscored and world.dialects.envoy_underscores == "REJECT_REQUEST":
            outcome.verdict = "refused-by-front"
            outcome.notes.append("Envoy (headers_with_underscores_action: REJECT_REQUEST) refuses %s"
                                 % underscored[0].decode("latin1"))
            return outcome
        headers = [(n, v) for n, v in headers if b"_" not in n]  # DROP_HEADER: neither check nor upstream
    if kind in ("envoy", "traefik"):
        authz = world.gateway["express"]["authz"]
        raw = envoy_check(world, method, target, headers, body) if kind == "envoy" else \
            traefik_check(world, method, target, headers, authz)
        response = exchange(authz, raw)
        outcome.status = response.status
        if response.status is None:
            outcome.verdict = "error"
            outcome.notes.append(response.error)
            return outcome
        allowed = response.status == 200 if kind == "envoy" else 200 <= response.status < 300
        if allowed:
            outcome.verdict = "allowed"
            outcome.upstream_headers = transcript_upstream(world, kind, headers, response)
            status = response.header("X-App-Attest-Status")
            outcome.notes.append("X-App-Attest-Status: %s" % status)
        else:
            outcome.verdict = "refused"
            outcome.code = refusal_code(response)
        return outcome

    gateway = upstream
    before = world.decisions(gateway) if kind in ("nginx", "caddy") else None
    response = exchange(port, serialize(method, target, headers, body))
    outcome.status = response.status
    outcome.records = world.records(upstream, door_id)
    gateway_refusal = response.json() is not None and isinstance(response.json().get("error"), str)
    if kind == "inline":
        if outcome.records or (response.status is not None and not gateway_refusal):
            outcome.verdict = "allowed"
        elif response.status is None:
            outcome.verdict = "error"
            outcome.notes.append(response.error)
        else:
            outcome.verdict = "refused"
            outcome.code = refusal_code(response)
        return outcome
    after = world.decisions(gateway)
    for _ in range(10):
        if after != before:
            break
        time.sleep(0.02)
        after = world.decisions(gateway)
    allowed, denied = after[0] - before[0], after[1] - before[1]
    if allowed + denied > 1:
        outcome.notes.append("the gateway answered %d checks for one request" % (allowed + denied))
    if allowed == 0 and denied == 0:
        if outcome.records:
            outcome.verdict = "allowed"
            outcome.problems.append("reached the upstream without the gateway being asked")
        else:
            outcome.verdict = "refused-by-front"
            outcome.notes.append("%s answered %s itself, nothing forwarded" % (kind, response.status))
    elif denied and not allowed:
        outcome.verdict = "refused"
        outcome.code = refusal_code(response)
    else:
        outcome.verdict = "allowed"
        if not outcome.records:
            outcome.notes.append("allowed, but the upstream recorded nothing (answered %s)" % response.status)
    if response.status is None:
        outcome.notes.append(response.error)
    return outcome


def run_h2_door(world, line, outcome, upstream, door_id, lower=False, tls=False):
    reason = h2_not_applicable(line)
    if not reason and lower and not any(re.search(rb"[A-Z]", n) for n, _ in line.headers):
        reason = "no upper-case name: the h2 door sent this request already"
    if reason:
        outcome.verdict = "not-applicable"
        outcome.notes.append("not sent: " + reason)
        return outcome
    port = world.gateway[upstream]["tls" if tls else "listen"]
    method, target, authority, fields, body, problem = h2_client_request(world, line, port, door_id)
    if lower:
        fields = [(n.lower(), v) for n, v in fields]
    outcome.sent = fields
    if problem:
        outcome.problems.append(problem)
    outcome.forbidden = h2_forbids(line, method, target, authority, fields, body)
    response = h2_exchange(port, method, target, authority, fields, body,
                           tls_ca=world.tls_certificate if tls else None)
    outcome.status = response.status
    outcome.records = world.records(upstream, door_id)
    refusal = response.json() is not None and isinstance(response.json().get("error"), str)
    if outcome.records or (response.status is not None and response.reset is None and not refusal):
        outcome.verdict = "allowed"
        if response.reset:
            outcome.notes.append(response.reset + " after the upstream ran")
    elif response.reset is not None:
        outcome.verdict = "refused"
        outcome.code = response.reset
    elif response.status is None:
        outcome.verdict = "error"
        outcome.notes.append(response.error)
    else:
        outcome.verdict = "refused"
        outcome.code = refusal_code(response)
    return outcome


# ----------------------------------------------------------------------------------------------
# The rules
# ----------------------------------------------------------------------------------------------

def values_of(headers, name):
    return [v for n, v in headers if n.lower() == name.lower()]


def leaked(client_value, received_values):
    """The client's value is one of the received values, alone or as a member of a list that
    joined repeated fields ("a, b" from Node, "a,b" from Werkzeug)."""
    member = re.compile(r"(^|,\s*)" + re.escape(client_value) + r"(\s*,|$)")
    return any(v == client_value or member.search(v) for v in received_values)


def check_safety(world, line, outcome):
    # Rule 1: protected handlers only with X-App-Attest-Status: verified, never for a spoofed status.
    excuse = None
    if line.unless_warned:
        excuse = next((w for w in world.warnings if line.unless_warned.search(w)), None)
    for record in outcome.records:
        if not record.get("protected"):
            continue
        statuses = [p.strip() for v in values_of(record["headers"], "X-App-Attest-Status") for p in v.split(",")]
        what = "%s %s (%s %s on the wire) ran with X-App-Attest-Status: %s" % (
            record["upstream"], record["handler"], record["wire_method"], record["target"],
            ", ".join(statuses) if statuses else "(absent)")
        if statuses == ["token"] and line.token:
            continue  # an accept_token route admitted the line's valid attestation token
        if statuses != ["verified"]:
            problem = "protected handler " + what
        elif not line.assertion:
            problem = "protected handler %s without any valid assertion" % what
        else:
            continue
        if excuse:
            outcome.notes.append("%s: excused, check-config warned (%s)" % (problem, excuse[:160]))
        else:
            outcome.problems.append(problem)
    # Rule 2: no client value of a watched header reaches the upstream.
    received_sets = [r["headers"] for r in outcome.records]
    if outcome.upstream_headers is not None:
        received_sets.append(outcome.upstream_headers)
    for received in received_sets:
        for name, value in outcome.sent:
            name, value = name.decode("latin1"), value.decode("latin1")
            # x_app_attest_status is X-App-Attest-Status to a CGI/WSGI upstream (HTTP_X_APP_...)
            canonical = name.replace("_", "-")
            if not watched(canonical):
                continue
            if line.assertion and name.lower() == "x-app-attest-key-id" and not line.has_header(name):
                continue  # the gateway sets the verified key ID itself
            if line.assertion and name.lower() == "x-app-attest-status" and value == "verified":
                continue  # indistinguishable from the gateway's own verdict: rule 1 covers it
            if leaked(value, values_of(received, name) + (values_of(received, canonical) if canonical != name else [])):
                where = "upstream" if outcome.upstream_headers is None else "upstream (computed from the answer)"
                outcome.problems.append("client's %s: %s reached the %s" % (name, value[:60], where))


def reference_of(door, kind, upstream):
    if door == "inline/express":
        return None
    if kind == "inline" or upstream is None:
        return "inline/express"
    return "inline/" + upstream


def compare_h2(line, outcome, reference):
    """The h2 door against inline HTTP/1.1: never allowed where inline refuses; refused where
    inline allows only when HTTP/2 itself forbids the request ("stricter"); both codes compared
    where both are the gateway's (a stream reset or GOAWAY has none)."""
    if outcome.verdict == "not-applicable" or reference is None or reference.verdict in (None, "error"):
        return
    if outcome.verdict == "error":
        outcome.problems.append("no answer")
        return
    if outcome.verdict == "allowed" and reference.verdict != "allowed":
        outcome.problems.append("allowed over HTTP/2, %s says %s" % (reference.door, describe(reference)))
    elif outcome.verdict == "refused" and reference.verdict == "allowed":
        if outcome.forbidden:
            outcome.notes.append("stricter: %s allowed, but HTTP/2 forbids it: %s" % (reference.door, outcome.forbidden))
        else:
            outcome.problems.append("refused %s over HTTP/2, %s allowed, and HTTP/2 does not forbid the request" % (
                outcome.code or "", reference.door))
    elif (outcome.verdict == "refused" and outcome.code and reference.code and outcome.code != reference.code
          and not outcome.code.startswith(("RST_STREAM", "GOAWAY"))):
        if outcome.forbidden:
            outcome.notes.append("%s (HTTP/2: %s) where %s refused with %s" % (
                outcome.code, outcome.forbidden, reference.door, reference.code))
        else:
            outcome.problems.append("refused with %s, %s refused with %s" % (outcome.code, reference.door, reference.code))


def compare(line, outcome, kind, reference):
    if kind in H2_KINDS:
        return compare_h2(line, outcome, reference)
    if kind in line.front_rewrites:
        outcome.notes.append("not compared: " + line.front_rewrites[kind])
        return
    if outcome.verdict == "refused-by-front":
        outcome.notes.append("not compared: the gateway was not asked")
        return
    if reference is None or reference.verdict in (None, "error"):
        return
    if outcome.verdict == "error":
        outcome.problems.append("no answer")
        return
    if (outcome.verdict == "refused" and kind in CHECK_DOORS and outcome.code == "underscore_gateway_header"
            and any(b"_" in n for n, _ in outcome.sent)):
        outcome.notes.append("underscore_gateway_header where %s %s: inline drops the field, a check cannot "
                             "drop it from what its front forwards" % (reference.door, describe(reference)))
        return
    if websocket_not_allowed(outcome, kind):
        outcome.notes.append("websocket_not_allowed where %s %s: inline removes Upgrade, a check cannot "
                             "remove it from what its front forwards" % (reference.door, describe(reference)))
        return
    if outcome.verdict == "refused" and kind in CHECK_DOORS and (
            outcome.code == "authz_endpoint"
            or (kind == "nginx" and outcome.code is None and line.target.startswith(ENDPOINT_PREFIXES))):
        outcome.notes.append("authz_endpoint where %s %s: the gateway's endpoints are served on listen only, "
                             "never checked" % (reference.door, describe(reference)))
        return
    if outcome.verdict != reference.verdict:
        outcome.problems.append("verdict %s, %s says %s%s" % (
            describe(outcome), reference.door, reference.verdict,
            " " + reference.code if reference.code else ""))
        return
    if outcome.verdict == "refused" and outcome.code and reference.code and outcome.code != reference.code:
        if kind in BODILESS and outcome.code == "authz_body_required":
            outcome.notes.append("authz_body_required for %s (no body on this door)" % reference.code)
            return
        outcome.problems.append("refused with %s, %s refused with %s" % (outcome.code, reference.door, reference.code))


def check_expect(line, outcome, kind):
    if not line.expect or kind in line.front_rewrites or outcome.verdict == "not-applicable":
        return
    if line.expect == "allow" and outcome.verdict != "allowed" and not websocket_not_allowed(outcome, kind):
        outcome.problems.append("expected allowed, got %s" % describe(outcome))
    if line.expect == "refuse" and outcome.verdict not in ("refused", "refused-by-front"):
        outcome.problems.append("expected refused, got %s" % describe(outcome))


def describe(outcome):
    text = outcome.verdict or "?"
    if outcome.code:
        text += " " + outcome.code
    return text


def summary_of(outcome):
    parts = [describe(outcome)]
    if outcome.status is not None:
        parts.append("(%s)" % outcome.status)
    for record in outcome.records:
        status = values_of(record["headers"], "X-App-Attest-Status")
        parts.append("[upstream ran %s as %s, status %s]" % (record["handler"] or "no handler", record["method"],
                                                             ",".join(status) or "-"))
    return " ".join(parts)


# ----------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gateway-bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--suite", default=os.path.join(HERE, "suite.txt"))
    parser.add_argument("--only", help="run only the suite lines matching this regular expression")
    parser.add_argument("--nginx", default="/usr/sbin/nginx")
    parser.add_argument("--caddy", default="/usr/bin/caddy")
    parser.add_argument("--node", default="node")
    args = parser.parse_args()

    try:
        lines = read_suite(args.suite)
    except ValueError as error:
        print("FAIL suite: %s" % error)
        print("0 passed, 1 failed")
        return 1
    if args.only:
        lines = [l for l in lines if re.search(args.only, l.text)]

    world = World(args)

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)
    started = time.time()
    try:
        try:
            world.start()
        except (SetupError, OSError, subprocess.SubprocessError, ValueError, KeyError) as error:
            print("FAIL setup: %s" % error)
            print("0 passed, 1 failed")
            return 1
        print("doors: %d requests x %d doors; gateway %s; upstreams express :%d, flask :%d (set up in %.1f s)" % (
            len(lines), len(DOORS), args.gateway_bin, world.upstream["express"]["port"], world.upstream["flask"]["port"],
            time.time() - started))
        passed, failed, not_applicable, failing = 0, 0, 0, []
        for line in lines:
            print("-- L%d: %s" % (line.number, line.text))
            outcomes = {}
            for door, kind, upstream in DOORS:
                outcome = run_door(world, line, door, kind, upstream)
                outcomes[door] = outcome
                check_safety(world, line, outcome)
            for door, kind, upstream in DOORS:
                outcome = outcomes[door]
                reference = reference_of(door, kind, upstream)
                compare(line, outcome, kind, outcomes.get(reference) if reference else None)
                check_expect(line, outcome, kind)
                mark = "FAIL" if outcome.problems else ("N/A " if outcome.verdict == "not-applicable" else "PASS")
                detail = "; ".join(outcome.problems + outcome.notes)
                print("%s L%-3d %-15s %s%s" % (mark, line.number, door, summary_of(outcome),
                                               " -- " + detail if detail else ""))
                if outcome.problems:
                    failed += 1
                    failing.append((line, door, outcome))
                elif outcome.verdict == "not-applicable":
                    not_applicable += 1
                else:
                    passed += 1
        print()
        if failing:
            print("Failing (request, door) pairs:")
            by_line = {}
            for line, door, outcome in failing:
                by_line.setdefault(line.number, (line, []))[1].append((door, outcome))
            for number in sorted(by_line):
                line, doors = by_line[number]
                print("  L%d %s" % (number, line.text))
                for door, outcome in doors:
                    print("      %-15s %s" % (door, "; ".join(outcome.problems)))
        print("doors: %d requests through %d doors in %.1f s" % (len(lines), len(DOORS), time.time() - started))
        print("%d passed, %d failed, %d not applicable (h2, h2lc, h2tls)" % (passed, failed, not_applicable))
        return 1 if failed else 0
    finally:
        world.procs.stop_all()


if __name__ == "__main__":
    sys.exit(main())
