#!/usr/bin/python3
"""A real gRPC server (Debian's python3-grpcio; run with /usr/bin/python3) as an h2c upstream
for the gateway's tests.

Usage: grpc_upstream.py [--max-concurrent-streams N] [--tls CERT_CHAIN KEY]
Listens on 127.0.0.1 on a free port (h2c, or HTTP/2 over TLS with ALPN h2 with --tls), prints "PORT <n>" on one line, serves until stdin closes.
Methods (raw bytes, no protobuf):
  /test.Echo/Unary       answers a JSON object: the request's length and the metadata it saw
  /test.Echo/Stream      server-streaming: the request's text as a count n, then n messages "i"
  /test.Echo/NotFound    fails with NOT_FOUND "no such thing"
  /test.Echo/Slow        waits 0.3 s, then answers the request's bytes (for concurrency tests)
"""

import json
import sys
import threading
import time
from concurrent import futures

import grpc


def unary(request, context):
    metadata = [[key, value if isinstance(value, str) else "<binary>"] for key, value in context.invocation_metadata()]
    return json.dumps({"bytes": len(request), "metadata": metadata}).encode()


def stream(request, context):
    count = int(request.decode() or "3")
    for index in range(count):
        yield str(index).encode()


def not_found(request, context):
    context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def slow(request, context):
    time.sleep(0.3)
    return request


HANDLERS = {
    "Unary": grpc.unary_unary_rpc_method_handler(unary),
    "Stream": grpc.unary_stream_rpc_method_handler(stream),
    "NotFound": grpc.unary_unary_rpc_method_handler(not_found),
    "Slow": grpc.unary_unary_rpc_method_handler(slow),
}


def main():
    options = []
    arguments = sys.argv[1:]
    tls = None
    while arguments:
        if arguments[0] == "--max-concurrent-streams":
            options.append(("grpc.max_concurrent_streams", int(arguments[1])))
            arguments = arguments[2:]
        elif arguments[0] == "--tls":
            with open(arguments[1], "rb") as chain, open(arguments[2], "rb") as key:
                tls = grpc.ssl_server_credentials([(key.read(), chain.read())])
            arguments = arguments[3:]
        else:
            sys.exit("unknown argument " + arguments[0])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=options)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", HANDLERS),))
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", tls)
    server.start()
    print("PORT %d" % port, flush=True)
    stopped = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stopped.set()), daemon=True).start()
    stopped.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
