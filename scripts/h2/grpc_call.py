#!/usr/bin/python3
"""One unary gRPC call with a real gRPC client (Debian's python3-grpcio; run with /usr/bin/python3).

Usage: grpc_call.py HOST:PORT /package.Service/Method
Calls the method over h2c with an empty request message and prints one JSON object:
    {"code": "UNAUTHENTICATED", "value": 16, "details": "assertion_missing"}
("OK" and the response length when the call succeeds).
"""

import json
import sys

import grpc


def main():
    target, method = sys.argv[1], sys.argv[2]
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            response = call(b"", timeout=10)
            print(json.dumps({"code": "OK", "value": 0, "details": "", "bytes": len(response)}))
        except grpc.RpcError as error:
            code = error.code()
            print(json.dumps({"code": code.name, "value": code.value[0], "details": error.details()}))


if __name__ == "__main__":
    main()
