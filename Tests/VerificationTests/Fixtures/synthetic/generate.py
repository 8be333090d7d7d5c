#!/usr/bin/env python3
"""Generates synthetic_attestations.json: App Attest objects under a throwaway test CA,
each breaking exactly one check (or none), for the shapes real vectors do not cover
(extensions map after the COSE key with and without flag ED, assertion extensions,
counter/AAGUID/credentialId/nonce-extension failures, untrusted chains).

Run once; the output is committed (keys are random, so reruns change the bytes).
Needs python3-cryptography. Usage: python3 generate.py > ../synthetic_attestations.json
"""
import base64, datetime, hashlib, json, struct
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

APP_ID = "ABCDE12345.com.example.app"
NOT_BEFORE = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
NOT_AFTER = datetime.datetime(2035, 1, 1, tzinfo=datetime.timezone.utc)
VALID_AT = "2026-06-01T00:00:00Z"
PROD = b"appattest" + b"\x00" * 7
DEV = b"appattestdevelop"

def b64(b): return base64.b64encode(b).decode()
def sha(b): return hashlib.sha256(b).digest()

# --- minimal CBOR encoder (definite lengths) ---
def head(major, n):
    if n < 24: return bytes([major << 5 | n])
    if n < 256: return bytes([major << 5 | 24, n])
    if n < 65536: return bytes([major << 5 | 25]) + struct.pack(">H", n)
    return bytes([major << 5 | 26]) + struct.pack(">I", n)
def cbor(v):
    if isinstance(v, bool): return b"\xf5" if v else b"\xf4"
    if isinstance(v, int): return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes): return head(2, len(v)) + v
    if isinstance(v, str): e = v.encode(); return head(3, len(e)) + e
    if isinstance(v, list): return head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict): return head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(v)

def name(cn): return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

def ca(cn, key, issuer_name=None, issuer_key=None):
    builder = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(issuer_name or name(cn))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOT_BEFORE).not_valid_after(NOT_AFTER)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False, decipher_only=False), critical=True))
    return builder.sign(issuer_key or key, hashes.SHA384())

root_key = ec.generate_private_key(ec.SECP384R1())
root = ca("Synthetic App Attest Test Root", root_key)
inter_key = ec.generate_private_key(ec.SECP384R1())
inter = ca("Synthetic App Attest Test CA 1", inter_key, root.subject, root_key)
rogue_key = ec.generate_private_key(ec.SECP384R1())
rogue = ca("Rogue CA", rogue_key)

def point(key):
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)

def cose(key):
    p = point(key)
    return cbor({1: 2, 3: -7, -1: 1, -2: p[1:33], -3: p[33:65]})

EXTENSIONS = cbor({"apple_bundle_version_01": "1", "apple_validation_category_01": b"\x03\x00\x00\x00"})

def leaf(key, nonce_ext, not_before=NOT_BEFORE, issuer=inter, issuer_key=inter_key, not_after=NOT_AFTER):
    builder = (x509.CertificateBuilder().subject_name(name(sha(point(key)).hex())).issuer_name(issuer.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after))
    if nonce_ext is not None:
        builder = builder.add_extension(x509.UnrecognizedExtension(x509.ObjectIdentifier("1.2.840.113635.100.8.2"), nonce_ext),
                                        critical=False)
    return builder.sign(issuer_key, hashes.SHA256())

def nonce_der(nonce):
    octet = b"\x04" + bytes([len(nonce)]) + nonce
    tagged = b"\xa1" + bytes([len(octet)]) + octet
    return b"\x30" + bytes([len(tagged)]) + tagged

def attestation(case, **o):
    key = ec.generate_private_key(ec.SECP256R1())
    key_id = sha(point(key))
    client_data_hash = sha(b"challenge-" + case.encode())
    flags = o.get("flags", 0x40)
    auth = sha(o.get("rp_app_id", APP_ID).encode()) + bytes([flags]) + struct.pack(">I", o.get("counter", 0))
    cred_id = o.get("credential_id", key_id)
    auth += o.get("aaguid", PROD) + struct.pack(">H", len(cred_id)) + cred_id + cose(key) + o.get("trailing", b"")
    nonce = sha(auth + client_data_hash)
    if o.get("wrong_nonce"): nonce = sha(nonce)
    ext = None if o.get("no_nonce_extension") else nonce_der(nonce)
    issuer, issuer_key = (rogue, rogue_key) if (o.get("rogue") or o.get("rogue_leaf")) else (inter, inter_key)
    cert = leaf(key, ext, o.get("not_before", NOT_BEFORE), issuer, issuer_key, o.get("not_after", NOT_AFTER))
    chain = [cert.public_bytes(serialization.Encoding.DER)]
    if not o.get("leaf_only"):
        # rogue_leaf: leaf signed by the rogue CA but presented with the real intermediate.
        chain.append((rogue if o.get("rogue") else inter).public_bytes(serialization.Encoding.DER))
    obj = cbor({"fmt": o.get("fmt", "apple-appattest"), "attStmt": {"x5c": chain, "receipt": b"\x30\x80synthetic"}, "authData": auth})
    vector = {"id": "syn-att-" + case, "app_id": APP_ID, "key_id": b64(key_id), "client_data_hash": b64(client_data_hash),
              "attestation": b64(obj), "valid_at": VALID_AT, "required_environment": o.get("require", "any"),
              "expected_result": "valid" if o.get("code") is None else "invalid", "expected_error": o.get("code"),
              "environment": "development" if o.get("aaguid") == DEV else "production",
              "public_key_x962": b64(point(key)), "authdata_len": len(auth)}
    if o.get("expired_at"):
        vector["expired_at"] = o["expired_at"]
    return vector, key

