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


# RedisStore.advanceCounterScript, verbatim.
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
        vectors = json.load(open(Path(args.vectors) / "attestations.json"))["vectors"]
        from_vectors = None
        for vector in vectors:  # the receipt inside a real attestation: attStmt.receipt
            receipts = json.load(open(Path(args.vectors) / "receipts.json"))["vectors"]
            match = [r for r in receipts if r.get("paired_attestation") == vector["id"] and r["expected"].get("type") == "ATTEST"]
            if match:
                from_vectors = base64.b64decode(match[0]["receipt"])
                break
        receipt = from_vectors or os.urandom(3705)
        receipt_note = f"{len(receipt)}-byte real ATTEST receipt" if from_vectors else "3705 random bytes"

    work = tempfile.mkdtemp(prefix="redis-sizing-")
    sock_path = os.path.join(work, "redis.sock")
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", sock_path, "--dir", work, "--save", "",
         "--appendonly", "yes", "--appendfsync", "no", "--auto-aof-rewrite-percentage", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if os.path.exists(sock_path):
                break
            time.sleep(0.05)
        redis = Redis(sock_path)
        version = next(l for l in redis("INFO", "server").decode().split("\r\n") if l.startswith("redis_version:"))

        aof_start = sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof"))
        before = redis.used_memory()
        keys = []
        for _ in range(args.keys):
            public_key = b"\x04" + os.urandom(64)
            key_id = base64.b64encode(hashlib.sha256(public_key).digest()).decode()
            key = f"appattest:key:{{{key_id}}}"
            redis("HSET", key, "public_key", public_key, "counter", 1234, "app_id", "ABCDE12345.com.example.app",
                  "environment", "production", "receipt", receipt, "attested_at", int(time.time()), "status", "active")
            keys.append(key)
        per_key = (redis.used_memory() - before) / args.keys
        aof_per_key = (sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof")) - aof_start) / args.keys
        usage = sorted(redis("MEMORY", "USAGE", k, "SAMPLES", "0") for k in keys[:200])
        encoding = redis("OBJECT", "ENCODING", keys[0])

        aof_start = sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof"))
        before = redis.used_memory()
        challenges = []
        for _ in range(args.challenges):
            challenge = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
            key = f"appattest:ch:{{{challenge}}}"
            redis("SET", key, "1", "EX", 300, "NX")
            challenges.append(key)
        per_challenge = (redis.used_memory() - before) / args.challenges
        aof_per_challenge = (sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof")) - aof_start) / args.challenges
        challenge_usage = redis("MEMORY", "USAGE", challenges[0])

        # Disk: what the AOF grows by per verified request (the counter script's effect, HSET)
        # and per challenge (SET EX NX, then GETDEL).
        def aof_bytes() -> int:
            return sum(f.stat().st_size for f in Path(work, "appendonlydir").glob("*.incr.aof"))

        sha = redis("SCRIPT", "LOAD", ADVANCE_COUNTER)
        start = aof_bytes()
        for i, key in enumerate(keys):
            redis("EVALSHA", sha, 1, key, 2000 + i)
        aof_per_assertion = (aof_bytes() - start) / len(keys)
        start = aof_bytes()
        for key in challenges[: args.keys]:
            redis("GETDEL", key)
        aof_per_consume = (aof_bytes() - start) / len(keys)
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)

    print(f"{version}; receipt: {receipt_note}")
    print(f"key record  ({encoding}): MEMORY USAGE median {usage[len(usage) // 2]} B; "
          f"used_memory per record {per_key:.0f} B (over {args.keys})")
    print(f"challenge (string + TTL): MEMORY USAGE {challenge_usage} B; "
          f"used_memory per challenge {per_challenge:.0f} B (over {args.challenges})")
    print(f"AOF growth: {aof_per_assertion:.0f} B per verified request (counter advance), "
          f"{aof_per_challenge:.0f} + {aof_per_consume:.0f} B per challenge issued + consumed, "
          f"{aof_per_key:.0f} B per attested key")
    print(f"=> 1,000,000 attested keys ~ {per_key * 1e6 / 2**30:.2f} GiB; "
          f"300,000 live challenges ~ {per_challenge * 3e5 / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
