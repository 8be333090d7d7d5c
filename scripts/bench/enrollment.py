"""What attest_keys.py, android_keys.py and challenges.py share: the gateway's enrollment
endpoints (POST /app-attest/challenge, POST /app-attest/attest) and bench-mint's minting.
Every unexpected answer stops the caller with exit 1 and a message naming it (WHO)."""
import http.client
import json
import subprocess
import sys


def connect(hostport, timeout):
    host, port = hostport.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def post(conn, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def challenges(hostport, count, who, timeout):
    """COUNT fresh challenges, over one keep-alive connection."""
    conn = connect(hostport, timeout)
    out = []
    for _ in range(count):
        status, body = post(conn, "/app-attest/challenge")
        if status != 200:
            sys.exit(f"{who}: challenge: HTTP {status} {body[:200]!r}")
        out.append(json.loads(body)["challenge"])
    conn.close()
    return out


def mint(command, challenge_list, who):
    """bench-mint COMMAND... with the challenges on stdin, one a line: its stdout's lines."""
    minted = subprocess.run(command, input="\n".join(challenge_list) + "\n", capture_output=True,
                            text=True, check=False)
    if minted.returncode != 0:
        sys.exit(f"{who}: bench-mint {command[1]} failed: {minted.stderr.strip()}")
    return minted.stdout.splitlines()


def attest(hostport, bodies, who, timeout):
    """POSTs each body to /app-attest/attest, each must answer 201; the answers' JSON objects.
    A fresh connection: minting can outlast the gateway's keep-alive idle timeout on a busy
    machine."""
    conn = connect(hostport, timeout)
    answers = []
    for body in bodies:
        status, answer = post(conn, "/app-attest/attest", body.encode())
        if status != 201:
            sys.exit(f"{who}: attest: HTTP {status} {answer[:300]!r}")
        answers.append(json.loads(answer))
    conn.close()
    return answers
