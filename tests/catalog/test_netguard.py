"""Outbound URLs (security review H2, L7): the attacks as written, against real servers on
127.0.0.1, refused within the probe's deadline and with nothing written."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from envs import netguard
from tests.catalog.outbound_servers import Served, closed_port_url, http_server, raw_server
from webapp.catalog.kinds import probe_environment
from webapp.catalog.models import Environment
from webapp.catalog.probe import ProbeError, probe_capacity

pytestmark = pytest.mark.django_db

METADATA = "http://169.254.169.254/latest/meta-data/"
LINK_LOCAL = "addresses in 169.254.0.0/16 (link-local, cloud metadata) are never allowed"
PRIVATE = netguard.PRIVATE_RULE
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"


def unreadable(url: str) -> str:
    return (
        f"the server at {url} could not be read as an environment server "
        "(no answer, refused, timed out, redirected, too large or not JSON)"
    )


def register(api, base_url: str):
    started = time.monotonic()
    response = api.post(
        "/api/environments/", {"name": "candidate", "base_url": base_url}, format="json"
    )
    return response, time.monotonic() - started


# --- the address policy ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "allowed", "rule"),
    [
        ("169.254.169.254", ["0.0.0.0/0"], LINK_LOCAL),  # no allow-list opens link-local
        ("::ffff:169.254.169.254", [], LINK_LOCAL),  # IPv4-mapped IPv6 is unwrapped
        ("64:ff9b::a9fe:a9fe", [], LINK_LOCAL),  # so is NAT64
        ("fe80::1", ["fe80::/10"], "addresses in fe80::/10 (link-local) are never allowed"),
        ("fd00:ec2::254", ["fc00::/7"], "fd00:ec2::254 (cloud metadata) is never allowed"),
        ("0.0.0.0", ["0.0.0.0/0"], "unspecified addresses (0.0.0.0/8, ::) are never allowed"),
        ("224.0.0.1", [], "unspecified, multicast and reserved addresses are never allowed"),
        (
            "240.0.0.1",
            ["240.0.0.0/4"],
            "unspecified, multicast and reserved addresses are never allowed",
        ),
        ("127.0.0.1", [], PRIVATE),
        ("::1", [], PRIVATE),
        ("10.1.2.3", ["192.168.0.0/16"], PRIVATE),
        ("100.64.0.1", [], PRIVATE),  # carrier-grade NAT
        ("::ffff:127.0.0.1", [], PRIVATE),
        ("127.0.0.1", ["127.0.0.0/8"], None),
        ("::1", ["::1/128"], None),
        ("::ffff:10.1.2.3", ["10.0.0.0/8"], None),
        ("8.8.8.8", [], None),
        ("2606:4700::1111", [], None),
    ],
)
def test_address_policy(address: str, allowed: list[str], rule: str | None, settings) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = allowed
    assert netguard.address_refusal(address) == rule


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.org/", "the URL must be an http:// or https:// URL with a host"),
        ("http:///path", "the URL must be an http:// or https:// URL with a host"),
        ("http://example.org/?a=1", "the URL must not carry a query or fragment"),
        ("http://example.org/#top", "the URL must not carry a query or fragment"),
        ("http://example.org/?", "the URL must not carry a query or fragment"),
        ("http://exa mple.org/", "the URL must not contain spaces or control characters"),
        ("http://example.org:99999/", "the URL has a port that is not a number from 1 to 65535"),
        (
            "http://a@example.org/",
            "the URL must not carry a user name or password (user:password@host)",
        ),
        ("http://nothing.invalid/", f"the URL is refused: {netguard.unreachable_name('nothing.invalid')}"),
        ("http://[::ffff:169.254.169.254]/", f"the URL is refused: {LINK_LOCAL}"),
    ],
)
def test_url_form_is_checked(url: str, message: str) -> None:
    with pytest.raises(netguard.OutboundRefused) as refused:
        netguard.check_outbound_url(url)
    assert str(refused.value) == message


def test_url_is_normalised() -> None:
    assert (
        netguard.check_outbound_url("  HTTP://127.0.0.1:8000/env/  ") == "http://127.0.0.1:8000/env"
    )


# --- registration refuses before any connection ----------------------------------------


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("http://169.254.169.254/", f"base_url is refused: {LINK_LOCAL}"),
        ("http://169.254.169.254:{port}/latest/meta-data", f"base_url is refused: {LINK_LOCAL}"),
        (
            "http://[fd00:ec2::254]/",
            "base_url is refused: fd00:ec2::254 (cloud metadata) is never allowed",
        ),
        (
            "http://user:pw@127.0.0.1:{port}",
            "base_url must not carry a user name or password (user:password@host)",
        ),
        (
            "http://0.0.0.0:{port}",
            "base_url is refused: unspecified addresses (0.0.0.0/8, ::) are never allowed",
        ),
    ],
)
def test_registration_refuses_forbidden_urls_and_writes_nothing(
    api, template: str, message: str
) -> None:
    with http_server(body=b'{"status": "healthy"}') as target:
        port = target.url.rsplit(":", 1)[1]
        response, _ = register(api, template.format(port=port))
    assert (response.status_code, response.json()) == (400, {"base_url": [message]})
    assert target.hits == []
    assert Environment.objects.count() == 0


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.1", "2130706433"])
def test_loopback_is_refused_without_an_allowed_network(api, settings, host: str) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    with http_server(body=b'{"status": "healthy"}') as target:
        port = target.url.rsplit(":", 1)[1]
        response, _ = register(api, f"http://{host}:{port}")
    # A literal address is told its rule; a name gets the one text a name that does not
    # resolve gets too (N13: no oracle for which internal names exist).
    rule = PRIVATE if host == "127.0.0.1" else netguard.unreachable_name(host)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": [f"base_url is refused: {rule}"]},
    )
    assert PRIVATE in rule
    assert target.hits == []
    assert Environment.objects.count() == 0


def test_a_private_name_and_a_missing_name_are_refused_alike(settings) -> None:
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    texts = []
    for host in ("localhost", "nothing-here.invalid"):
        with pytest.raises(netguard.OutboundRefused) as refused:
            netguard.check_outbound_url(f"http://{host}:8000")
        texts.append(str(refused.value).replace(host, "HOST"))
    assert texts[0] == texts[1]


def test_connections_check_the_address_again(settings) -> None:
    # A name that resolved to an allowed address at registration may point elsewhere later
    # (DNS rebinding): the opener's connection refuses it without sending anything.
    settings.ENVLAB_ALLOWED_ENV_NETWORKS = []
    with http_server(body=b"{}") as target:
        with pytest.raises(netguard.OutboundRefused) as refused:
            netguard.opener().open(f"{target.url}/health", timeout=2)
    assert str(refused.value) == f"the connection to 127.0.0.1 is refused: {PRIVATE}"
    assert target.hits == []


# --- redirects ---------------------------------------------------------------------------


def test_redirect_to_cloud_metadata_is_not_followed(api) -> None:
    with http_server(status=302, headers={"Location": METADATA}) as redirecting:
        response, elapsed = register(api, redirecting.url)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": [unreadable(redirecting.url)]},
    )
    assert redirecting.hits == ["GET /health"]  # asked once; the redirect is a refusal
    assert elapsed < 10
    assert Environment.objects.count() == 0


def test_redirect_to_another_server_never_reaches_it(api) -> None:
    with http_server(body=b'{"status": "healthy"}') as target:
        with http_server(status=307, headers={"Location": f"{target.url}/health"}) as redirecting:
            response, _ = register(api, redirecting.url)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": [unreadable(redirecting.url)]},
    )
    assert (redirecting.hits, target.hits) == (["GET /health"], [])
    assert Environment.objects.count() == 0


# --- one deadline, bounded bodies ----------------------------------------------------------


def test_a_dripping_body_is_cut_at_the_deadline(api, settings) -> None:
    # One byte every 0.2 s never trips a per-request read timeout (3 s here); the probe's
    # deadline (ENVLAB_PROBE_DEADLINE, 10 s by default, as the README promises) does.
    assert settings.ENVLAB_PROBE_DEADLINE == 10.0
    with raw_server(JSON_HEAD, drip=b'{"status": "healthy", "pad": "' + b"x" * 100) as dripping:
        response, elapsed = register(api, dripping.url)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": [unreadable(dripping.url)]},
    )
    assert 9.5 < elapsed < 11
    assert dripping.hits == ["GET /health"]
    assert Environment.objects.count() == 0


def test_dripping_headers_are_cut_at_the_deadline(api, settings) -> None:
    settings.ENVLAB_PROBE_DEADLINE = 2.0
    with raw_server(b"HTTP/1.1 200 OK\r\n", drip=b"X-Slow: " + b"a" * 200) as dripping:
        response, elapsed = register(api, dripping.url)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": [unreadable(dripping.url)]},
    )
    assert elapsed < 3
    assert Environment.objects.count() == 0


def test_a_huge_body_is_refused(api, settings) -> None:
    settings.ENVLAB_MAX_RESPONSE_BYTES = 64 * 1024
    body = b'{"status": "healthy", "pad": "' + b"x" * (1024 * 1024) + b'"}'
    # Declared (refused from the header) and undeclared (refused once the cap is passed).
    with http_server(body=body) as declared, raw_server(JSON_HEAD + body) as undeclared:
        answers = [register(api, declared.url), register(api, undeclared.url)]
    assert [(r.status_code, r.json()) for r, _ in answers] == [
        (400, {"base_url": [unreadable(declared.url)]}),
        (400, {"base_url": [unreadable(undeclared.url)]}),
    ]
    assert all(elapsed < 10 for _, elapsed in answers)
    assert Environment.objects.count() == 0


def _refused_by_a_silent_server(probe: Callable[[str], object]) -> tuple[Served, str, float]:
    """Point `probe` at a server that takes the connection and never answers. Returns the
    server (its hits), the ProbeError's message, and the seconds the refusal took."""
    with raw_server(b"") as silent:
        started = time.monotonic()
        with pytest.raises(ProbeError) as refused:
            probe(silent.url)
        elapsed = time.monotonic() - started
    return silent, str(refused.value), elapsed