def assertion(case, key, counter, flags=0x40, trailing=b"", code=None, previous=0):
    client_data = ("appattest-v1\nGET\n/v1/x\n%s\n" % sha(b"").hex()).encode()
    auth = sha(APP_ID.encode()) + bytes([flags]) + struct.pack(">I", counter) + trailing
    nonce = sha(auth + sha(client_data))
    signature = key.sign(nonce, ec.ECDSA(hashes.SHA256()))
    return {"id": "syn-asr-" + case, "app_id": APP_ID, "client_data": b64(client_data),
            "assertion": b64(cbor({"signature": signature, "authenticatorData": auth})),
            "public_key_x962": b64(point(key)), "previous_counter": previous, "expected_counter": counter,
            "expected_result": "valid" if code is None else "invalid", "expected_error": code}

atts, asrs = [], []
def add(case, **o):
    v, key = attestation(case, **o)
    atts.append(v)
    return key

key = add("valid-production")
asrs.append(assertion("plain", key, 1))
asrs.append(assertion("ext-no-ed", key, 2, 0x40, EXTENSIONS))
asrs.append(assertion("ext-ed", key, 3, 0xc0, EXTENSIONS))
asrs.append(assertion("ext-no-at", key, 4, 0x00, EXTENSIONS))
asrs.append(assertion("ed-without-ext", key, 5, 0xc0, b"", "malformed_authenticator_data"))
asrs.append(assertion("trailing-garbage", key, 6, 0x40, b"\x00", "malformed_authenticator_data"))
asrs.append(assertion("replay", key, 7, 0x40, b"", "counter_not_increasing", previous=7))
add("valid-development", aaguid=DEV)
add("ext-no-ed", trailing=EXTENSIONS)
add("ext-with-ed", flags=0xc0, trailing=EXTENSIONS)
add("ext-dev-no-ed", aaguid=DEV, trailing=EXTENSIONS)
add("ed-without-ext", flags=0xc0, code="malformed_authenticator_data")
add("trailing-not-map", trailing=b"\x01", code="malformed_authenticator_data")
add("trailing-after-ext", trailing=EXTENSIONS + b"\x00", code="malformed_authenticator_data")
add("counter-not-zero", counter=1, code="counter_not_zero")
add("unknown-aaguid", aaguid=b"appattestxxxxxxx", code="unknown_aaguid")
add("credential-id", credential_id=b"\x01" * 32, code="credential_id_mismatch")
add("missing-nonce-extension", no_nonce_extension=True, code="missing_nonce_extension")
add("wrong-nonce", wrong_nonce=True, code="nonce_mismatch")
add("fmt-packed", fmt="packed", code="unsupported_format")
add("rogue-ca", rogue=True, code="certificate_chain_invalid")
add("rogue-leaf-real-intermediate", rogue_leaf=True, code="certificate_chain_invalid")
# Valid in 2026; in 2036 the leaf is still valid but the intermediate and root are not.
add("leaf-outlives-ca", not_after=datetime.datetime(2040, 1, 1, tzinfo=datetime.timezone.utc), expired_at="2036-01-01T00:00:00Z")
add("leaf-only", leaf_only=True, code="certificate_chain_invalid")
add("not-yet-valid", not_before=datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc), code="certificate_expired")
add("app-id", rp_app_id="ZZZZZ99999.com.example.other", code="app_id_mismatch")
add("env-production-required", aaguid=DEV, require="production", code="environment_mismatch")
add("env-development-required", require="development", code="environment_mismatch")

print(json.dumps({"meta": {"generated_by": "synthetic/generate.py", "trust_root_pem": root.public_bytes(serialization.Encoding.PEM).decode(),
                           "note": "test CA only; verify with trust_root_pem as an additional root"},
                  "attestations": atts, "assertions": asrs}, indent=1))
