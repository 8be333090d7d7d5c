#!/usr/bin/python3
"""The doors check's Flask upstream (Debian's python3-flask; run with /usr/bin/python3).

    /usr/bin/python3 flask-upstream.py RECORD_FILE

Listens on a free loopback port (Werkzeug's threaded server) and prints `listening
127.0.0.1:PORT` first. Every request that reaches it appends one JSON line to RECORD_FILE before
the answer is sent:
    {"upstream": "flask", "id": <X-Doors-Id>, "handler": <name or null>, "protected": bool,
     "method": <method after the overrides>, "wire_method": <method on the wire>,
     "target": <path?query>, "headers": [[name, value], ...] (as Flask's request.headers has them;
     Werkzeug joins repeated fields with ",")}
`handler` null: no view ran (404, 405), the request still reached this upstream.

Method overrides ON: Flask's documented HTTPMethodOverrideMiddleware (the "Adding HTTP Method
Overrides" pattern, copied as the docs print it: X-HTTP-Method-Override, upper-cased, any
original method), and a `_method` field in a POST form body (urlencoded or multipart) as Rails'
Rack::MethodOverride and Laravel do.
"""

import io
import json
import sys
import threading

from flask import Flask, jsonify, request
from werkzeug.formparser import parse_form_data
from werkzeug.serving import make_server


class HTTPMethodOverrideMiddleware(object):
    """Flask's documentation, patterns/methodoverrides, verbatim."""

    allowed_methods = frozenset(["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"])
    bodyless_methods = frozenset(["GET", "HEAD", "OPTIONS", "DELETE"])

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        method = environ.get("HTTP_X_HTTP_METHOD_OVERRIDE", "").upper()
        if method in self.allowed_methods:
            environ["REQUEST_METHOD"] = method
        if method in self.bodyless_methods:
            environ["CONTENT_LENGTH"] = "0"
        return self.app(environ, start_response)


class FormMethodOverrideMiddleware(object):
    """Rails' Rack::MethodOverride / Laravel: on a POST whose body is a form
    (application/x-www-form-urlencoded or multipart/form-data), the `_method` field, upper-cased,
    becomes the method when it is one Rack allows."""

    allowed_methods = frozenset(["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "LINK", "UNLINK"])

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        content_type = environ.get("CONTENT_TYPE", "").lower()
        if environ.get("REQUEST_METHOD") == "POST" and content_type.startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")
        ):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length) if length > 0 else b""
            probe = dict(environ)
            probe["wsgi.input"] = io.BytesIO(body)
            _, form, _ = parse_form_data(probe)
            method = form.get("_method", "").upper()
            if method in self.allowed_methods:
                environ["REQUEST_METHOD"] = method
            environ["wsgi.input"] = io.BytesIO(body)
        return self.app(environ, start_response)


class Recorder(object):
    """Outermost: one JSON line per request that reached this process, written before the
    response leaves; the view (if one ran) names itself in the environ."""

    def __init__(self, app, path):
        self.app = app
        self.path = path
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        environ["doors.wire_method"] = environ.get("REQUEST_METHOD")
        result = self.app(environ, start_response)
        query = environ.get("QUERY_STRING", "")
        line = {
            "upstream": "flask",
            "id": environ.get("HTTP_X_DOORS_ID"),
            "handler": environ.get("doors.handler"),
            "protected": bool(environ.get("doors.protected")),
            "method": environ.get("doors.method", environ.get("REQUEST_METHOD")),
            "wire_method": environ["doors.wire_method"],
            "target": environ.get("RAW_URI") or (environ.get("PATH_INFO", "") + ("?" + query if query else "")),
            "headers": environ.get("doors.headers") or self.headers(environ),
        }
        with self.lock, open(self.path, "a") as out:
            out.write(json.dumps(line) + "\n")
        return result

    @staticmethod
    def headers(environ):
        out = []
        for key, value in environ.items():
            if key.startswith("HTTP_"):
                out.append([key[5:].replace("_", "-").title(), value])
            elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
                out.append([key.replace("_", "-").title(), value])
        return out


app = Flask(__name__)


def view(name, protected):
    def handle(rest=None):
        environ = request.environ
        environ["doors.handler"] = name
        environ["doors.protected"] = protected
        environ["doors.method"] = request.method
        environ["doors.headers"] = [[k, v] for k, v in request.headers.items()]
        return jsonify(upstream="flask", handler=name)

    handle.__name__ = "view_" + name.replace("-", "_")
    return handle


# Protected handlers: the policy enforces App Attest on these.
app.add_url_rule("/buy", view_func=view("buy", True), methods=["POST"])
app.add_url_rule("/item", view_func=view("item-delete", True), methods=["DELETE"])
app.add_url_rule("/item", view_func=view("item-put", True), methods=["PUT"], endpoint="item_put")
app.add_url_rule("/v1/admin/<path:rest>", view_func=view("v1-admin", True), methods=["GET"])
app.add_url_rule("/v1/head/<path:rest>", view_func=view("v1-head", True), methods=["POST"])
app.add_url_rule("/v1/<path:rest>", view_func=view("v1", True), methods=["GET"])
app.add_url_rule("/cs/<path:rest>", view_func=view("cs", True), methods=["GET"])
# Open handlers.
app.add_url_rule("/public/<path:rest>", view_func=view("public", False), methods=["GET"])
app.add_url_rule("/", view_func=view("root", False), methods=["GET"])

app.wsgi_app = HTTPMethodOverrideMiddleware(app.wsgi_app)
app.wsgi_app = FormMethodOverrideMiddleware(app.wsgi_app)


def main():
    if len(sys.argv) != 2:
        print("usage: flask-upstream.py RECORD_FILE", file=sys.stderr)
        sys.exit(2)
    server = make_server("127.0.0.1", 0, Recorder(app.wsgi_app, sys.argv[1]), threaded=True)
    print("listening 127.0.0.1:%d" % server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
