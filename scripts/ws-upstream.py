#!/usr/bin/python3
"""A real WebSocket and streaming upstream for the gateway's tests (issue 33).

Runs two servers on loopback, both on free ports; the first stdout line is
`listening WS_PORT SSE_PORT`.

WebSocket server (Debian's python3-websockets, RFC 6455):
    any path        the handshake completes; the first message is JSON
                    {"path": ..., "headers": [[name, value], ...]} (what arrived), then every
                    message is echoed back
    .../refuse...   an upgrade is answered 403 (the gateway must relay it and stay HTTP)
    .../unasked...  every request is answered 101 without a handshake (an upstream switching
                    protocols nobody asked for: the gateway must answer 502)
    .../bad-accept... an upgrade is answered 101 with a Sec-WebSocket-Accept for another key
    /_paths         JSON list of every request path seen so far (not recorded itself)
    a request without Upgrade is answered 200 {"upgrade": false, "path": ...}

Streaming server (plain HTTP/1.1, chunked):
    /events?n=N     server-sent events 0..N-1; event i+1 is sent only after /ack?i=i arrived
                    (so an event held back by a buffering proxy stalls the stream); if no ack
                    comes within 10 s, an `event: timeout` ends it
    /ack?i=I        acknowledges event I (the test's client calls it directly)
    /ticks?n=N&interval=S   N events, S seconds apart
    Each event carries `sent: <time.time() when written>` (an SSE field clients ignore), so the
    client can measure how long the event took to reach it.

Usage: ws-upstream.py [--tls CERT KEY] (Debian's /usr/bin/python3: it needs python3-websockets)
With --tls the WebSocket server speaks TLS (wss) with that certificate; the streaming one stays plain.
"""

import asyncio
import http
import json
import ssl
import sys
import time
import urllib.parse

import websockets
import websockets.datastructures
import websockets.server

paths = []
acks = {}


def ack_event(index):
    event = acks.get(index)
    if event is None:
        event = acks[index] = asyncio.Event()
    return event


async def process_request(path, headers):
    if path == "/_paths":
        return http.HTTPStatus.OK, [("Content-Type", "application/json")], json.dumps(paths).encode()
    paths.append(path)
    upgrade = "upgrade" in headers.get("Connection", "").lower()
    if "/unasked" in path:
        return http.HTTPStatus.SWITCHING_PROTOCOLS, [("Upgrade", "websocket"), ("Connection", "Upgrade")], b""
    if not upgrade:
        body = json.dumps({"upgrade": False, "path": path}).encode()
        return http.HTTPStatus.OK, [("Content-Type", "application/json")], body
    if "/refuse" in path:
        return http.HTTPStatus.FORBIDDEN, [("Content-Type", "text/plain")], b"no\n"
    if "/bad-accept" in path:
        wrong = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        return (
            http.HTTPStatus.SWITCHING_PROTOCOLS,
            [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", wrong)],
            b"",
        )
    return None


async def echo(websocket, path):
    hello = {"path": path, "headers": [[k, v] for k, v in websocket.request_headers.raw_items()]}
    await websocket.send(json.dumps(hello))
    async for message in websocket:
        await websocket.send(message)


async def write_chunk(writer, text):
    data = text.encode()
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
    await writer.drain()


async def stream(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        target = head.split(b" ")[1].decode()
        url = urllib.parse.urlsplit(target)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/ack":
            ack_event(int(query["i"])).set()
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        count = int(query.get("n", "3"))
        if url.path == "/events":
            for index in range(count):
                await write_chunk(writer, "id: %d\nsent: %.6f\ndata: event %d\n\n" % (index, time.time(), index))
                try:
                    await asyncio.wait_for(ack_event(index).wait(), timeout=10)
                except asyncio.TimeoutError:
                    await write_chunk(writer, "event: timeout\ndata: no ack for %d\n\n" % index)
                    break
        else:
            interval = float(query.get("interval", "0.1"))
            for index in range(count):
                if index:
                    await asyncio.sleep(interval)
                await write_chunk(writer, "id: %d\nsent: %.6f\ndata: tick %d\n\n" % (index, time.time(), index))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    context = None
    if len(sys.argv) == 4 and sys.argv[1] == "--tls":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[2], sys.argv[3])
    ws_server = await websockets.serve(echo, "127.0.0.1", 0, process_request=process_request, ssl=context)
    sse_server = await asyncio.start_server(stream, "127.0.0.1", 0)
    ws_port = ws_server.sockets[0].getsockname()[1]
    sse_port = sse_server.sockets[0].getsockname()[1]
    print("listening %d %d" % (ws_port, sse_port), flush=True)
    await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
