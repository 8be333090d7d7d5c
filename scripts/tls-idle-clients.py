#!/usr/bin/env python3
"""Opens N idle TLS connections to HOST:PORT and holds them until stdin closes.

Used by the TLS idle-memory measurement (Tests/GatewayIntegrationTests/TLS/TLSIdleMemoryMeasurement.swift,
run only with TLS_IDLE_MEMORY_CONNECTIONS set): the clients live in this process so that the
gateway process's RSS is the server side only; and by scripts/bench-tls.sh (gateway and nginx, with
--request: each connection first makes one keep-alive request and reads the whole response, so
the server holds an idle keep-alive connection, not one waiting for its first request). Prints
"connected N" once every handshake (and request) is done.
"""
import argparse
import asyncio
import ssl
import sys


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
    gate = asyncio.Semaphore(args.concurrency)
    streams = []

    async def connect() -> None:
        async with gate:
            reader, writer = await asyncio.open_connection(
                args.host, args.port, ssl=context, server_hostname=args.server_name
            )
            if args.request:
                writer.write(f"GET {args.request} HTTP/1.1\r\nHost: {args.server_name}\r\n\r\n".encode())
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    raise SystemExit("unexpected response: " + head.split(b"\r\n")[0].decode())
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
            streams.append((reader, writer))

    await asyncio.gather(*(connect() for _ in range(args.count)))
    print(f"connected {len(streams)}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
