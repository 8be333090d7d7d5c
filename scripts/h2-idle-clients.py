#!/usr/bin/python3
"""Opens N idle HTTP/2 connections over TLS to HOST:PORT and holds them until stdin closes.

Used by scripts/bench-h2.sh (gateway and nginx, one after the other): the clients live in this
process, so the server's RSS is the server side only. Each connection negotiates ALPN `h2` (any
other answer is an error), sends the client preface and an empty SETTINGS frame, reads frames
until it has the server's SETTINGS and the acknowledgement of its own, and acknowledges the
server's SETTINGS: a connection that finished the HTTP/2 handshake and sits idle. With
--request PATH each connection first makes one GET on stream 1 and reads it to its end
(END_STREAM). Standard library only (asyncio, ssl), for Debian's /usr/bin/python3.
Prints "connected N" once every connection is ready, "failed N: REASON" lines for those that
could not open (the count that opened is still printed, so the caller can say how many).
"""
import argparse
import asyncio
import ssl
import struct
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, HEADERS, DATA, RST_STREAM, GOAWAY = 0x4, 0x1, 0x0, 0x3, 0x7
ACK = END_STREAM = 0x1
END_HEADERS = 0x4


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


async def read_frame(reader):
    head = await reader.readexactly(9)
    length = int.from_bytes(head[:3], "big")
    kind, flags = head[3], head[4]
    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
    return kind, flags, stream, await reader.readexactly(length)


def literal(index: int, value: bytes) -> bytes:
    # Literal header field without indexing, indexed name (RFC 7541 6.2.2), short values only.
    assert index < 15 and len(value) < 127
    return bytes([index, len(value)]) + value


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--cafile", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--request", metavar="PATH", help="GET PATH once on each connection first")
    args = parser.parse_args()

    context = ssl.create_default_context(cafile=args.cafile)
    context.set_alpn_protocols(["h2"])
    gate = asyncio.Semaphore(args.concurrency)
    streams, failures = [], {}

    async def handshake(reader, writer) -> None:
        protocol = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if protocol != "h2":
            raise RuntimeError(f"ALPN {protocol!r}, not h2")
        writer.write(PREFACE + frame(SETTINGS, 0, 0))
        got_settings = got_ack = False
        while not (got_settings and got_ack):
            kind, flags, _, payload = await read_frame(reader)
            if kind == SETTINGS and flags & ACK:
                got_ack = True
            elif kind == SETTINGS:
                got_settings = True
                writer.write(frame(SETTINGS, ACK, 0))
            elif kind == GOAWAY:
                raise RuntimeError("GOAWAY during the preface")
        if args.request:
            block = b"\x82\x87" + (b"\x84" if args.request == "/" else literal(4, args.request.encode()))
            block += literal(1, args.server_name.encode())
            writer.write(frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
            status_seen = False
            while True:
                kind, flags, stream, payload = await read_frame(reader)
                if kind in (RST_STREAM, GOAWAY):
                    raise RuntimeError(f"frame type {kind} instead of the response")
                if stream == 1 and kind == HEADERS and not status_seen:
                    # :status 200 is static-table entry 8 (0x88); both servers encode it so.
                    if not payload.startswith(b"\x88"):
                        raise RuntimeError("response status not 200")
                    status_seen = True
                if stream == 1 and kind in (HEADERS, DATA) and flags & END_STREAM:
                    break
        await writer.drain()

    async def connect() -> None:
        async with gate:
            try:
                reader, writer = await asyncio.open_connection(
                    args.host, args.port, ssl=context, server_hostname=args.server_name
                )
                await asyncio.wait_for(handshake(reader, writer), 30)
                streams.append((reader, writer))
            except Exception as error:  # count and go on: the caller reports how many opened
                reason = f"{type(error).__name__}: {error}"
                failures[reason] = failures.get(reason, 0) + 1

    await asyncio.gather(*(connect() for _ in range(args.count)))
    for reason, n in failures.items():
        print(f"failed {n}: {reason}", flush=True)
    print(f"connected {len(streams)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
