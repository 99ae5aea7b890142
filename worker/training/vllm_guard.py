"""TRL's vLLM client kept to the outbound rules (security review N2).

A run may name an external vLLM server (`generation.vllm_server_base_url`); the lab checks that
URL at launch and in the worker, and TRL's `VLLMClient` then talks to it with `requests`, which
by itself follows redirects, honours proxy variables, resolves the name again at each
connection, and puts the server's error body into the exception that becomes the run's error.
`guard_vllm_client()` gives TRL's client module a `requests` whose sessions (and `requests.get`):

- connect only to an address the rules allow, resolved and checked at connect time
  (`envs.netguard.create_connection`), so a name cannot be re-pointed after the check;
- refuse redirects, and ignore proxy variables from the environment;
- drop an error answer's body (the exception TRL raises says the status only), and the
  `X-Forwarded-For` header TRL would otherwise take as the host of its weight-sync group.

Everything else of `requests` is the real module. Idempotent; call it before the trainer is
built. A vLLM server the worker started itself is named with `trust_vllm_origin` and reached
without the rules (they need not allow loopback).
"""

from __future__ import annotations

import socket
import types
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from envs import netguard


class VllmRedirectRefused(requests.exceptions.RequestException):
    """The vLLM server answered with a redirect: refused, not followed."""


# The vLLM servers the worker started itself (worker/training/vllm_server.py, on loopback):
# reached without the rules, which may well not allow loopback on a GPU worker.
_TRUSTED: set[tuple[str, int]] = set()


def trust_vllm_origin(url: str) -> None:
    parts = urlsplit(url)
    if parts.hostname:
        _TRUSTED.add((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)))


def _new_conn(self: Any) -> socket.socket:
    if (self._dns_host, self.port) in _TRUSTED:
        return HTTPConnection._new_conn(self)  # noqa: SLF001 - urllib3's own connect, for a vLLM server the worker started
    timeout = self.timeout if isinstance(self.timeout, int | float) else netguard.DEFAULT_TIMEOUT
    options = self.socket_options or []

    def configure(sock: socket.socket) -> None:
        for option in options:
            sock.setsockopt(*option)

    try:
        return netguard.create_connection(
            (self._dns_host, self.port), timeout, self.source_address, on_socket=configure
        )
    except TimeoutError as exc:
        raise ConnectTimeoutError(self, f"Connection to {self.host} timed out") from exc
    except OSError as exc:
        raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc


class _CheckedHTTPConnection(HTTPConnection):
    _new_conn = _new_conn


class _CheckedHTTPSConnection(HTTPSConnection):
    _new_conn = _new_conn


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class _CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        raise netguard.OutboundRefused("the vLLM server is reached directly: no proxy")


class GuardedSession(requests.Session):
    def __init__(self) -> None:
        super().__init__()
        self.trust_env = False  # no proxies, no .netrc from the worker's environment
        self.max_redirects = 0
        self.mount("http://", HTTPAdapter())
        self.mount("https://", HTTPAdapter())

    def mount(self, prefix: str | bytes, adapter: Any) -> None:
        # TRL mounts its own adapter (retries, pool size): keep its settings, checked.
        if isinstance(adapter, HTTPAdapter) and not isinstance(adapter, _CheckedAdapter):
            held: Any = adapter  # requests keeps the pool settings in private attributes
            adapter = _CheckedAdapter(
                max_retries=held.max_retries, pool_connections=held._pool_connections,  # noqa: SLF001 - requests keeps an adapter's pool settings private
                pool_maxsize=held._pool_maxsize, pool_block=held._pool_block,  # noqa: SLF001 - requests keeps an adapter's pool settings private
            )
        super().mount(prefix, adapter)

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["allow_redirects"] = False
        kwargs.pop("proxies", None)
        response = super().request(method, url, *args, **kwargs)
        if response.is_redirect or response.is_permanent_redirect:
            response.close()
            raise VllmRedirectRefused(
                f"the vLLM server at {url!s} answered {response.status_code} with a redirect; "
                "redirects are refused (name the server's own address)"
            )
        response.headers.pop("X-Forwarded-For", None)
        if response.status_code != 200:
            # TRL copies the body into its exception, and that into the run's error.
            response._content = b"(the answer's body is not shown)"  # noqa: SLF001 - requests has no public way to replace a response's body
        return response


def _get(url: str, **kwargs: Any) -> requests.Response:
    with GuardedSession() as session:
        return session.get(url, **kwargs)


def guarded_requests() -> types.ModuleType:
    module = types.ModuleType("requests")
    module.__dict__.update(requests.__dict__)
    module.Session = GuardedSession  # type: ignore[attr-defined]
    module.session = GuardedSession  # type: ignore[attr-defined]
    module.get = _get  # type: ignore[attr-defined]
    module.envlab_guarded = True  # type: ignore[attr-defined]
    return module


def guard_vllm_client() -> None:
    """Give trl.generation.vllm_client the guarded `requests` (once per process)."""
    from trl.generation import vllm_client

    if not getattr(vllm_client.requests, "envlab_guarded", False):
        vllm_client.requests = guarded_requests()
