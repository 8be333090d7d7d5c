#!/usr/bin/python3
"""gRPC calls with a real gRPC client (Debian's python3-grpcio; run with /usr/bin/python3) for
the gateway's HTTP/2 upstream tests.

Usage: grpc_client.py HOST:PORT METHOD MODE [BODY] [METADATA_JSON]
  MODE unary        one unary call with BODY (text) and METADATA_JSON ([[name, value], ...])
  MODE stream       one server-streaming call
  MODE concurrent:N N unary calls at once (threads), each with BODY
Prints one JSON object: {"code", "value", "details", "response" (text, or a list for stream),
"trailers" ([[name, value], ...])}; for concurrent: {"ok": n, "codes": [...]}.
"""

import json
import sys
from concurrent import futures

import grpc


def outcome(call_result=None, error=None, call=None):
    if error is not None:
        code = error.code()
        trailers = [[k, v] for k, v in (error.trailing_metadata() or [])]
        return {"code": code.name, "value": code.value[0], "details": error.details(), "trailers": trailers}
    response, info = call_result
    trailers = [[k, v] for k, v in (info.trailing_metadata() or [])]
    return {"code": "OK", "value": 0, "details": "", "response": response, "trailers": trailers}


def main():
    target, method, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    body = sys.argv[4].encode() if len(sys.argv) > 4 else b""
    metadata = [tuple(pair) for pair in json.loads(sys.argv[5])] if len(sys.argv) > 5 else []
    with grpc.insecure_channel(target) as channel:
        if mode == "unary":
            call = channel.unary_unary(method)
            try:
                response, info = call.with_call(body, metadata=metadata, timeout=10)
                print(json.dumps(outcome((response.decode(errors="replace"), info))))
            except grpc.RpcError as error:
                print(json.dumps(outcome(error=error)))
        elif mode == "stream":
            call = channel.unary_stream(method)
            responses = call(body, metadata=metadata, timeout=10)
            try:
                items = [item.decode(errors="replace") for item in responses]
                print(json.dumps(outcome((items, responses))))
            except grpc.RpcError as error:
                print(json.dumps(outcome(error=error)))
        elif mode.startswith("concurrent:"):
            count = int(mode.split(":")[1])
            call = channel.unary_unary(method)

            def one(index):
                try:
                    call(body, metadata=metadata, timeout=20)
                    return "OK"
                except grpc.RpcError as error:
                    return error.code().name + ": " + str(error.details())

            with futures.ThreadPoolExecutor(max_workers=count) as pool:
                codes = list(pool.map(one, range(count)))
            print(json.dumps({"ok": codes.count("OK"), "codes": codes}))


if __name__ == "__main__":
    main()
