#!/usr/bin/env python3
"""Enrolls K simulated Android keys through the gateway's real endpoints (scripts/bench-android.sh).

    android_keys.py HOST:PORT BENCH_MINT SIM_DIR COUNT KEYS_OUT

For each key: POST /app-attest/challenge, then `bench-mint android-enroll` mints a simulated
Keystore key and its chain under SIM_DIR's Android test root with that challenge, then
POST /app-attest/attest (`"platform": "android"`) must answer 201 with the key's ID. Writes
bench-mint's key lines ("<key ID> <base64 PEM>", the input of `bench-mint android-assert`) to
KEYS_OUT. Any other answer stops with exit 1, so the benchmark never runs with a key the gateway
did not accept. The Android twin of attest_keys.py.
"""
import http.client
import json
import subprocess
import sys


def post(conn, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    hostport, mint, sim_dir, count_text, keys_out = sys.argv[1:]
    host, port = hostport.rsplit(":", 1)
    count = int(count_text)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    challenges = []
    for _ in range(count):
        status, body = post(conn, "/app-attest/challenge")
        if status != 200:
            sys.exit(f"android_keys: challenge: HTTP {status} {body[:200]!r}")
        challenges.append(json.loads(body)["challenge"])
    minted = subprocess.run(
        [mint, "android-enroll", "--dir", sim_dir, "--keys-out", keys_out],
        input="\n".join(challenges) + "\n", capture_output=True, text=True, check=False)
    if minted.returncode != 0:
        sys.exit(f"android_keys: bench-mint android-enroll failed: {minted.stderr.strip()}")
    bodies = minted.stdout.splitlines()
    key_ids = [line.split(" ", 1)[0] for line in open(keys_out).read().splitlines() if line]
    if len(bodies) != count or len(key_ids) != count:
        sys.exit(f"android_keys: bench-mint printed {len(bodies)} bodies and {len(key_ids)} keys for {count} challenges")
    conn.close()
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    for body, key_id in zip(bodies, key_ids):
        status, answer = post(conn, "/app-attest/attest", body.encode())
        if status != 201:
            sys.exit(f"android_keys: attest: HTTP {status} {answer[:300]!r}")
        if json.loads(answer).get("key_id") != key_id:
            sys.exit(f"android_keys: the gateway enrolled {answer[:200]!r}, expected key {key_id}")
    print(f"# enrolled {count} simulated Android keys through /app-attest/challenge + /app-attest/attest")


if __name__ == "__main__":
    main()
