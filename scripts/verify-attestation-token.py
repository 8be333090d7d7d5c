#!/usr/bin/env python3
"""Verifies attest-gateway attestation tokens the way a service the gateway does not front
would: with off-the-shelf JOSE libraries that fetch the gateway's JWKS over HTTP.

    verify-attestation-token.py JWKS_URL ISSUER AUDIENCE TOKEN [REFUSED_TOKEN ...]

TOKEN must verify with both PyJWT and jwcrypto (ES256 only, exact issuer and audience, exp
required); every REFUSED_TOKEN must be refused by both. Prints one JSON object:
{"pyjwt": claims, "jwcrypto": claims, "refused": [{"pyjwt": error, "jwcrypto": error}, ...]}
and exits 1 when any expectation fails. Run it under Debian's /usr/bin/python3 (python3-jwt,
python3-jwcrypto; `make deps` installs them).
"""
import json
import sys
import urllib.request

import jwt  # PyJWT
from jwcrypto import jwk
from jwcrypto import jwt as jwcrypto_jwt


def with_pyjwt(jwks_url, issuer, audience, token):
    signing_key = jwt.PyJWKClient(jwks_url).get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        signing_key.key,
        algorithms=["ES256"],
        audience=audience,
        issuer=issuer,
        options={"require": ["exp", "iat", "iss", "aud", "sub", "jti"]},
    )


def with_jwcrypto(keys, issuer, audience, token):
    checked = jwcrypto_jwt.JWT(
        jwt=token, key=keys, algs=["ES256"], check_claims={"iss": issuer, "aud": audience, "exp": None}
    )
    return json.loads(checked.claims)


def refusal(function, *arguments):
    try:
        function(*arguments)
    except Exception as error:  # any refusal counts; the name says which
        return type(error).__name__
    return None


def main():
    jwks_url, issuer, audience, token = sys.argv[1:5]
    refused_tokens = sys.argv[5:]
    with urllib.request.urlopen(jwks_url, timeout=10) as response:
        keys = jwk.JWKSet.from_json(response.read())
    result = {
        "pyjwt": with_pyjwt(jwks_url, issuer, audience, token),
        "jwcrypto": with_jwcrypto(keys, issuer, audience, token),
        "refused": [
            {
                "pyjwt": refusal(with_pyjwt, jwks_url, issuer, audience, bad),
                "jwcrypto": refusal(with_jwcrypto, keys, issuer, audience, bad),
            }
            for bad in refused_tokens
        ],
    }
    print(json.dumps(result, sort_keys=True))
    accepted = [entry for entry in result["refused"] if entry["pyjwt"] is None or entry["jwcrypto"] is None]
    return 1 if accepted else 0


if __name__ == "__main__":
    sys.exit(main())
