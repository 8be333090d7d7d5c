#!/usr/bin/python3
"""Hostile HTTP/2 clients for the gateway's tests (Debian's python3-h2; run with /usr/bin/python3).

Usage: hostile.py HOST PORT CASE
Speaks h2c with prior knowledge to HOST:PORT, plays CASE, and prints one JSON object:
    {"case": CASE, "outcome": "...", "detail": "...", "after": STATUS}
`outcome` is what the gateway answered to the hostile request:
    "status:N"          a response with status N (and "grpc:N" when it carried grpc-status N)
    "reset:CODE"        RST_STREAM with the error code (1 PROTOCOL_ERROR, 11 ENHANCE_YOUR_CALM)
    "goaway:CODE"       GOAWAY with the error code
    "closed"            the connection was closed without either
`after` is the status of a plain GET on a new connection afterwards (the gateway still serves).

Cases: invalid_pseudo, response_pseudo, pseudo_after_field, uppercase_name, crlf_value,
connection_header, te_gzip, content_length_mismatch, authority_host_mismatch, rapid_reset,
continuation_flood, ping_flood, settings_flood, slow_reader, hpack_bomb, stream_id_exhaustion,
stream_id_lower, valid_get.

hpack_bomb: one HEADERS block of under 16 KiB that decodes to ~40 MB: a 4,000-byte field added to
the HPACK dynamic table once, then named by its one-byte index 10,000 times. `outcome` is what
the stream got, then `;after_bomb=` and a GET's outcome on the same connection (the bound may
reset the stream, or end the connection with GOAWAY).
stream_id_exhaustion: a GET on the last client stream ID (2^31-1), then another HEADERS on that
same ID (no stream ID is left to the client, RFC 9113 5.1.1). `outcome` is
"last:OUTCOME;then:OUTCOME" (the second, for a clean end, a GOAWAY).
stream_id_lower: as stream_id_exhaustion, the second HEADERS on stream 5 (lower than the last: a
stream implicitly closed, RFC 9113 5.1.1), read for 3 s.
cancel_slow: a GET to `/cancelled?delay=1500` reset (CANCEL) after 0.3 s, then a GET on the same
connection (outcome "cancelled, then status:200").
"""

import json
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def connect(host, port):
    sock = socket.create_connection((host, port), timeout=5)
    config = h2.config.H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=False,
        normalize_outbound_headers=False, validate_inbound_headers=False)
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def base_headers(method=b"GET", path=b"/hostile"):
    return [(b":method", method), (b":scheme", b"http"), (b":authority", b"h2.test"), (b":path", path)]


def wait_outcome(sock, conn, stream_id, seconds=5):
    """Reads until the stream ends, is reset, or the connection goes."""
    sock.settimeout(seconds)
    status = None
    grpc = None
    while True:
        try:
            data = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            return "timeout" if status is None else f"status:{status}"
        if not data:
            return f"status:{status}" if status is not None else "closed"
        try:
            events = conn.receive_data(data)
        except Exception as error:  # the gateway's frames broke our state machine: report the raw
            return f"client_error:{type(error).__name__}"
        sock.sendall(conn.data_to_send())
        for event in events:
            if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                for name, value in event.headers:
                    if name == b":status":
                        status = int(value)
                    if name == b"grpc-status":
                        grpc = int(value)
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                sock.sendall(conn.data_to_send())
            if isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id:
                return f"grpc:{grpc}" if grpc is not None else f"status:{status}"
            if isinstance(event, h2.events.StreamReset) and event.stream_id == stream_id:
                return f"reset:{int(event.error_code)}"
            if isinstance(event, h2.events.ConnectionTerminated):
                return f"goaway:{int(event.error_code)}"


def read_more(sock):
    """The next bytes read, or the outcome that ends the reading ("timeout" or "closed")."""
    try:
        data = sock.recv(65536)
    except socket.timeout:
        return None, "timeout"
    except ConnectionResetError:
        return None, "closed"
    return (data, None) if data else (None, "closed")


def whole_frames(buffer):
    """The complete frames at the start of `buffer` as (type, flags, stream, payload), and the rest."""
    frames = []
    while len(buffer) >= 9:
        length = int.from_bytes(buffer[0:3], "big")
        if len(buffer) < 9 + length:
            break
        stream = struct.unpack(">I", buffer[5:9])[0] & 0x7FFFFFFF
        frames.append((buffer[3], buffer[4], stream, buffer[9:9 + length]))
        buffer = buffer[9 + length:]
    return frames, buffer


def read_until(sock, seconds, judge):
    """Reads raw frames until `judge(type, flags, stream, payload)` returns an outcome for one,
    or the reading ends ("timeout", "closed")."""
    sock.settimeout(seconds)
    buffer = b""
    while True:
        data, end = read_more(sock)
        if end:
            return end
        frames, buffer = whole_frames(buffer + data)
        for frame_type, flags, stream, payload in frames:
            outcome = judge(frame_type, flags, stream, payload)
            if outcome is not None:
                return outcome


