"""DRF throttles that read their rates at request time and fail open when the cache is down.

The counters live in Redis (settings.CACHES). Redis being down already delays the live view
and queues launches; it must not also turn every API read into a 500, so a cache error lets
the request through (and is logged once per request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from rest_framework import throttling
from rest_framework.settings import api_settings

log = logging.getLogger(__name__)

# What a view decorated by throttle_posts returns, besides the 429 page: HttpResponse for the
# page views, HttpResponseBase for what method_decorator hands it (the sign-in view's post).
_Response = TypeVar("_Response", bound=HttpResponseBase)


class _RatesFromSettings:
    scope: str | None

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope) if self.scope else None  # type: ignore[return-value]  # the stubs say numbers; DRF's rates are strings ("60/min")

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return super().allow_request(request, view)  # type: ignore[misc]
        except Exception as exc:  # the cache backend's connection errors vary by client
            log.warning("throttle %s skipped: cache unavailable (%s)", self.scope, type(exc).__name__)
            return True


class AnonRateThrottle(_RatesFromSettings, throttling.AnonRateThrottle):
    pass


class UserRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    pass


class ScopedRateThrottle(_RatesFromSettings, throttling.ScopedRateThrottle):
    pass


class WriteThrottled:
    """A view mixin: the scoped throttle `write_throttle_scope` counts writes (POST, PUT, ...)
    only, so reading a list is never refused because its user launched runs."""

    write_throttle_scope: str = ""
    throttle_scope: str | None = None
    request: Any

    def get_throttles(self) -> list[Any]:
        safe = self.request.method in ("GET", "HEAD", "OPTIONS")
        self.throttle_scope = None if safe else self.write_throttle_scope
        return super().get_throttles()  # type: ignore[misc]


def throttle_posts(scope: str) -> Callable[[Callable[..., _Response]], Callable[..., _Response | HttpResponse]]:
    """Page views that do an API's work (launch, register, probe, capacity) get its rate for
    `scope` on their form posts: a 429 page past it, and nothing done."""
    from types import SimpleNamespace

    def decorator(view: Callable[..., _Response]) -> Callable[..., _Response | HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> _Response | HttpResponse:
            if request.method == "POST":
                throttle = ScopedRateThrottle()
                if not throttle.allow_request(request, SimpleNamespace(throttle_scope=scope)):
                    wait = throttle.wait()
                    return render(
                        request, "429.html", {"wait": int(wait) + 1 if wait else 60}, status=429
                    )
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
