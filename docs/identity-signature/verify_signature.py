import base64, hashlib, hmac, subprocess, tempfile, time

def canonical(method, target, headers, t, alg, kid):
    """The bytes attest-gateway signed: headers is a list of (name, value) as received."""
    covered = sorted(((n.lower(), v.strip(" \t")) for n, v in headers
                      if n.lower().startswith("x-app-attest-") and n.lower() != "x-app-attest-signature"),
                     key=lambda field: field[0])
    lines = ["attest-gateway-signature-v1", t, alg, kid, method, target] + [f"{n}:{v}" for n, v in covered]
    return ("\n".join(lines) + "\n").encode()

def verify_signature(method, target, headers, keys, max_age=300, now=None):
    """keys: {kid: ("hmac-sha256", secret_bytes) | ("es256", public_key_pem_bytes)}.
    Returns the signing time; raises ValueError when the request is not the gateway's."""
    values = [v for n, v in headers if n.lower() == "x-app-attest-signature"]
    if len(values) != 1:
        raise ValueError("expected exactly one X-App-Attest-Signature")
    p = dict(part.strip().split("=", 1) for part in values[0].split(","))
    t, kid, alg, sig = p["t"], p["kid"], p["alg"], base64.urlsafe_b64decode(p["sig"] + "==")
    if kid not in keys or keys[kid][0] != alg:
        raise ValueError(f"unknown kid {kid!r} or wrong alg {alg!r}")
    if abs((now or time.time()) - int(t)) > max_age:
        raise ValueError("signature too old (or clock skew)")
    message = canonical(method, target, headers, t, alg, kid)
    if alg == "hmac-sha256":
        ok = hmac.compare_digest(hmac.new(keys[kid][1], message, hashlib.sha256).digest(), sig)
    else:
        ok = es256_verify(keys[kid][1], message, sig)
    if not ok:
        raise ValueError("bad signature")
    return int(t)

def es256_verify(public_pem, message, sig):
    if len(sig) != 64:
        return False
    r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        key = serialization.load_pem_public_key(public_pem)
        try:
            key.verify(utils.encode_dss_signature(r, s), message, ec.ECDSA(hashes.SHA256()))
            return True
        except InvalidSignature:
            return False
    except ImportError:  # no `cryptography`: the openssl CLI, with r ‖ s as DER by hand
        def integer(x):
            b = x.to_bytes(33, "big").lstrip(b"\0")
            b = b"\0" + b if b[0] & 0x80 else b
            return b"\x02" + bytes([len(b)]) + b
        body = integer(r) + integer(s)
        with tempfile.TemporaryDirectory() as d:
            open(f"{d}/k.pem", "wb").write(public_pem)
            open(f"{d}/sig", "wb").write(b"\x30" + bytes([len(body)]) + body)
            run = subprocess.run(["openssl", "dgst", "-sha256", "-verify", f"{d}/k.pem", "-signature", f"{d}/sig"],
                                 input=message, capture_output=True)
            return run.returncode == 0
