#!/usr/bin/env python3
"""Attests K simulator keys through the gateway's real endpoints (scripts/bench-enforced.sh).

    attest_keys.py HOST:PORT BENCH_MINT SIM_DIR APP_ID COUNT KEYS_OUT

For each key: POST /app-attest/challenge, then `bench-mint attest` mints a simulated device
key and its attestation over that challenge, then POST /app-attest/attest must answer 201.
Writes the attested key IDs (standard base64), one a line, to KEYS_OUT. Any other answer
stops with exit 1, so the benchmark never runs with a key the gateway did not accept.
"""
import json
import sys

import enrollment


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    hostport, mint, sim_dir, app_id, count_text, keys_out = sys.argv[1:]
    count = int(count_text)
    challenges = enrollment.challenges(hostport, count, "attest_keys", timeout=10)
    lines = enrollment.mint([mint, "attest", "--dir", sim_dir, "--app-id", app_id, "--environment", "development"],
                            challenges, "attest_keys")
    if len(lines) != count:
        sys.exit(f"attest_keys: bench-mint attest printed {len(lines)} lines for {count} challenges")
    enrollment.attest(hostport, lines, "attest_keys", timeout=10)
    key_ids = [json.loads(line)["key_id"] for line in lines]
    with open(keys_out, "w") as out:
        out.write("\n".join(key_ids) + "\n")
    print(f"# attested {len(key_ids)} simulator keys through /app-attest/challenge + /app-attest/attest")


if __name__ == "__main__":
    main()
