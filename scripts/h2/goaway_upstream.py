#!/usr/bin/python3
"""An h2c upstream that sheds streams, for the gateway's HTTP/2 upstream tests (Debian's
python3-h2; run with /usr/bin/python3).

Usage: goaway_upstream.py MODE
Listens on a free loopback port, prints "PORT N", serves until stdin closes. Every answered
request gets 200 with the body "conn=C stream=S method=M body=B" (C counts connections from 1,
B the request body's length), except a request for /echo: its body is sent back (no
content-length, within the flow-control windows) followed by the trailer x-body-bytes: B. MODE:
    plain          answer everything.
    goaway_first   the first connection answers nothing: on its first request HEADERS it sends
                   GOAWAY (last stream ID 0, NO_ERROR) and closes; later connections answer.
    refuse_first   the first request stream ever seen gets RST_STREAM REFUSED_STREAM; the rest
                   are answered.
    stall          on its first request the connection stops reading and writing (a hung
                   upstream: PINGs are not answered either).
Each line on stderr is an event: "open C", "goaway C", "refused C S", "answered C S",
"peer_goaway C CODE", "closed C", "stalled C".
"""

import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.errors

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
lock = threading.Lock()
counters = {"connections": 0, "refused": False}


def log(text):
    with lock:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def serve(sock, number):
    config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    bodies = {}
    methods = {}
    paths = {}
    echoes = {}
    pending = {}
    log("open %d" % number)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    sid = event.stream_id
                    if MODE == "stall":
                        log("stalled %d" % number)
                        threading.Event().wait()
                    if MODE == "goaway_first" and number == 1:
                        conn.close_connection(error_code=h2.errors.ErrorCodes.NO_ERROR, last_stream_id=0)
                        sock.sendall(conn.data_to_send())
                        log("goaway %d" % number)
                        sock.close()
                        log("closed %d" % number)
                        return
                    with lock:
                        refuse = MODE == "refuse_first" and not counters["refused"]
                        if refuse:
                            counters["refused"] = True
                    if refuse:
                        conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
                        log("refused %d %d" % (number, sid))
                        continue
                    headers = dict(event.headers)
                    methods[sid] = headers.get(":method", "?")
                    paths[sid] = headers.get(":path", "/")
                    bodies[sid] = 0
                    echoes[sid] = bytearray()
                    if event.stream_ended is not None:
                        answer(conn, number, sid, methods, bodies, paths, echoes, pending)
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_id in bodies:
                        bodies[event.stream_id] += len(event.data)
                        echoes[event.stream_id] += event.data
                elif isinstance(event, h2.events.StreamEnded):
                    if event.stream_id in bodies:
                        answer(conn, number, event.stream_id, methods, bodies, paths, echoes, pending)
                elif isinstance(event, h2.events.ConnectionTerminated):
                    log("peer_goaway %d %d" % (number, event.error_code))
                elif isinstance(event, h2.events.StreamReset):
                    pending.pop(event.stream_id, None)
            send_pending(conn, number, pending)
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (OSError, h2.exceptions.ProtocolError):
        pass
    finally:
        sock.close()
        log("closed %d" % number)


def answer(conn, number, sid, methods, bodies, paths, echoes, pending):
    echo = echoes.pop(sid)
    if paths.pop(sid) == "/echo":
        methods.pop(sid)
        conn.send_headers(sid, [(":status", "200"), ("content-type", "application/octet-stream")])
        pending[sid] = [bytes(echo), 0, bodies.pop(sid)]
        send_pending(conn, number, pending)
        return
    body = ("conn=%d stream=%d method=%s body=%d" % (number, sid, methods.pop(sid), bodies.pop(sid))).encode()
    conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body))), ("content-type", "text/plain")])
    conn.send_data(sid, body, end_stream=True)
    log("answered %d %d" % (number, sid))


def send_pending(conn, number, pending):
    """Echo bodies, as far as the flow-control windows allow; then the trailer."""
    for sid in list(pending):
        data, offset, count = pending[sid]
        while offset < len(data):
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(data) - offset)
            if room <= 0:
                break
            conn.send_data(sid, data[offset:offset + room])
            offset += room
        pending[sid][1] = offset
        if offset == len(data):
            conn.send_headers(sid, [("x-body-bytes", str(count))], end_stream=True)
            del pending[sid]
            log("answered %d %d" % (number, sid))


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print("PORT %d" % listener.getsockname()[1], flush=True)

    def accept():
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            with lock:
                counters["connections"] += 1
                number = counters["connections"]
            threading.Thread(target=serve, args=(sock, number), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()
    listener.close()


if __name__ == "__main__":
    main()