def goaway_code(payload):
    return f"goaway:{struct.unpack('>I', payload[4:8])[0]}"


def raw_outcome(sock, seconds=5):
    """Reads raw frames after a flood: the first GOAWAY's code, or closed."""
    return read_until(sock, seconds, lambda frame_type, _f, _s, payload: (
        goaway_code(payload) if frame_type == 7 else None))


def flood_outcome(sock, chunks):
    """Sends a flood's `chunks`, then reads what the gateway made of it (raw_outcome); closes."""
    try:
        try:
            for chunk in chunks:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        return raw_outcome(sock)
    finally:
        sock.close()


def frame(frame_type, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([frame_type, flags]) + struct.pack(">I", stream_id) + payload


def send_headers(host, port, headers, body=None, end_stream=True):
    sock, conn = connect(host, port)
    stream_id = conn.get_next_available_stream_id()
    conn.send_headers(stream_id, headers, end_stream=body is None and end_stream)
    if body is not None:
        conn.send_data(stream_id, body, end_stream=True)
    sock.sendall(conn.data_to_send())
    try:
        return wait_outcome(sock, conn, stream_id)
    finally:
        sock.close()


def rapid_reset(host, port):
    sock, conn = connect(host, port)
    out = b""
    for _ in range(2000):
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, base_headers(), end_stream=True)
        conn.reset_stream(stream_id, error_code=8)
        out += conn.data_to_send()
    return flood_outcome(sock, [out])


def continuation_flood(host, port):
    sock, conn = connect(host, port)
    block = conn.encoder.encode(base_headers())
    out = frame(1, 0x0, 1, block)  # HEADERS without END_HEADERS
    filler = conn.encoder.encode([(b"x-filler", b"a" * 64)])
    for _ in range(10000):
        out += frame(9, 0x0, 1, filler)  # CONTINUATION, never ending
    return flood_outcome(sock, [out])


def control_flood(host, port, kind):
    sock, conn = connect(host, port)
    if kind == "ping":
        unit = frame(6, 0x0, 0, b"12345678")
    else:
        unit = frame(4, 0x0, 0, struct.pack(">HI", 0x4, 65535))  # SETTINGS_INITIAL_WINDOW_SIZE
    return flood_outcome(sock, [unit * 100] * 20)


def slow_reader(host, port):
    """One stream reads nothing of a 16 MiB response (its window stays shut); a second stream
    on the same connection must still get its answer."""
    sock, conn = connect(host, port)
    conn.increment_flow_control_window(64 * 1024 * 1024)  # the connection's window stays open
    slow = conn.get_next_available_stream_id()
    conn.send_headers(slow, base_headers(path=b"/big?size=16777216"), end_stream=True)
    sock.sendall(conn.data_to_send())
    fast = None
    sock.settimeout(5)
    slow_bytes = 0
    while True:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return "timeout"
        if not data:
            return "closed"
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.DataReceived) and event.stream_id == slow:
                slow_bytes += len(event.data)
                if fast is None:
                    fast = conn.get_next_available_stream_id()
                    conn.send_headers(fast, base_headers(path=b"/fast"), end_stream=True)
            if isinstance(event, h2.events.DataReceived) and event.stream_id == fast:
                conn.acknowledge_received_data(event.flow_controlled_length, fast)
            if isinstance(event, h2.events.StreamEnded) and event.stream_id == fast:
                sock.close()
                # The slow stream got no more than its window.
                return f"fast_done slow_bytes<=window:{slow_bytes <= 65535}"
        sock.sendall(conn.data_to_send())


def hpack_bomb(host, port):
    sock, conn = connect(host, port)
    # hpack's encoder adds the field to its dynamic table the first time and names it by index
    # after that: one literal, then 10,000 one-byte references.
    bomb = [(b"x-bomb", b"a" * 4000)] * 10000
    block = conn.encoder.encode(base_headers() + bomb)
    if len(block) > 16384:
        raise SystemExit(f"the bomb's block is {len(block)} bytes: more than one frame")
    sock.sendall(frame(1, 0x5, 1, block))  # HEADERS, END_STREAM | END_HEADERS, stream 1
    try:
        decoder = hpack.Decoder()
        first = raw_stream_outcome(sock, 1, decoder)
        if first.startswith("goaway"):
            return first
        # The connection's HPACK state survived: a plain GET on it is answered.
        sock.sendall(frame(1, 0x5, 3, conn.encoder.encode(base_headers())))
        return f"{first};after_bomb={raw_stream_outcome(sock, 3, decoder)}"
    except (BrokenPipeError, ConnectionResetError):
        return "closed"
    finally:
        sock.close()


