#!/usr/bin/python3
"""WebSocket load for scripts/bench-websocket.sh: one echo upstream and one client, the same for
the gateway and for nginx. Plain asyncio Protocols (no library on the hot path) doing the least
RFC 6455 framing that is still valid on the wire: the client sends masked frames with an all-zero
masking key (valid: RFC 6455 5.3 asks for a key, and a proxy tunnels the bytes without reading
them; a zero key makes unmasking a no-op), the upstream answers unmasked frames. Every command
prints one JSON object.

  upstream PORT
      Echo upstream on 127.0.0.1:PORT: completes any upgrade (Sec-WebSocket-Accept computed),
      then echoes each frame's payload in an unmasked frame; on a path starting /sink it reads
      and discards everything (the bulk row). Prints {"listening": PORT} and serves until killed.
  echo PORT PATH --conns N --size BYTES --duration S --pid PID [--warmup S] [--window W]
      N tunnels, each a closed loop (W BYTES-byte binary messages in flight, default 1: each
      echo that arrives sends the next); counts echoes over DURATION after WARMUP, and the CPU time (utime + stime from
      /proc/PID/stat) PID spent over exactly that window. --callgrind: PID runs under callgrind;
      the tunnels are stopped and drained, its counters zeroed, then run, stopped, drained and
      dumped (`callgrind_control`), so the dump holds exactly the counted messages.
      --perf FILE --perf-events LIST: the same stop-and-drain around the window, with
      `perf stat -x, -e LIST -p PID -o FILE` attached while the tunnels are quiet and stopped
      (SIGINT) once they are quiet again, so its counts are those of exactly the counted messages
      (plus the proxy's idle timer wake-ups over the quiet ~1.5 s); the JSON then also has each of
      PID's threads' voluntary/involuntary context switches over that span ("threads").
  bulk PORT PATH --duration S --pid PID [--chunk BYTES]
      One tunnel to a /sink path: one frame announcing 2^62 payload bytes, then CHUNK-byte
      writes as fast as the tunnel takes them (back-pressure: blocking send) for DURATION;
      MB/s and PID's CPU per MB over that window.
  idle PORT PATH --count N --pid PID [--addresses A,B,...]
      Opens N tunnels (source addresses in turn), 500 handshakes in flight at a time, holds them;
      after 1 s reads PID's VmRSS, then checks one tunnel in 50 still echoes.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def thread_switches(pid):
    """{"comm/tid nice N": [voluntary, involuntary]} for each thread of `pid` (/proc/PID/task/*/status)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip() + "/" + tid
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                name += " nice %s" % f.read().rsplit(")", 1)[1].split()[16]
            counts = [0, 0]
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        counts[0] = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        counts[1] = int(line.split()[1])
            out[name] = counts
        except OSError:
            pass
    return out


def handshake_request(path):
    key = base64.b64encode(os.urandom(16))
    return (
        b"GET " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )


def masked_frame(payload):
    """A final binary frame, masked with the zero key (payload bytes unchanged)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x82, 0x80 | n])
    elif n < 65536:
        head = bytes([0x82, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x82, 0x80 | 127]) + n.to_bytes(8, "big")
    return head + b"\0\0\0\0" + payload


# --- upstream ---------------------------------------------------------------------------------


class UpstreamProtocol(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = bytearray()
        self.state = "head"

    def data_received(self, data):
        if self.state == "sink":
            return
        self.buffer += data
        if self.state == "head":
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).decode("latin-1")
            del self.buffer[: end + 4]
            lines = head.split("\r\n")
            path = lines[0].split(" ")[1]
            key = ""
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-key":
                    key = value.strip()
            accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
            self.transport.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
            )
            if path.startswith("/sink"):
                self.state = "sink"
                self.buffer = bytearray()
                return
            self.state = "frames"
        out = bytearray()
        buf = self.buffer
        offset = 0
        while len(buf) - offset >= 2:
            b1 = buf[offset + 1]
            n = b1 & 0x7F
            pos = offset + 2
            if n == 126:
                if len(buf) - pos < 2:
                    break
                n = int.from_bytes(buf[pos : pos + 2], "big")
                pos += 2
            elif n == 127:
                if len(buf) - pos < 8:
                    break
                n = int.from_bytes(buf[pos : pos + 8], "big")
                pos += 8
            mask = None
            if b1 & 0x80:
                if len(buf) - pos < 4:
                    break
                mask = bytes(buf[pos : pos + 4])
                pos += 4
            if len(buf) - pos < n:
                break
            payload = bytes(buf[pos : pos + n])
            if mask and mask != b"\0\0\0\0":
                key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
                payload = (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")
            opcode = buf[offset] & 0x0F
            offset = pos + n
            if opcode == 0x8:  # close: answer it and finish
                out += b"\x88\x00"
                self.transport.write(bytes(out))
                self.transport.close()
                return
            if n < 126:
                out += bytes([0x80 | opcode, n])
            elif n < 65536:
                out += bytes([0x80 | opcode, 126]) + n.to_bytes(2, "big")
            else:
                out += bytes([0x80 | opcode, 127]) + n.to_bytes(8, "big")
            out += payload
        del buf[:offset]
        if out:
            self.transport.write(bytes(out))


async def upstream(args):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(UpstreamProtocol, "127.0.0.1", args.port, backlog=4096, reuse_address=True)
    print(json.dumps({"listening": args.port}), flush=True)
    async with server:
        await server.serve_forever()


# --- clients ----------------------------------------------------------------------------------


class TunnelClient(asyncio.Protocol):
    """Handshake, then (when `message` is set) a closed echo loop counting round trips."""

    def __init__(self, path, message, counter):
        self.request = handshake_request(path)
        self.message = message
        self.frame = masked_frame(message) if message is not None else b""
        self.echo_len = 2 + len(message) if message is not None else 0
        self.counter = counter
        self.opened = asyncio.get_running_loop().create_future()
        self.head = b""
        self.pending = 0
        self.running = False
        self.closed = False

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data):
        if not self.opened.done():
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            status = self.head[:end].split(b"\r\n", 1)[0]
            rest = self.head[end + 4 :]
            self.head = b""
            if not status.startswith(b"HTTP/1.1 101"):
                self.opened.set_exception(RuntimeError(status.decode("latin-1")))
                self.transport.close()
                return
            self.opened.set_result(True)
            data = rest
            if not data:
                return
        self.pending += len(data)
        if self.echo_len == 0:
            return
        echoes, self.pending = divmod(self.pending, self.echo_len)
        self.counter[0] += echoes
        if self.running and echoes:
            self.transport.write(self.frame * echoes)  # one write for the echoes of this read

    def start(self, window=1):
        self.running = True
        self.transport.write(self.frame * window)

    def connection_lost(self, exc):
        self.closed = True
        if not self.opened.done():
            self.opened.set_exception(RuntimeError("closed before 101"))


async def open_tunnel(port, path, message, counter, source=None):
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(
        lambda: TunnelClient(path, message, counter), "127.0.0.1", port,
        local_addr=(source, 0) if source else None)
    await asyncio.wait_for(protocol.opened, 20)
    return protocol


async def echo(args):
    counter = [0, 0]
    message = b"x" * args.size
    tunnels = [await open_tunnel(args.port, args.path, message, counter) for _ in range(args.conns)]
    for tunnel in tunnels:
        tunnel.start(args.window)
    await asyncio.sleep(args.warmup)
    quiet = args.callgrind or args.perf
    perf = None
    if quiet:
        # Exact counts under callgrind: stop, let every echo in flight arrive, zero the counters,
        # run, stop and drain again, dump. The messages are exactly those of the window.
        for tunnel in tunnels:
            tunnel.running = False
        await asyncio.sleep(1.0)
        if args.callgrind:
            subprocess.run(["callgrind_control", "-z", str(args.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if args.perf:
            perf = subprocess.Popen(["perf", "stat", "-x,", "-e", args.perf_events, "-p", str(args.pid), "-o", args.perf],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(0.5)  # attached before the first message
            threads_before = thread_switches(args.pid)
        for tunnel in tunnels:
            tunnel.start(args.window)
    start_count, start_cpu, start = counter[0], cpu_seconds(args.pid), time.monotonic()
    await asyncio.sleep(args.duration)
    if quiet:
        for tunnel in tunnels:
            tunnel.running = False
        await asyncio.sleep(2.0 if args.callgrind else 1.0)
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(args.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if perf:
            threads_after = thread_switches(args.pid)
            perf.send_signal(2)
            perf.wait()
    end_count, end_cpu, end = counter[0], cpu_seconds(args.pid), time.monotonic()
    for tunnel in tunnels:
        tunnel.running = False
    await asyncio.sleep(0.2)
    for tunnel in tunnels:
        tunnel.transport.close()
    messages = end_count - start_count
    elapsed = end - start
    extra = {}
    if perf:
        extra["threads"] = {
            name: [after[0] - threads_before.get(name, [0, 0])[0], after[1] - threads_before.get(name, [0, 0])[1]]
            for name, after in threads_after.items()}
    print(json.dumps({**extra,
        "tunnels": args.conns, "size": args.size, "window": args.window, "seconds": round(elapsed, 3), "messages": messages,
        "messages_per_s": round(messages / elapsed), "cpu_s": round(end_cpu - start_cpu, 3),
        "cpu_us_per_message": round((end_cpu - start_cpu) * 1e6 / max(messages, 1), 3),
        "client_cpu_s": round(time.process_time(), 2)}), flush=True)


def bulk(args):
    sock = socket.create_connection(("127.0.0.1", args.port))
    sock.sendall(handshake_request(args.path))
    head = b""
    while b"\r\n\r\n" not in head:
        data = sock.recv(4096)
        if not data:
            raise SystemExit("bulk: closed before 101")
        head += data
    if not head.startswith(b"HTTP/1.1 101"):
        raise SystemExit("bulk: " + head.split(b"\r\n")[0].decode("latin-1"))
    sock.sendall(bytes([0x82, 0xFF]) + (1 << 62).to_bytes(8, "big") + b"\0\0\0\0")
    chunk = memoryview(bytes(args.chunk))
    deadline = time.monotonic() + 1.0  # warm-up second
    while time.monotonic() < deadline:
        sock.sendall(chunk)
    sent, start_cpu, start = 0, cpu_seconds(args.pid), time.monotonic()
    deadline = start + args.duration
    while time.monotonic() < deadline:
        sock.sendall(chunk)
        sent += len(chunk)
    end_cpu, end = cpu_seconds(args.pid), time.monotonic()
    sock.close()
    mb = sent / 1e6
    print(json.dumps({
        "seconds": round(end - start, 3), "mb": round(mb, 1), "mb_per_s": round(mb / (end - start), 1),
        "cpu_s": round(end_cpu - start_cpu, 3), "cpu_ms_per_mb": round((end_cpu - start_cpu) * 1e3 / mb, 4)}),
        flush=True)


async def idle(args):
    addresses = args.addresses.split(",") if args.addresses else [None]
    counter = [0, 0]
    tunnels = []
    before = rss_kb(args.pid)
    start = time.monotonic()
    failures = {}
    for base in range(0, args.count, 500):
        batch = range(base, min(args.count, base + 500))
        results = await asyncio.gather(
            *(open_tunnel(args.port, args.path, b"p", counter, addresses[i % len(addresses)]) for i in batch),
            return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                failures[str(result)[:60]] = failures.get(str(result)[:60], 0) + 1
            else:
                tunnels.append(result)
    opened_in = time.monotonic() - start
    await asyncio.sleep(1.0)
    held = rss_kb(args.pid)
    sample = tunnels[:: 50]
    target = counter[0] + len(sample)
    for tunnel in sample:
        tunnel.transport.write(tunnel.frame)
    for _ in range(100):
        if counter[0] >= target:
            break
        await asyncio.sleep(0.05)
    print(json.dumps({
        "asked": args.count, "opened": len(tunnels), "failures": failures, "seconds_to_open": round(opened_in, 1),
        "rss_before_kb": before, "rss_kb": held, "sample_echoed": counter[0] - (target - len(sample)),
        "sample": len(sample)}), flush=True)
    for tunnel in tunnels:
        tunnel.transport.close()
    await asyncio.sleep(0.5)


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("upstream")
    command.add_argument("port", type=int)
    command = commands.add_parser("echo")
    command.add_argument("port", type=int)
    command.add_argument("path")
    command.add_argument("--conns", type=int, default=64)
    command.add_argument("--size", type=int, default=32)
    command.add_argument("--duration", type=float, default=5)
    command.add_argument("--warmup", type=float, default=1)
    command.add_argument("--window", type=int, default=1)
    command.add_argument("--callgrind", action="store_true")
    command.add_argument("--perf", default="")
    command.add_argument("--perf-events", default="raw_syscalls:sys_enter,context-switches")
    command.add_argument("--pid", type=int, required=True)
    command = commands.add_parser("bulk")
    command.add_argument("port", type=int)
    command.add_argument("path")
    command.add_argument("--duration", type=float, default=5)
    command.add_argument("--chunk", type=int, default=256 * 1024)
    command.add_argument("--pid", type=int, required=True)
    command = commands.add_parser("idle")
    command.add_argument("port", type=int)
    command.add_argument("path")
    command.add_argument("--count", type=int, default=10000)
    command.add_argument("--addresses", default="")
    command.add_argument("--pid", type=int, required=True)
    args = parser.parse_args()
    if args.command == "bulk":
        bulk(args)
    else:
        asyncio.run({"upstream": upstream, "echo": echo, "idle": idle}[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
