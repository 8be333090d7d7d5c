#!/usr/bin/python3
"""WebSocket and streaming clients for the gateway's end-to-end tests (issue 33), on Debian's
python3-websockets. Each command prints one JSON object per line on stdout.

  echo URL [--header NAME:VALUE ...] [--messages N]
      Connects; prints {"status": 101, "hello": <the upstream's first message>, "echoes": [...]}
      after N round trips, or {"status": S} when the handshake is answered with S.
  hold URL [--every SECONDS] [--duration SECONDS]
      Connects, prints {"ready": true}, then sends a message every SECONDS and prints
      {"echo": i} for each answer, until the tunnel closes or DURATION passes; then
      {"closed": CODE, "echoes": N} (1000: a clean close by us, 1006: the connection dropped).
  many PORT PATH --addresses A,B,... --per-address N
      Opens N tunnels from each source address at once, holds them all, then sends one message
      on each; prints {"opened": {addr: n}, "refused": {addr: {status: n}}, "echoed": n}.
  raw PORT PAYLOAD_FILE
      Sends the file's bytes in one write and prints {"received": <text>} of everything answered
      until the gateway closes or 3 s of silence.
  sse PORT PATH ACK_PORT
      GETs PATH through the gateway, reads the chunked event stream as it comes and, after each
      event, calls ACK_PORT's /ack?i=<id> directly; prints {"events": [...], "complete": bool}.
      Each event's "latency_ms" is its arrival (when the chunk that completed it was read) minus
      the upstream's `sent` timestamp.
"""

import argparse
import asyncio
import json
import socket
import sys
import time
import urllib.request

import websockets
import websockets.exceptions


def emit(obj):
    print(json.dumps(obj), flush=True)


def headers_of(values):
    return [tuple(value.split(":", 1)) for value in values or []]


async def echo(args):
    try:
        async with websockets.connect(args.url, extra_headers=headers_of(args.header), open_timeout=10) as ws:
            hello = json.loads(await ws.recv())
            echoes = []
            for index in range(args.messages):
                await ws.send("message %d" % index)
                echoes.append(await ws.recv())
            emit({"status": 101, "hello": hello, "echoes": echoes})
    except websockets.exceptions.InvalidStatusCode as error:
        emit({"status": error.status_code})


async def hold(args):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.duration
    echoes = 0
    code = None
    try:
        async with websockets.connect(args.url, open_timeout=10, ping_interval=None) as ws:
            await ws.recv()
            emit({"ready": True})
            try:
                while loop.time() < deadline:
                    await ws.send("tick %d" % echoes)
                    await asyncio.wait_for(ws.recv(), timeout=5)
                    echoes += 1
                    emit({"echo": echoes})
                    await asyncio.sleep(args.every)
            except websockets.exceptions.ConnectionClosed as closed:
                code = closed.code
            if code is None:
                await ws.close()
                code = ws.close_code
    except websockets.exceptions.ConnectionClosed as closed:
        code = closed.code
    emit({"closed": code, "echoes": echoes})


async def many(args):
    addresses = args.addresses.split(",")
    opened = {address: 0 for address in addresses}
    refused = {address: {} for address in addresses}
    sockets = []

    async def open_one(address):
        url = "ws://127.0.0.1:%d%s" % (args.port, args.path)
        try:
            ws = await websockets.connect(url, local_addr=(address, 0), open_timeout=20, ping_interval=None)
            await ws.recv()
            opened[address] += 1
            sockets.append(ws)
        except websockets.exceptions.InvalidStatusCode as error:
            key = str(error.status_code)
            refused[address][key] = refused[address].get(key, 0) + 1
        except (OSError, asyncio.TimeoutError, websockets.exceptions.InvalidHandshake) as error:
            key = type(error).__name__
            refused[address][key] = refused[address].get(key, 0) + 1

    await asyncio.gather(*(open_one(address) for address in addresses for _ in range(args.per_address)))

    async def round_trip(ws, index):
        await ws.send("n%d" % index)
        return await asyncio.wait_for(ws.recv(), timeout=20) == "n%d" % index

    results = await asyncio.gather(*(round_trip(ws, i) for i, ws in enumerate(sockets)), return_exceptions=True)
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    emit({"opened": opened, "refused": refused, "echoed": sum(1 for r in results if r is True)})


def raw(args):
    payload = open(args.payload, "rb").read()
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=3)
    sock.sendall(payload)
    received = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            received += data
    except socket.timeout:
        pass
    sock.close()
    emit({"received": received.decode("latin-1")})


def sse(args):
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=15)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n\r\n" % args.path).encode())
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            emit({"events": [], "complete": False, "head": buffer.decode("latin-1")})
            return
        buffer += data
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    events = []
    text = b""
    complete = False
    while True:
        # One chunk: size line, data, CRLF (the gateway re-frames; an event may span chunks).
        while b"\r\n" not in buffer:
            data = sock.recv(65536)
            if not data:
                emit({"events": events, "complete": False})
                return
            buffer += data
        size_line, buffer = buffer.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        while len(buffer) < size + 2:
            data = sock.recv(65536)
            if not data:
                emit({"events": events, "complete": False})
                return
            buffer += data
        if size == 0:
            complete = True
            break
        arrived = time.time()
        text += buffer[:size]
        buffer = buffer[size + 2:]
        while b"\n\n" in text:
            event, text = text.split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in event.decode().split("\n") if ": " in line)
            if "sent" in fields:
                # The upstream's clock is ours (same machine): arrival minus send, in ms.
                fields["latency_ms"] = "%.3f" % ((arrived - float(fields.pop("sent"))) * 1000)
            events.append(fields)
            if "id" in fields and fields.get("event") != "timeout":
                urllib.request.urlopen("http://127.0.0.1:%d/ack?i=%s" % (args.ack_port, fields["id"]), timeout=5).read()
    sock.close()
    emit({"events": events, "complete": complete, "head": head.decode("latin-1")})


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("echo")
    command.add_argument("url")
    command.add_argument("--header", action="append")
    command.add_argument("--messages", type=int, default=2)
    command = commands.add_parser("hold")
    command.add_argument("url")
    command.add_argument("--every", type=float, default=0.1)
    command.add_argument("--duration", type=float, default=5)
    command = commands.add_parser("many")
    command.add_argument("port", type=int)
    command.add_argument("path")
    command.add_argument("--addresses", required=True)
    command.add_argument("--per-address", type=int, required=True)
    command = commands.add_parser("raw")
    command.add_argument("port", type=int)
    command.add_argument("payload")
    command = commands.add_parser("sse")
    command.add_argument("port", type=int)
    command.add_argument("path")
    command.add_argument("ack_port", type=int)
    args = parser.parse_args()
    if args.command == "raw":
        raw(args)
    elif args.command == "sse":
        sse(args)
    else:
        asyncio.run({"echo": echo, "hold": hold, "many": many}[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
