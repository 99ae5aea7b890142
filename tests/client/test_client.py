"""envlab_client.Client's plumbing: lists in every paging shape, errors worded as the API
worded them, and the stored login. The lab itself is driven by tests/e2e/test_envlab_cli.py
(and its paging by tests/api/test_paging.py); here a small HTTP server of the test's own
answers with the shapes the lab serves, a capped bare list's `Link` header included."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from envlab_client import Client, EnvlabError
from envlab_client.config import load_login, save_login

ROUTES: dict[str, tuple[Any, ...]] = {}
SEEN: list[tuple[str, str, str | None]] = []
BODIES: list[Any] = []  # each request's JSON body, None without one


class Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        SEEN.append((self.command, self.path, self.headers.get("Authorization")))
        length = int(self.headers.get("Content-Length") or 0)
        BODIES.append(json.loads(self.rfile.read(length)) if length else None)
        status, body, *headers = ROUTES.get(self.path, (404, {"detail": "Not found."}))
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers[0] if headers else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json" if not isinstance(body, bytes) else "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def lab() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ROUTES.clear()
    SEEN.clear()
    BODIES.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_bare_list_is_returned_as_it_is(lab):
    ROUTES["/api/environments/"] = (200, [{"id": 1}, {"id": 2}])
    assert Client(lab, "t0k").environments() == [{"id": 1}, {"id": 2}]
    assert SEEN == [("GET", "/api/environments/", "Token t0k")]


def test_a_count_page_is_followed_through_next_without_repeating_the_query(lab):
    ROUTES["/api/runs/?limit=2"] = (200, {"count": 3, "next": f"{lab}/api/runs/?limit=2&offset=2", "previous": None,
                                          "results": [{"id": 9}, {"id": 8}]})
    ROUTES["/api/runs/?limit=2&offset=2"] = (200, {"count": 3, "next": None, "previous": f"{lab}/api/runs/?limit=2",
                                                   "results": [{"id": 7}]})
    assert Client(lab, "t0k").runs(limit=2) == [{"id": 9}, {"id": 8}, {"id": 7}]
    assert [path for _, path, _ in SEEN] == ["/api/runs/?limit=2", "/api/runs/?limit=2&offset=2"]


def test_a_capped_bare_list_is_followed_through_its_link_header(lab):
    ROUTES["/api/runs/?tag=a"] = (200, [{"id": 9}, {"id": 8}], {
        "X-Total-Count": "3", "Link": f'<{lab}/api/runs/?tag=a&limit=2&offset=2>; rel="next"',
    })
    ROUTES["/api/runs/?tag=a&limit=2&offset=2"] = (200, {"count": 3, "next": None, "previous": None,
                                                         "results": [{"id": 7}]})
    assert Client(lab, "t0k").runs(tag="a") == [{"id": 9}, {"id": 8}, {"id": 7}]
    assert [path for _, path, _ in SEEN] == ["/api/runs/?tag=a", "/api/runs/?tag=a&limit=2&offset=2"]


def test_sweeps_are_launched_listed_read_and_their_rest_cancelled(lab):
    sweep = {"id": 3, "name": "lr", "method": "random", "status": "running", "size": 4}
    ROUTES["/api/sweeps/"] = (201, sweep)
    client = Client(lab, "t0k")
    base = {"name": "b", "model": "demo:echo"}
    assert client.launch_sweep(base, {"grpo.seed": [0, 1]}, name="lr", method="random", count=4, seed=0) == sweep
    # A seed of 0 is sent; an empty name and an absent count are not.
    client.launch_sweep(base, {"grpo.seed": [0, 1]})
    assert BODIES == [
        {"base": base, "grid": {"grpo.seed": [0, 1]}, "method": "random", "name": "lr", "count": 4, "seed": 0},
        {"base": base, "grid": {"grpo.seed": [0, 1]}, "method": "grid"},
    ]
    ROUTES["/api/sweeps/"] = (200, [sweep])
    ROUTES["/api/sweeps/3/?metric=loss"] = (200, {**sweep, "metric": "loss", "members": []})
    ROUTES["/api/sweeps/3/cancel-rest/"] = (200, {"cancelled": [11, 12]})
    assert client.sweeps() == [sweep]
    assert client.sweep(3, metric="loss")["metric"] == "loss"
    assert client.cancel_sweep_rest(3) == [11, 12]
    assert [(method, path) for method, path, _ in SEEN[2:]] == [
        ("GET", "/api/sweeps/"), ("GET", "/api/sweeps/3/?metric=loss"), ("POST", "/api/sweeps/3/cancel-rest/"),
    ]


def test_rollout_pages_are_followed(lab):
    ROUTES["/api/runs/4/rollouts/?limit=200"] = (200, {"results": [{"seq": 1}], "next": f"{lab}/api/runs/4/rollouts/?after_seq=1&limit=200"})
    ROUTES["/api/runs/4/rollouts/?after_seq=1&limit=200"] = (200, {"results": [{"seq": 2}], "next": None})
    assert [r["seq"] for r in Client(lab, "t").rollouts(4)] == [1, 2]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (404, {"detail": "No Run matches the given query."}, "No Run matches the given query."),
        (400, {"name": ["you already have an environment named 'x'"], "base_url": ["give a URL", "of a server"]},
         "name: you already have an environment named 'x'; base_url: give a URL; of a server"),
        (400, {"non_field_errors": ["Unable to log in with provided credentials."]},
         "Unable to log in with provided credentials."),
        (502, b"<html>Bad gateway</html>", "<html>Bad gateway</html>"),
    ],
)
def test_an_error_carries_the_apis_message_and_status(lab, status, body, message):
    ROUTES["/api/runs/5/cancel/"] = (status, body)
    with pytest.raises(EnvlabError) as raised:
        Client(lab, "t").cancel(5)
    assert (raised.value.status, raised.value.message) == (status, message)
    assert str(raised.value) == f"{message} (HTTP {status})"


def test_a_lab_that_does_not_answer_is_one_error_too():
    with pytest.raises(EnvlabError) as raised:
        Client("http://127.0.0.1:9", "t", timeout=2).runs()
    assert raised.value.status is None
    assert raised.value.message.startswith("cannot reach the lab at http://127.0.0.1:9/: ")


def test_the_login_file_is_its_users_alone_even_when_it_was_wider(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVLAB_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.delenv("ENVLAB_URL", raising=False)
    monkeypatch.delenv("ENVLAB_TOKEN", raising=False)
    with pytest.raises(EnvlabError, match=r"^not logged in: run `envlab login`"):
        load_login()
    path = save_login("http://lab:8000/", "first")
    os.chmod(path, 0o644)
    assert save_login("http://lab:8000/", "second") == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": "http://lab:8000", "token": "second"}
    assert load_login() == ("http://lab:8000", "second")
    monkeypatch.setenv("ENVLAB_URL", "http://other:1")
    monkeypatch.setenv("ENVLAB_TOKEN", "env-token")
    assert load_login() == ("http://other:1", "env-token")


def test_login_with_a_token_checks_it_before_storing_it(lab, tmp_path, monkeypatch):
    from envlab_client.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("ENVLAB_CONFIG_DIR", str(tmp_path))
    ROUTES["/api/auth/tokens/"] = (401, {"detail": "Invalid token."})
    refused = CliRunner().invoke(app, ["login", "--url", lab, "--token", "bad"])
    assert (refused.exit_code, refused.stderr) == (1, "error: Invalid token. (HTTP 401)\n")
    assert not (tmp_path / "login.json").exists()

    ROUTES["/api/auth/tokens/"] = (200, [])
    stored = CliRunner().invoke(app, ["login", "--url", lab + "/", "--token", "good"])
    assert stored.exit_code == 0, stored.output
    assert json.loads((tmp_path / "login.json").read_text()) == {"url": lab, "token": "good"}
    assert SEEN == [("GET", "/api/auth/tokens/", "Token bad"), ("GET", "/api/auth/tokens/", "Token good")]
