#!/usr/bin/env python3
"""Measures what attest-gateway's Redis records cost, for sizing (docs/operations.md "Redis sizing").

Starts a throwaway redis-server (unix socket in a temp dir, no TCP port, no persistence), writes
records exactly as RedisStore lays them out, and reads MEMORY USAGE, the INFO used_memory delta and
how much the append-only file grows per operation (counter advances run RedisStore's own Lua script):

  appattest:key:{<base64 keyID>}  hash: public_key (65 raw bytes), counter (decimal), app_id,
                                  environment, receipt (raw bytes), attested_at (Unix s), status
  appattest:ch:{<challenge>}      string "1" with EX ttl (43-character base64url challenge)

The receipt is a real App Attest receipt from the vectors (3705 bytes) unless --receipt-bytes
gives another size (random bytes). Usage:

  python3 deploy/redis-sizing.py [--keys 2000] [--challenges 20000] [--vectors DIR]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# RedisStore.createKeyScript and advanceCounterScript, verbatim.
CREATE_KEY = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'public_key', ARGV[1], 'counter', ARGV[2], 'app_id', ARGV[3],
  'environment', ARGV[4], 'receipt', ARGV[5], 'attested_at', ARGV[6], 'status', ARGV[7])
return 1
"""
ADVANCE_COUNTER = """
local v = redis.call('HMGET', KEYS[1], 'counter', 'status')
if not v[1] then return {-1} end
if v[2] == 'revoked' then return {-2} end
local stored = tonumber(v[1])
if stored == nil then return {-3} end
if stored >= tonumber(ARGV[1]) then return {0, stored} end
redis.call('HSET', KEYS[1], 'counter', ARGV[1])
return {1}
"""


class Redis:
    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def __call__(self, *args):
        out = b"*%d\r\n" % len(args)
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            out += b"$%d\r\n%s\r\n" % (len(data), data)
        self.sock.sendall(out)
        return self.reply()

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:].strip()
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        return rest.decode()

    def used_memory(self) -> int:
        info = self("INFO", "memory").decode()
        return int(next(l for l in info.split("\r\n") if l.startswith("used_memory:")).split(":")[1])


def start_server(work: str, sock_path: str) -> tuple[subprocess.Popen, Redis]:
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock_path, "--dir", work, "--save", "",
         "--appendonly", "yes", "--appendfsync", "no", "--auto-aof-rewrite-percentage", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            redis = Redis(sock_path)
            if redis("PING") == "PONG":
                return server, redis
        except (OSError, RuntimeError):  # not listening yet / still loading the AOF
            pass
        time.sleep(0.05)
    server.kill()
    raise SystemExit("redis-server did not start")


def stop_server(server: subprocess.Popen, redis: Redis) -> None:
    try:
        redis("SHUTDOWN")  # flushes the AOF
    except (OSError, RuntimeError, ValueError):
        pass  # the connection closes as the server exits
    server.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--challenges", type=int, default=20000)
    parser.add_argument("--receipt-bytes", type=int, default=0, help="random receipt of this size instead of a real one")
    default_vectors = Path(__file__).resolve().parents[1] / "Tests/VerificationTests/Fixtures"
    parser.add_argument("--vectors", default=str(default_vectors))
    args = parser.parse_args()

    if args.receipt_bytes:
        receipt = os.urandom(args.receipt_bytes)
        receipt_note = f"{len(receipt)} random bytes"
    else:
        receipts = json.load(open(Path(args.vectors) / "receipts.json"))["vectors"]
        # An ATTEST receipt as it sits in a real attestation's attStmt.receipt.
        real = next(r for r in receipts if r["expected_result"] == "valid" and r["expected"].get("type") == "ATTEST")
        receipt = base64.b64decode(real["receipt"])
        receipt_note = f"{len(receipt)}-byte real ATTEST receipt ({real['id']})"

    work = tempfile.mkdtemp(prefix="redis-sizing-")
    sock_path = os.path.join(work, "redis.sock")

    def aof_bytes() -> int:
        return sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof"))

    server, redis = start_server(work, sock_path)
    try:
        version = next(l for l in redis("INFO", "server").decode().split("\r\n") if l.startswith("redis_version:"))
        empty = redis.used_memory()

        # Key records, created by the store's own script.
        create_sha = redis("SCRIPT", "LOAD", CREATE_KEY)
        aof_start, before = aof_bytes(), redis.used_memory()
        keys = []
        for _ in range(args.keys):
            public_key = b"\x04" + os.urandom(64)
            key_id = base64.b64encode(hashlib.sha256(public_key).digest()).decode()
            key = f"appattest:key:{{{key_id}}}"
            redis("EVALSHA", create_sha, 1, key, public_key, 0, "ABCDE12345.com.example.app",
                  "production", receipt, int(time.time()), "active")
            keys.append(key)
        per_key = (redis.used_memory() - before) / args.keys
        aof_per_key = (aof_bytes() - aof_start) / args.keys
        usage = sorted(redis("MEMORY", "USAGE", k, "SAMPLES", "0") for k in keys[:200])
        encoding = redis("OBJECT", "ENCODING", keys[0]).decode()

        # Counter advances (one per verified request), by the store's own script.
        advance_sha = redis("SCRIPT", "LOAD", ADVANCE_COUNTER)
        aof_start = aof_bytes()
        for i, key in enumerate(keys):
            redis("EVALSHA", advance_sha, 1, key, 2000 + i)
        aof_per_assertion = (aof_bytes() - aof_start) / len(keys)

        # After a restart the records are rebuilt from the AOF: measure that steady state too.
        stop_server(server, redis)
        server, redis = start_server(work, sock_path)
        per_key_reloaded = (redis.used_memory() - empty) / args.keys
        usage_reloaded = sorted(redis("MEMORY", "USAGE", k, "SAMPLES", "0") for k in keys[:200])

        # Challenges: SET EX NX, consumed with GETDEL.
        aof_start, before = aof_bytes(), redis.used_memory()
        challenges = []
        for _ in range(args.challenges):
            challenge = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
            key = f"appattest:ch:{{{challenge}}}"
            redis("SET", key, "1", "EX", 300, "NX")
            challenges.append(key)
        per_challenge = (redis.used_memory() - before) / args.challenges
        aof_per_challenge = (aof_bytes() - aof_start) / args.challenges
        challenge_usage = redis("MEMORY", "USAGE", challenges[0])
        aof_start = aof_bytes()
        for key in challenges:
            redis("GETDEL", key)
        aof_per_consume = (aof_bytes() - aof_start) / args.challenges
    finally:
        stop_server(server, redis)
        shutil.rmtree(work, ignore_errors=True)

    median = lambda values: values[len(values) // 2]
    print(f"{version}; receipt: {receipt_note}")
    print(f"key record ({encoding}): MEMORY USAGE median {median(usage)} B, used_memory {per_key:.0f} B per record; "
          f"after a restart (AOF reload): {median(usage_reloaded)} B, {per_key_reloaded:.0f} B per record")
    print(f"challenge (string + TTL): MEMORY USAGE {challenge_usage} B, used_memory {per_challenge:.0f} B per challenge")
    print(f"AOF growth: {aof_per_key:.0f} B per attested key, {aof_per_assertion:.0f} B per verified request "
          f"(counter advance), {aof_per_challenge:.0f} + {aof_per_consume:.0f} B per challenge issued + consumed")
    worst = max(per_key, per_key_reloaded)
    print(f"=> 1,000,000 attested keys ~ {worst * 1e6 / 2**30:.2f} GiB; "
          f"300,000 live challenges ~ {per_challenge * 3e5 / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
