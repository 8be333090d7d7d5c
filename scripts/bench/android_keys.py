#!/usr/bin/env python3
"""Enrolls K simulated Android keys through the gateway's real endpoints (scripts/bench-android.sh).

    android_keys.py HOST:PORT BENCH_MINT SIM_DIR COUNT KEYS_OUT

For each key: POST /app-attest/challenge, then `bench-mint android-enroll` mints a simulated
Keystore key and its chain under SIM_DIR's Android test root with that challenge, then
POST /app-attest/attest (`"platform": "android"`) must answer 201 with the key's ID. Writes
bench-mint's key lines ("<key ID> <base64 PEM>", the input of `bench-mint android-assert`) to
KEYS_OUT. Any other answer stops with exit 1, so the benchmark never runs with a key the gateway
did not accept. The Android twin of attest_keys.py (both on enrollment.py).
"""
import sys

import enrollment


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    hostport, mint, sim_dir, count_text, keys_out = sys.argv[1:]
    count = int(count_text)
    challenges = enrollment.challenges(hostport, count, "android_keys", timeout=30)
    bodies = enrollment.mint([mint, "android-enroll", "--dir", sim_dir, "--keys-out", keys_out],
                             challenges, "android_keys")
    key_ids = [line.split(" ", 1)[0] for line in open(keys_out).read().splitlines() if line]
    if len(bodies) != count or len(key_ids) != count:
        sys.exit(f"android_keys: bench-mint printed {len(bodies)} bodies and {len(key_ids)} keys for {count} challenges")
    answers = enrollment.attest(hostport, bodies, "android_keys", timeout=30)
    for answer, key_id in zip(answers, key_ids):
        if answer.get("key_id") != key_id:
            sys.exit(f"android_keys: the gateway enrolled {answer!r:.200}, expected key {key_id}")
    print(f"# enrolled {count} simulated Android keys through /app-attest/challenge + /app-attest/attest")


if __name__ == "__main__":
    main()
