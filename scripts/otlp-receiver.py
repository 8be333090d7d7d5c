#!/usr/bin/env python3
"""A small OTLP/HTTP trace receiver for the tests (docs/operations.md "Traces").

Decodes each POST body with the opentelemetry-proto package (ExportTraceServiceRequest) and
appends one JSON line per span to --out: trace_id, span_id, parent_span_id (hex), name, kind,
start/end (ns), attributes, status code, flags, the resource's attributes, the request's path
and Content-Type. Prints "port N" on stdout once listening.

--mode ok      answer 200 with an empty ExportTraceServiceResponse (the default)
--mode stall   accept connections and read, never answer (a hung collector)
--mode status  answer --status (e.g. 503) to every export

Run it with the venv `make otel-venv` creates: .build/otel-venv/bin/python scripts/otlp-receiver.py
"""
import argparse
import json
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=["ok", "stall", "status"], default="ok")
    parser.add_argument("--status", type=int, default=503)
    args = parser.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if args.mode == "stall":
                time.sleep(3600)
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            lines = []
            for resource_spans in request.resource_spans:
                resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        lines.append(json.dumps({
                            "path": self.path,
                            "content_type": self.headers.get("Content-Type"),
                            "authorization": self.headers.get("Authorization"),
                            "scope": scope_spans.scope.name,
                            "resource": resource,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": {kv.key: value_of(kv.value) for kv in span.attributes},
                            "status_code": span.status.code,
                            "flags": span.flags,
                        }))
            with lock:
                with open(args.out, "a") as out:
                    for line in lines:
                        out.write(line + "\n")
            status = args.status if args.mode == "status" else 200
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", args.port), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
