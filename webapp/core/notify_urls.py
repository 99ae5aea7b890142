"""Which notification URLs the lab sends to: a user's `notify_url` (an apprise URL such as
json://host/path, ntfys://topic, slack://tokens, mailtos://...), sent by the light worker.

Not through the environment guard's allow list (envs/netguard.py `ENVLAB_ALLOWED_ENV_NETWORKS`):
a notification target is a different trust decision from an environment server. The same
address rules apply with their own switch: the hosts a URL names (the URL's own host, and the
host apprise parsed from it) may not be loopback or private unless
ENVLAB_NOTIFY_ALLOW_PRIVATE is on, and link-local, cloud metadata, multicast and reserved
addresses are refused whatever it says. A service URL (slack://, discord://...) names tokens
where a host would be: those do not resolve and the plugin posts to its service's public host.

Checked when the URL is stored (its form, and an address written in it) and again just before
each send (every name resolved). Not pinned: apprise's own HTTP client resolves the name again
when it connects, so a name that changes its address between the two (DNS rebinding) is not
caught, unlike an environment's connections.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from envs.netguard import PRIVATE_RULE, address_refusal, getaddrinfo

# Every address, for address_refusal's allow list when private targets are allowed: the rules
# that hold whatever is allowed (link-local, metadata, multicast, reserved) still apply.
_ANYWHERE = [ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")]
_PRIVATE_TEXT = "loopback and private addresses need ENVLAB_NOTIFY_ALLOW_PRIVATE (it is off)"
RESOLVE_SECONDS = 5.0


class NotifyUrlRefused(ValueError):
    """The notification URL cannot be used; the message says why (never the URL: it holds tokens)."""


def notify_plugin(url: str) -> Any:
    """The apprise plugin for `url`, or NotifyUrlRefused when apprise does not know its form."""
    import apprise

    plugin = apprise.Apprise.instantiate(url.strip())
    if plugin is None:
        raise NotifyUrlRefused(
            "not a notification URL apprise knows (for example json://host/path, ntfys://topic, "
            "slack://..., discord://...; see the apprise wiki for each service's form)"
        )
    return plugin


def _hosts(url: str, plugin: Any) -> list[str]:
    hosts = []
    try:
        hosts.append(urlsplit(url.strip()).hostname or "")
    except ValueError:
        pass
    host = getattr(plugin, "host", None)
    if isinstance(host, str):
        hosts.append(host.strip("[]").lower())
    return sorted({h for h in hosts if h})


def _addresses(host: str, *, resolve: bool) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    if not resolve:
        return []
    try:
        return [str(info[4][0]) for info in getaddrinfo(host, 443, RESOLVE_SECONDS)]
    except (OSError, UnicodeError):  # a token where a host would be, or no such name
        return []


def notify_url_check(url: str, *, resolve: bool) -> Any:
    """The apprise plugin for `url` once its form and its hosts' addresses pass (see the
    module's docstring); `resolve`: look names up too (at send time), not only literal addresses."""
    plugin = notify_plugin(url)
    allowed = _ANYWHERE if settings.ENVLAB_NOTIFY_ALLOW_PRIVATE else []
    for host in _hosts(url, plugin):
        for address in _addresses(host, resolve=resolve):
            rule = address_refusal(address, allowed)
            if rule is not None:
                rule = _PRIVATE_TEXT if rule == PRIVATE_RULE else rule
                raise NotifyUrlRefused(f"the notification URL's host {host} is refused: {rule}")
    return plugin
