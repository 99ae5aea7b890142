"""STAND-IN for the Hugging Face Hub (the hub cannot be reached from here): a local HTTP server
that answers the four calls `HfApi.create_repo` and `HfApi.create_commit` make for small files
(create the repo, check a README's card, ask each file's upload mode, commit the files inline), keeping what it was sent
so a test can read back the uploaded files. Anything else is a 404, so a new call the library
starts to make shows up as a failed test rather than as a silent pass."""

from __future__ import annotations

import base64
import gzip
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class HubRecord:
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)  # repo id -> create body
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # repo id -> path -> bytes
    commits: list[dict[str, Any]] = field(default_factory=list)  # commit headers
    tokens: list[str] = field(default_factory=list)  # Authorization headers seen
    cards: list[str] = field(default_factory=list)  # README texts sent for validation
    unknown: list[str] = field(default_factory=list)  # "METHOD path" answered 404


def _handler(record: HubRecord, base: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            return data

        def do_POST(self) -> None:  # http.server's name
            record.tokens.append(self.headers.get("Authorization", ""))
            path = self.path.split("?")[0]
            parts = path.strip("/").split("/")
            if path == "/api/repos/create":
                body = json.loads(self._body())
                repo = f"{body.get('organization') or 'user'}/{body['name']}"
                record.repos[repo] = body
                record.files.setdefault(repo, {})
                return self._send(200, {"url": f"{base[0]}/datasets/{repo}", "name": repo})
            if path == "/api/validate-yaml":  # a README's card header, checked before the commit
                body = json.loads(self._body())
                record.cards.append(body.get("content", ""))
                return self._send(200, {"errors": [], "warnings": []})
            if len(parts) >= 6 and parts[:2] == ["api", "datasets"] and parts[4] == "preupload":
                repo = f"{parts[2]}/{parts[3]}"
                files = json.loads(self._body())["files"]
                return self._send(200, {"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
                ]})
            if len(parts) >= 6 and parts[:2] == ["api", "datasets"] and parts[4] == "commit":
                repo = f"{parts[2]}/{parts[3]}"
                if repo not in record.repos:
                    return self._send(404, {"error": f"Repository {repo} not found"})
                for line in self._body().splitlines():
                    item = json.loads(line)
                    if item["key"] == "header":
                        record.commits.append(item["value"])
                    elif item["key"] == "file":
                        value = item["value"]
                        record.files[repo][value["path"]] = base64.b64decode(value["content"])
                oid = f"{len(record.commits):040x}"
                return self._send(200, {
                    "commitUrl": f"{base[0]}/datasets/{repo}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None,
                })
            record.unknown.append(f"POST {path}")
            return self._send(404, {"error": "not in the stand-in"})

        def do_GET(self) -> None:
            record.unknown.append(f"GET {self.path}")
            self._send(404, {"error": "not in the stand-in"})

    return Handler


@contextmanager
def hub_standin() -> Iterator[tuple[str, HubRecord]]:
    record = HubRecord()
    base: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(record, base))
    base.append(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base[0], record
    finally:
        server.shutdown()
        server.server_close()