def test_detection_does_not_double_the_wait_for_a_silent_server(settings) -> None:
    settings.ENVLAB_PROBE_TIMEOUT = 1.0
    silent, message, elapsed = _refused_by_a_silent_server(probe_environment)
    assert message == unreadable(silent.url)
    assert silent.hits == ["GET /health"]
    assert 1.0 <= elapsed < 1.8


def test_capacity_of_a_silent_server_is_refused_within_its_timeout(settings) -> None:
    settings.ENVLAB_PROBE_TIMEOUT = 1.0
    silent, message, elapsed = _refused_by_a_silent_server(probe_capacity)
    assert message == unreadable(silent.url)
    assert elapsed < 2


# --- one message ---------------------------------------------------------------------------


def test_unreadable_servers_all_get_the_same_message(api) -> None:
    with (
        raw_server(b"") as silent,
        http_server(body=b"<html>hello</html>", headers={"Content-Type": "text/html"}) as not_json,
        http_server(status=500, body=b'{"detail": "internal secret"}') as failing,
        http_server(status=301, headers={"Location": "http://127.0.0.1:1/"}) as redirecting,
    ):
        urls = [closed_port_url(), silent.url, not_json.url, failing.url, redirecting.url]
        messages = [register(api, url)[0].json()["base_url"] for url in urls]
    assert [m[0].replace(url, "URL") for m, url in zip(messages, urls, strict=True)] == [
        unreadable("URL")
    ] * 5
    assert Environment.objects.count() == 0


def test_health_status_text_is_not_repeated(api) -> None:
    # Every path answers this object: /schema has an action, so the probe gets as far as
    # judging /health, and says so without quoting the server.
    body = b'{"status": "db at 10.0.0.7 is down", "action": {"properties": {"text": {"type": "string"}}}}'
    with http_server(body=body) as server:
        response, _ = register(api, server.url)
    assert (response.status_code, response.json()) == (
        400,
        {"base_url": ["/health does not report the server healthy"]},
    )
    assert Environment.objects.count() == 0
