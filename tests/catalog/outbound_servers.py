"""Real servers on 127.0.0.1 that misbehave the ways the security review describes:
redirecting, dripping, oversized, silent, not JSON. Each records what it was asked."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.support.ports import free_port, listening_socket, url_of


@dataclass
class Served:
    url: str
    hits: list[str] = field(default_factory=list)  # "METHOD /path", in order


@contextmanager
def http_server(
    *, status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None
) -> Iterator[Served]:
    """Answers every GET and POST with `status`, `headers` and `body`."""
    served = Served(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            served.hits.append(f"{self.command} {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def raw_server(head: bytes, drip: bytes = b"", interval: float = 0.2) -> Iterator[Served]:
    """Sends `head` at once after reading a request, then `drip` one byte every `interval`
    seconds, repeated until the client goes away or the test ends. No answer at all
    when both are empty (a silent server)."""
    served = Served(url="")
    stop = threading.Event()
    listener = listening_socket()
    listener.settimeout(0.1)
    served.url = url_of(listener)
    connections: list[socket.socket] = []

    def talk(conn: socket.socket) -> None:
        try:
            request = conn.recv(65536).decode("latin-1")
            served.hits.append(" ".join(request.split(" ")[:2]))
            if head:
                conn.sendall(head)
            while drip and not stop.is_set():
                for byte in drip:
                    if stop.wait(interval):
                        return
                    conn.sendall(bytes([byte]))
            stop.wait()
        except OSError:
            pass  # the client hung up: what a refusal looks like from here

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            connections.append(conn)
            threading.Thread(target=talk, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in connections:
            conn.close()
        listener.close()


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"
