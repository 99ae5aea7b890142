"""Which outbound addresses the lab may reach, and an HTTP opener that keeps to them.

Every URL the lab fetches on a user's behalf (an environment's `base_url`, a vLLM
server) is checked here: http(s) only, no userinfo, no query, and every address the
host resolves to must be allowed. Link-local and cloud metadata addresses are never
allowed; loopback and private ranges only inside `ENVLAB_ALLOWED_ENV_NETWORKS`. Refusals
name the rule that applies and nothing about what answers at the address.

A name may resolve differently when the request is made (DNS rebinding): the opener's
connections, `probe_capacity`'s and every episode WebSocket's (envs/adapters/pinned_ws.py)
resolve and check again, and connect only to an address they checked. Still not: the
openreward SDK's aiohttp sessions check at their connector (envs/adapters/ors.py) and its
pinger does not (security review K1); a Harbor client's HTTP calls go through httpx.
Settings are read at call time, so tests and the worker see the current values.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
SocketHook = Callable[[socket.socket], None]

DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
PRIVATE_RULE = (
    "private/loopback addresses need ENVLAB_ALLOWED_ENV_NETWORKS (this one is not listed there)"
)
_NEVER: tuple[tuple[IPNetwork, str], ...] = (
    (
        ipaddress.ip_network("169.254.0.0/16"),
        "addresses in 169.254.0.0/16 (link-local, cloud metadata) are never allowed",
    ),
    (ipaddress.ip_network("fe80::/10"), "addresses in fe80::/10 (link-local) are never allowed"),
    (ipaddress.ip_network("fd00:ec2::254/128"), "fd00:ec2::254 (cloud metadata) is never allowed"),
    # Inside ranges an operator may allow (100.64.0.0/10 for Tailscale, fc00::/7): Alibaba
    # Cloud's and GCP's IPv6 metadata servers.
    (ipaddress.ip_network("100.100.100.200/32"), "100.100.100.200 (cloud metadata) is never allowed"),
    (ipaddress.ip_network("fd20:ce::254/128"), "fd20:ce::254 (cloud metadata) is never allowed"),
    (ipaddress.ip_network("0.0.0.0/8"), "unspecified addresses (0.0.0.0/8, ::) are never allowed"),
)
_SPECIAL_RULE = "unspecified, multicast and reserved addresses are never allowed"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# http.client's "no timeout given" marker: the socket keeps the process default.
DEFAULT_TIMEOUT: Any = getattr(socket, "_GLOBAL_DEFAULT_TIMEOUT", object())


class OutboundRefused(ValueError):
    """A URL or address the lab must not reach; the message names the rule."""


def setting(name: str, default: Any) -> Any:
    """The Django setting `name`, or `default` where it is unset or there are no settings."""
    try:
        return getattr(settings, name, default)
    except ImproperlyConfigured:  # no Django settings (a script): the strict default
        return default


def max_response_bytes() -> int:
    return int(setting("ENVLAB_MAX_RESPONSE_BYTES", DEFAULT_MAX_RESPONSE_BYTES))


def allowed_networks() -> list[IPNetwork]:
    networks = []
    for entry in setting("ENVLAB_ALLOWED_ENV_NETWORKS", []):
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"ENVLAB_ALLOWED_ENV_NETWORKS: {entry!r} is not a CIDR network like 10.0.0.0/8"
            ) from None
    return networks


def _unwrap(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def address_refusal(address: str, allowed: Iterable[IPNetwork] | None = None) -> str | None:
    """Why `address` may not be reached (the rule), or None when it may."""
    ip = _unwrap(ipaddress.ip_address(address))
    for network, rule in _NEVER:
        if ip in network:
            return rule
    if ip.is_unspecified or ip.is_multicast:
        return _SPECIAL_RULE
    if not ip.is_loopback:
        if ip.is_reserved:
            return _SPECIAL_RULE
        if ip.is_global:
            return None
    networks = allowed_networks() if allowed is None else allowed
    return None if any(ip in network for network in networks) else PRIVATE_RULE


def _refusal_of_any(addresses: Iterable[str]) -> str | None:
    allowed = allowed_networks()
    for address in addresses:
        rule = address_refusal(address, allowed)
        if rule is not None:
            return rule
    return None


_RESOLVER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="netguard-dns")


def getaddrinfo(host: str, port: int, timeout: float | None = None) -> list[tuple[Any, ...]]:
    """socket.getaddrinfo for TCP, given up after `timeout` seconds (None: the resolver's own
    time). getaddrinfo blocks and cannot be interrupted: a lookup past its time is left to
    finish on a resolver thread, and its caller gets TimeoutError (security review K4)."""
    if timeout is None:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    future = _RESOLVER.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        return future.result(timeout=max(0.0, timeout))
    except FutureTimeout:
        future.cancel()
        raise TimeoutError(f"looking up {host} took longer than {timeout:g} s") from None


def _seconds(timeout: Any) -> float | None:
    return float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool) else None


def resolve(host: str, port: int, timeout: float | None = None) -> list[tuple[Any, ...]]:
    """getaddrinfo for a TCP connection, refused as a whole if any address is refused."""
    infos = getaddrinfo(host, port, timeout)
    rule = _refusal_of_any(str(info[4][0]) for info in infos)
    if rule is not None:
        raise OutboundRefused(f"the connection to {host} is refused: {rule}")
    return infos


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def unreachable_name(host: str) -> str:
    return (
        f"the host {host} does not resolve, or resolves to an address the lab may not reach "
        f"({PRIVATE_RULE}; link-local, metadata, multicast and reserved addresses never)"
    )


def _addresses(host: str, port: int, timeout: float | None = None) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]  # a literal needs no resolver (nor IPv6 routes)
    except ValueError:
        pass
    try:
        return [str(info[4][0]) for info in getaddrinfo(host, port, timeout)]
    except (OSError, UnicodeError):  # TimeoutError included: a lookup too slow is no answer
        return []


def check_outbound_url(url: str, *, name: str = "the URL", timeout: float | None = None) -> str:
    """The URL normalised (no trailing slash), after checking its form and its addresses.

    Raises:
        OutboundRefused: not http(s), no host, userinfo, query or fragment, a host that
            does not resolve, or one that resolves to any refused address.
    """
    text = (url or "").strip()
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise OutboundRefused(f"{name} must not contain spaces or control characters")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboundRefused(f"{name} must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise OutboundRefused(f"{name} must not carry a user name or password (user:password@host)")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise OutboundRefused(f"{name} must not carry a query or fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OutboundRefused(f"{name} has a port that is not a number from 1 to 65535") from None
    addresses = _addresses(parts.hostname, port, timeout)
    rule = _refusal_of_any(addresses) if addresses else None
    if _is_literal(parts.hostname):
        if rule is not None:
            raise OutboundRefused(f"{name} is refused: {rule}")
    elif not addresses or rule is not None:
        # One text for "no such name" and "a name for a refused address": two texts would
        # tell anyone which internal names exist and that they are private (review N13).
        raise OutboundRefused(f"{name} is refused: {unreachable_name(parts.hostname)}")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def create_connection(
    address: tuple[str, int],
    timeout: Any = DEFAULT_TIMEOUT,
    source_address: tuple[str, int] | None = None,
    *,
    on_socket: SocketHook | None = None,
) -> socket.socket:
    """socket.create_connection that resolves once, checks every address, and connects
    only to those (so the name cannot point elsewhere between check and connect)."""
    host, port = address
    last_error: OSError | None = None
    for family, kind, proto, _, sockaddr in resolve(host, port, _seconds(timeout)):
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not DEFAULT_TIMEOUT:
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            if on_socket is not None:
                on_socket(sock)  # before connect: a deadline may need to cut even that
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            last_error = exc
            sock.close()
    raise last_error or OSError(f"no address for {host}")


class _CheckedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, on_socket: SocketHook | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = partial(create_connection, on_socket=on_socket)


class _CheckedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, on_socket: SocketHook | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = partial(create_connection, on_socket=on_socket)


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, on_socket: SocketHook | None) -> None:
        super().__init__()
        self._on_socket = on_socket

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_CheckedHTTPConnection, on_socket=self._on_socket), req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, on_socket: SocketHook | None) -> None:
        super().__init__()
        self._on_socket = on_socket

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(
            partial(_CheckedHTTPSConnection, on_socket=self._on_socket),
            req,
            context=self._context,  # type: ignore[attr-defined]  # HTTPSHandler's own, private in typeshed
        )


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an error (HTTPError), never a second request to wherever it points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def opener(*, on_socket: SocketHook | None = None) -> urllib.request.OpenerDirector:
    """An opener for http(s) only: no proxy, no redirects, checked addresses.

    `on_socket` sees every socket before it connects (a probe's deadline closes them).
    """
    director = urllib.request.OpenerDirector()
    for handler in (
        _CheckedHTTPHandler(on_socket),
        _CheckedHTTPSHandler(on_socket),
        _RefuseRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ):
        director.add_handler(handler)
    return director


def read_capped(response: Any, limit: int | None = None) -> bytes:
    """The whole body, or ValueError once it passes `limit` (ENVLAB_MAX_RESPONSE_BYTES)."""
    limit = max_response_bytes() if limit is None else limit
    body = response.read(limit + 1)
    if len(body) > limit:
        raise ValueError(f"the answer is larger than {limit} bytes")
    return bytes(body)
