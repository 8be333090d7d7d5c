#!/usr/bin/python3
"""One HTTP/2 client connection (python3-h2; run with /usr/bin/python3) with two gRPC streams to
the gateway: a server-streaming call whose client never opens its stream window (it stalls at
once), and a unary call on the same connection, which must complete anyway.

Usage: slow_reader.py HOST PORT
Prints one JSON object: {"unary_status": "0", "stalled_bytes": n, "stalled_ended": false}.
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


def frame(text):
    data = text.encode()
    return b"\x00" + struct.pack(">I", len(data)) + data


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    sock = socket.create_connection((host, port), timeout=10)
    connection = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    # Streams start with a zero window: only streams this client opens explicitly get data.
    connection.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    connection.increment_flow_control_window(16 * 1024 * 1024)
    sock.sendall(connection.data_to_send())

    def headers(path):
        return [
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "%s:%d" % (host, port)),
            ("content-type", "application/grpc"), ("te", "trailers"),
        ]

    stalled = connection.get_next_available_stream_id()
    connection.send_headers(stalled, headers("/test.Echo/Stream"))
    connection.send_data(stalled, frame("200000"), end_stream=True)
    sock.sendall(connection.data_to_send())
    time.sleep(1.0)  # the upstream fills the stalled stream's windows meanwhile
    unary = connection.get_next_available_stream_id()
    connection.send_headers(unary, headers("/test.Echo/Unary"))
    connection.send_data(unary, frame("hi"), end_stream=True)
    connection.increment_flow_control_window(1024 * 1024, stream_id=unary)
    sock.sendall(connection.data_to_send())

    result = {"unary_status": None, "stalled_bytes": 0, "stalled_ended": False}
    deadline = time.time() + 8
    while time.time() < deadline and result["unary_status"] is None:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        for event in connection.receive_data(data):
            if isinstance(event, h2.events.DataReceived):
                if event.stream_id == stalled:
                    result["stalled_bytes"] += len(event.data)
                connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.TrailersReceived) and event.stream_id == unary:
                result["unary_status"] = dict(event.headers).get(b"grpc-status", b"?").decode()
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stalled:
                result["stalled_ended"] = True
        sock.sendall(connection.data_to_send())
    print(json.dumps(result))


if __name__ == "__main__":
    main()
