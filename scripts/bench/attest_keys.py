#!/usr/bin/env python3
"""Attests K simulator keys through the gateway's real endpoints (scripts/bench-enforced.sh).

    attest_keys.py HOST:PORT BENCH_MINT SIM_DIR APP_ID COUNT KEYS_OUT

For each key: POST /app-attest/challenge, then `bench-mint attest` mints a simulated device
key and its attestation over that challenge, then POST /app-attest/attest must answer 201.
Writes the attested key IDs (standard base64), one a line, to KEYS_OUT. Any other answer
stops with exit 1, so the benchmark never runs with a key the gateway did not accept.
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
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    hostport, mint, sim_dir, app_id, count_text, keys_out = sys.argv[1:]
    host, port = hostport.rsplit(":", 1)
    count = int(count_text)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    challenges = []
    for _ in range(count):
        status, body = post(conn, "/app-attest/challenge")
        if status != 200:
            sys.exit(f"attest_keys: challenge: HTTP {status} {body[:200]!r}")
        challenges.append(json.loads(body)["challenge"])

    minted = subprocess.run(
        [mint, "attest", "--dir", sim_dir, "--app-id", app_id, "--environment", "development"],
        input="\n".join(challenges) + "\n", capture_output=True, text=True, check=False)
    if minted.returncode != 0:
        sys.exit(f"attest_keys: bench-mint attest failed: {minted.stderr.strip()}")
    lines = minted.stdout.splitlines()
    if len(lines) != count:
        sys.exit(f"attest_keys: bench-mint attest printed {len(lines)} lines for {count} challenges")

    # Minting can outlast the gateway's keep-alive idle timeout on a busy machine: attest on a
    # fresh connection.
    conn.close()
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    key_ids = []
    for line in lines:
        status, body = post(conn, "/app-attest/attest", line.encode())
        if status != 201:
            sys.exit(f"attest_keys: attest: HTTP {status} {body[:200]!r}")
        key_ids.append(json.loads(line)["key_id"])
    with open(keys_out, "w") as out:
        out.write("\n".join(key_ids) + "\n")
    print(f"# attested {len(key_ids)} simulator keys through /app-attest/challenge + /app-attest/attest")


if __name__ == "__main__":
    main()
