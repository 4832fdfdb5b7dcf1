"""An in-process HTTP server that answers chosen paths with one line that (almost) never ends.

For the bounded-memory tests (issue 28, row 1): a server under test that streams one endless
line made the probes and `bringup tune` grow about 300 MB/s. This one sends `limit` bytes of a
single line (no newline, no SSE event boundary) and closes, so a reader without a cap holds
them all (the test then sees its peak memory pass the bound), and a reader with one stops early.
Threads and raw sockets only: it starts in milliseconds and needs no process.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BLOCK = b"x" * (1 << 16)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        conn: socket.socket = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            got = conn.recv(65536)
            if not got:
                return
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        length = next(
            (int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length")), 0
        )
        while len(rest) < length:
            got = conn.recv(65536)
            if not got:
                break
            rest += got
        self.server.paths.append(path)
        try:
            if any(path.startswith(p) for p in self.server.endless):
                self._endless(conn)
            else:
                self._normal(conn, path)
        except OSError:  # the client stopped reading (its cap was hit): what the test wants
            pass

    def _normal(self, conn: socket.socket, path: str) -> None:
        body = b"ok"
        if path.startswith("/v1/models"):
            body = json.dumps({"data": [{"id": "m"}]}).encode()
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    def _endless(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: ")
        sent = 0
        while sent < self.server.limit:
            conn.sendall(BLOCK)
            sent += len(BLOCK)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, endless: tuple[str, ...], limit: int):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.endless, self.limit = endless, limit
        self.paths: list[str] = []


@contextmanager
def endless_server(endless: tuple[str, ...], limit: int = 256 << 20) -> Iterator[_Server]:
    """A server on a free port of 127.0.0.1 (url: f"http://127.0.0.1:{srv.server_address[1]}")."""
    srv = _Server(endless, limit)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