def raw_stream_outcome(sock, stream_id, decoder, seconds=5):
    """Reads raw frames until `stream_id` gets a response HEADERS (status:N; `decoder` is the
    connection's HPACK decoder, fed every response header block in order), a RST_STREAM
    (reset:CODE), or the connection a GOAWAY (goaway:CODE) or its end (closed)."""
    def judge(frame_type, flags, stream, payload):
        if frame_type == 7:
            return goaway_code(payload)
        if frame_type == 3 and stream == stream_id:
            return f"reset:{struct.unpack('>I', payload[0:4])[0]}"
        if frame_type == 1:
            block = payload
            if flags & 0x8:  # PADDED
                block = block[1:len(block) - block[0]]
            if flags & 0x20:  # PRIORITY
                block = block[5:]
            fields = decoder.decode(block, raw=True)
            if stream == stream_id:
                status = next((v.decode() for n, v in fields if n == b":status"), "?")
                return f"status:{status}"
        if frame_type == 4 and not flags & 0x1:
            sock.sendall(frame(4, 0x1, 0))  # ACK the server's SETTINGS
        return None

    return read_until(sock, seconds, judge)


def stream_id_exhaustion(host, port, second):
    sock, conn = connect(host, port)
    last = 2**31 - 1
    decoder = hpack.Decoder()
    sock.sendall(frame(1, 0x5, last, conn.encoder.encode(base_headers())))
    try:
        first = raw_stream_outcome(sock, last, decoder)
        sock.sendall(frame(1, 0x5, second, conn.encoder.encode(base_headers())))
        then = raw_stream_outcome(sock, second, decoder, seconds=3)
    except (BrokenPipeError, ConnectionResetError):
        then = "closed"
    finally:
        sock.close()
    return f"last:{first};then:{then}"


def cancel_slow(host, port):
    """A GET the upstream answers late, cancelled (RST_STREAM CANCEL) while it waits: the
    gateway logs it once as 499 and the connection keeps serving."""
    sock, conn = connect(host, port)
    try:
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, base_headers(path=b"/cancelled?delay=1500"), end_stream=True)
        sock.sendall(conn.data_to_send())
        time.sleep(0.3)
        conn.reset_stream(stream_id, error_code=8)
        follow = conn.get_next_available_stream_id()
        conn.send_headers(follow, base_headers(), end_stream=True)
        sock.sendall(conn.data_to_send())
        return "cancelled, then " + wait_outcome(sock, conn, follow)
    finally:
        sock.close()


def play(host, port, case):
    h = base_headers()
    if case == "valid_get":
        return send_headers(host, port, h)
    if case == "invalid_pseudo":
        return send_headers(host, port, h + [(b":foo", b"bar")])
    if case == "response_pseudo":
        return send_headers(host, port, h + [(b":status", b"200")])
    if case == "pseudo_after_field":
        return send_headers(host, port, h[:3] + [(b"accept", b"*/*")] + h[3:])
    if case == "uppercase_name":
        return send_headers(host, port, h + [(b"X-App-Attest-Key-Id", b"abc")])
    if case == "crlf_value":
        return send_headers(host, port, h + [(b"x-v", b"a\r\nx-injected: 1")])
    if case == "connection_header":
        return send_headers(host, port, h + [(b"connection", b"keep-alive")])
    if case == "te_gzip":
        return send_headers(host, port, h + [(b"te", b"gzip")])
    if case == "content_length_mismatch":
        return send_headers(host, port, base_headers(b"POST") + [(b"content-length", b"10")], body=b"12345")
    if case == "authority_host_mismatch":
        return send_headers(host, port, h + [(b"host", b"other.test")])
    if case == "slow_reader":
        return slow_reader(host, port)
    if case == "rapid_reset":
        return rapid_reset(host, port)
    if case == "continuation_flood":
        return continuation_flood(host, port)
    if case == "ping_flood":
        return control_flood(host, port, "ping")
    if case == "settings_flood":
        return control_flood(host, port, "settings")
    if case == "hpack_bomb":
        return hpack_bomb(host, port)
    if case == "stream_id_exhaustion":
        return stream_id_exhaustion(host, port, 2**31 - 1)
    if case == "cancel_slow":
        return cancel_slow(host, port)
    if case == "stream_id_lower":
        return stream_id_exhaustion(host, port, 5)
    raise SystemExit(f"unknown case {case}")


def main():
    host, port, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    try:
        outcome = play(host, port, case)
        detail = ""
    except Exception as error:
        outcome, detail = "client_error", f"{type(error).__name__}: {error}"
    after = play(host, port, "valid_get")
    print(json.dumps({"case": case, "outcome": outcome, "detail": detail, "after": after}))


if __name__ == "__main__":
    main()
