#!/usr/bin/python3
"""Enforced-route client over TLS, HTTP/1.1 or HTTP/2 (scripts/bench-enforced-h2.sh).

    enforced_client.py h1|h2 HOST PORT CAFILE PATH ASSERTIONS CONNS [STREAMS]

ASSERTIONS: lines "<key ID> <assertion>" from `bench-mint assert` (round-robin over the keys,
counters increasing line by line for each key). Every request takes the next line, in file
order, and sends it as X-App-Attest-Key-Id / X-App-Assertion on `GET PATH` (what the assertions
were minted for): a fresh assertion per request, never one used twice. h1: CONNS keep-alive
HTTP/1.1 connections over TLS (ALPN http/1.1), one request in flight on each; h2: CONNS HTTP/2
connections over TLS (ALPN h2, checked), STREAMS streams in flight on each (python3-h2, Debian's
python3). The connections are opened (full handshakes) before "ready" is printed.

Commands on stdin, one a line, so the caller can zero callgrind's counters or read /proc around
exactly N requests on warm connections (no handshake counted):
    run N     sends the next N requests; prints "done N OK ERRORS SECONDS" (OK: 200 answers;
              ERRORS: anything else, the first few described on stderr)
    quit      closes the connections and exits
When the file runs out, requests fail (counted as errors): never sent without an assertion.
Needs Debian's python3-h2 for h2 (run with /usr/bin/python3).
"""
import asyncio
import ssl
import sys
import time


class Lines:
    """The assertions file, consumed in order."""

    def __init__(self, path):
        self.file = open(path, "rb")

    def next(self):
        line = self.file.readline().rstrip(b"\n")
        if not line:
            return None
        key_id, _, assertion = line.partition(b" ")
        return key_id, assertion


class Stats:
    def __init__(self):
        self.ok = 0
        self.errors = 0
        self.remaining = 0

    def take(self):
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True

    def result(self, status, body):
        if status == 200:
            self.ok += 1
            return
        self.errors += 1
        if self.errors <= 5:
            print(f"enforced_client: HTTP {status}: {body[:200]!r}", file=sys.stderr)


def tls_context(cafile, alpn):
    context = ssl.create_default_context(cafile=cafile)
    context.set_alpn_protocols([alpn])
    return context


class H1Connection:
    def __init__(self, host, port, context, path):
        self.host, self.port, self.context, self.path = host, port, context, path

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.context, server_hostname="localhost")
        alpn = self.writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if alpn not in (None, "http/1.1"):
            raise SystemExit(f"enforced_client: h1 connection negotiated {alpn}")

    async def worker(self, lines, stats):
        while stats.take():
            pair = lines.next()
            if pair is None:
                stats.result(0, b"assertions file used up")
                continue
            self.writer.write(b"GET " + self.path + b" HTTP/1.1\r\nHost: localhost\r\nX-App-Attest-Key-Id: "
                              + pair[0] + b"\r\nX-App-Assertion: " + pair[1] + b"\r\n\r\n")
            head = await self.reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await self.reader.readexactly(length) if length else b""
            stats.result(status, body)

    def workers(self, lines, stats):
        return [self.worker(lines, stats)]

    def close(self):
        self.writer.close()


class H2Connection:
    def __init__(self, host, port, context, path, streams):
        self.host, self.port, self.context, self.path, self.streams = host, port, context, path, streams
        self.pending = {}  # stream ID -> [future, status, body]

    async def open(self):
        import h2.config
        import h2.connection
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.context, server_hostname="localhost")
        alpn = self.writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if alpn != "h2":
            raise SystemExit(f"enforced_client: h2 connection negotiated {alpn}")
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.writer.write(self.conn.data_to_send())
        self.read_task = asyncio.ensure_future(self.read_loop())

    async def read_loop(self):
        import h2.events
        while True:
            data = await self.reader.read(65536)
            if not data:
                for entry in self.pending.values():
                    if not entry[0].done():
                        entry[0].set_result(None)
                return
            for event in self.conn.receive_data(data):
                entry = self.pending.get(getattr(event, "stream_id", None))
                if isinstance(event, h2.events.ResponseReceived) and entry:
                    entry[1] = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if entry:
                        entry[2] += event.data
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and entry:
                    entry[0].set_result(None)
            pending_out = self.conn.data_to_send()
            if pending_out:
                self.writer.write(pending_out)

    async def worker(self, lines, stats):
        loop = asyncio.get_running_loop()
        while stats.take():
            pair = lines.next()
            if pair is None:
                stats.result(0, b"assertions file used up")
                continue
            stream_id = self.conn.get_next_available_stream_id()
            entry = [loop.create_future(), 0, b""]
            self.pending[stream_id] = entry
            self.conn.send_headers(stream_id, [
                (":method", "GET"), (":scheme", "https"), (":authority", "localhost"),
                (":path", self.path.decode()),
                ("x-app-attest-key-id", pair[0].decode()), ("x-app-assertion", pair[1].decode()),
            ], end_stream=True)
            self.writer.write(self.conn.data_to_send())
            await entry[0]
            del self.pending[stream_id]
            stats.result(entry[1], entry[2])

    def workers(self, lines, stats):
        return [self.worker(lines, stats) for _ in range(self.streams)]

    def close(self):
        self.read_task.cancel()
        self.writer.close()


async def main():
    if len(sys.argv) not in (8, 9):
        sys.exit(__doc__)
    proto, host, port, cafile, path, assertions, conns = sys.argv[1:8]
    streams = int(sys.argv[8]) if len(sys.argv) == 9 else 1
    if proto not in ("h1", "h2"):
        sys.exit(__doc__)
    context = tls_context(cafile, "http/1.1" if proto == "h1" else "h2")
    connections = [H1Connection(host, int(port), context, path.encode()) if proto == "h1"
                   else H2Connection(host, int(port), context, path.encode(), streams)
                   for _ in range(int(conns))]
    for connection in connections:
        await connection.open()
    lines = Lines(assertions)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        command = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not command or command[0] == "quit":
            break
        stats = Stats()
        stats.remaining = int(command[1])
        started = time.monotonic()
        await asyncio.gather(*(w for c in connections for w in c.workers(lines, stats)))
        print(f"done {command[1]} {stats.ok} {stats.errors} {time.monotonic() - started:.3f}", flush=True)
    for connection in connections:
        connection.close()


if __name__ == "__main__":
    asyncio.run(main())
