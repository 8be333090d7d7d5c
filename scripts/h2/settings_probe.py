#!/usr/bin/python3
"""What an HTTP/2 listener announces, and whether it enforces its stream limit (Debian's
python3-hyperframe and python3-hpack; run with /usr/bin/python3).

Usage: settings_probe.py HOST PORT STREAMS [ack]
Speaks h2c with prior knowledge to HOST:PORT with raw frames (Python h2 would refuse to open
more streams than the server allows), reads the server's SETTINGS, then opens STREAMS request
streams (POST, body never sent, so each stays open) and reads for 2 s. With `ack`, the server's
SETTINGS is acknowledged first (its limit is then in force, not only announced).
Prints one JSON object:
    {"settings": {"max_concurrent_streams": N, "initial_window_size": N, ...},
     "resets": {"STREAM_ID": CODE, ...}, "goaway": [LAST_STREAM_ID, CODE] or null,
     "opened": [STREAM_IDS]}
"""

import json
import socket
import sys
import time

import hpack
from hyperframe.frame import Frame, GoAwayFrame, HeadersFrame, RstStreamFrame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
NAMES = {
    SettingsFrame.HEADER_TABLE_SIZE: "header_table_size",
    SettingsFrame.ENABLE_PUSH: "enable_push",
    SettingsFrame.MAX_CONCURRENT_STREAMS: "max_concurrent_streams",
    SettingsFrame.INITIAL_WINDOW_SIZE: "initial_window_size",
    SettingsFrame.MAX_FRAME_SIZE: "max_frame_size",
    SettingsFrame.MAX_HEADER_LIST_SIZE: "max_header_list_size",
}


def read_frames(sock, buffer):
    """Whole frames in buffer (bytearray, consumed)."""
    frames = []
    while len(buffer) >= 9:
        frame, length = Frame.parse_frame_header(memoryview(buffer[:9]))
        if len(buffer) < 9 + length:
            break
        frame.parse_body(memoryview(buffer[9:9 + length]))
        del buffer[:9 + length]
        frames.append(frame)
    return frames


def main():
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ack = len(sys.argv) > 4 and sys.argv[4] == "ack"
    sock = socket.create_connection((host, port), timeout=5)
    sock.sendall(PREFACE + SettingsFrame(0).serialize())
    buffer = bytearray()
    settings = None
    deadline = time.time() + 5
    while settings is None and time.time() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        buffer += data
        for frame in read_frames(sock, buffer):
            if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                settings = {NAMES.get(k, str(k)): v for k, v in frame.settings.items()}
    if settings is None:
        print(json.dumps({"error": "no SETTINGS"}))
        return 1
    if ack:
        sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
        time.sleep(0.2)
    encoder = hpack.Encoder()
    opened = []
    out = b""
    for index in range(count):
        stream_id = 1 + 2 * index
        headers = HeadersFrame(stream_id, flags=["END_HEADERS"])
        headers.data = encoder.encode([
            (":method", "POST"), (":scheme", "http"), (":authority", "h2.test"), (":path", "/probe"),
            ("content-length", "10"),
        ])
        out += headers.serialize()
        opened.append(stream_id)
    sock.sendall(out)
    resets = {}
    goaway = None
    deadline = time.time() + 2
    sock.settimeout(0.2)
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        buffer += data
        for frame in read_frames(sock, buffer):
            if isinstance(frame, RstStreamFrame):
                resets[str(frame.stream_id)] = frame.error_code
            elif isinstance(frame, GoAwayFrame):
                goaway = [frame.last_stream_id, frame.error_code]
    print(json.dumps({"settings": settings, "resets": resets, "goaway": goaway, "opened": opened}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
