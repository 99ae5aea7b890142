"""Steps the browser tests share (tests/e2e, Playwright pages)."""

from __future__ import annotations

from typing import Any


def log_in(page: Any, web: str, next_path: str) -> None:
    """Sign ``page`` in through the login form as the ``owner`` fixture (password ``owner-pw``),
    which then sends it on to ``next_path``; the caller waits for what that page shows."""
    page.goto(f"{web}/login/?next={next_path}")
    page.fill("input[name=username]", "owner")
    page.fill("input[name=password]", "owner-pw")
    page.click("button[type=submit], input[type=submit]")
