"""A notification endpoint for tests: a real HTTP server on loopback, the owner's `json://`
apprise target (webapp/runs/telemetry/notify.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Listener:
    """A tiny real HTTP server that records every POST (path, JSON body) and answers 200."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict]] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                posts.append((self.path, json.loads(self.rfile.read(length) or b"{}")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float) -> list[tuple[str, dict]]:
        """The POSTs, once at least `count` arrived (or `timeout` seconds passed)."""
        deadline = time.monotonic() + timeout
        while len(self.posts) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        return list(self.posts)
