"""The live run page beyond its charts, in headless Chromium (Debian's package): the facts
(worker, attempts, checkpoint, started, finished), the events list, the alert banner and
the status badge follow the run without a reload, and what the socket missed is read back
over REST when it reconnects.

Real parts throughout: the ASGI server, Redis, the database; the first test drives the
worker's telemetry sink from this process, the second trains for real in the Celery worker
against an environment server whose every tool call fails.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_for, wait_status
from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim, run_finish
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

XSS = '<img src=x onerror="window.__xss=1">'

# Keeps every WebSocket the page opens, so a test can drop the connection as a network would.
KEEP_SOCKETS = """
(() => {
  const Real = window.WebSocket;
  window.__sockets = [];
  function Kept(url, protocols) {
    const socket = protocols === undefined ? new Real(url) : new Real(url, protocols);
    window.__sockets.push(socket);
    return socket;
  }
  Kept.prototype = Real.prototype;
  for (const name of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) Kept[name] = Real[name];
  window.WebSocket = Kept;
})();
"""


def _in_thread(call, **kwargs: Any) -> Any:
    """Call a service from another thread: Playwright's event loop runs in this one, where
    the channel layer's async_to_sync refuses to run (the notification would be dropped)."""
    from django.db import connection

    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = call(**kwargs)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    return result["value"]


# Notes the run's step and status when the alert banner first appears (none at load).
WATCH_BANNER = """
document.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("run-page");
  if (!root) return;
  window.__bannerAtLoad = !!document.getElementById("run-alerts");
  new MutationObserver(() => {
    if (window.__alerted || !document.getElementById("run-alerts")) return;
    window.__alerted = {
      step: Number(document.getElementById("run-step").textContent),
      status: root.dataset.status,
    };
  }).observe(root, { childList: true, subtree: true });
});
"""


def _open(browser, web: str, run_id: int):
    page = browser.new_page()
    page.add_init_script(KEEP_SOCKETS)
    page.add_init_script(WATCH_BANNER)
    log_in(page, web, f"/runs/{run_id}/")
    page.wait_for_selector('#run-page[data-live="live"][data-facts="synced"]', timeout=20_000)
    # Gone after a reload: proves that what follows arrived without one.
    page.evaluate("window.__sameDocument = true")
    return page


def _text(page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


def _wait_text(page, selector: str, text: str, timeout: float = 10_000) -> None:
    page.wait_for_function(
        "([selector, text]) => { const n = document.querySelector(selector); return n && n.textContent.trim() === text; }",
        arg=[selector, text],
        timeout=timeout,
    )


def _shown_events(page) -> list[tuple[int, str, str]]:
    """The events list, top to bottom: (id, kind, message)."""
    rows = page.eval_on_selector_all(
        "#run-events li[data-event-id]",
        "els => els.map(e => [Number(e.dataset.eventId), e.querySelector('.event-kind').textContent,"
        " e.querySelector('.event-message').textContent])",
    )
    return [tuple(row) for row in rows]


def _stored_events(run_id: int) -> list[tuple[int, str, str]]:
    """The run's events newest first, as the page lists them."""
    return [
        (pk, kind, message)
        for pk, kind, message in RunEvent.objects.filter(run_id=run_id)
        .order_by("-id")
        .values_list("pk", "kind", "message")
    ]


def test_facts_events_banner_and_badge_follow_the_run_and_survive_a_dropped_socket(
    browser, owner, web
):
    run = RunFactory(owner=owner, name="facts", config={"model": "demo:echo"}, max_steps=4)
    RunEvent.objects.create(run=run, kind="queued", message="Run queued.")
    page = _open(browser, web, run.pk)
    assert (
        _text(page, "#run-worker"),
        _text(page, "#run-attempts"),
        _text(page, "#run-checkpoint"),
    ) == (
        "—",
        "0",
        "—",
    )
    assert page.locator("#run-alerts").count() == 0

    # Claimed by a worker: status, worker, attempts, started and the event, live.
    _in_thread(run_claim, run_id=run.pk, lease_owner="browser-test", worker_name="worker-one")
    _wait_text(page, "#run-worker", "worker-one")
    _wait_text(page, "#run-status", "running")
    assert _text(page, "#run-attempts") == "1"
    started = Run.objects.get(pk=run.pk).started_at
    assert _text(page, "#run-started") == started.strftime("%Y-%m-%d %H:%M:%S")
    wait_for(lambda: _shown_events(page) == _stored_events(run.pk), 10, "the claimed event to show")

    # Telemetry raises an alert quoting environment text, and records a checkpoint.
    sink = TelemetrySink(run_id=run.pk, lease_owner="browser-test", heartbeat_seconds=0.5)
    sink.metrics(1, {"reward": 0.0, "tools/failure_frequency": 1.0})
    sink.alert(
        {"kind": "tool_failures", "step": 1, "message": f"most often: {XSS}", "active": True}
    )
    sink.metrics(2, {"reward": 0.0, "tools/failure_frequency": 1.0})
    sink.checkpoint(2)
    assert sink.close(timeout=20) is True
    page.wait_for_selector('#run-alerts li.run-alert[data-kind="tool_failures"]', timeout=10_000)
    _wait_text(page, "#run-checkpoint", "step 2")
    assert _text(page, "#run-alerts h2") == "Run health: 1 active alert"
    assert _text(page, "#run-alerts li.run-alert") == f"tool_failures (step 1): most often: {XSS}"
    wait_for(lambda: _shown_events(page) == _stored_events(run.pk), 10, "the alert event to show")

    # Written while the socket is down (as if its notification were lost): read back on reconnect.
    page.evaluate("window.__sockets[window.__sockets.length - 1].close()")
    page.wait_for_selector('#run-page:not([data-live="live"])', timeout=5_000)
    missed = RunEvent.objects.create(run=run, kind="note", message=f"missed {XSS}")
    Run.objects.filter(pk=run.pk).update(worker_name="worker-two")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    _wait_text(page, "#run-worker", "worker-two")
    wait_for(lambda: _shown_events(page) == _stored_events(run.pk), 10, "the missed event to show")
    assert _shown_events(page)[0] == (missed.pk, "note", f"missed {XSS}")
    assert page.evaluate("window.__sockets.length") == 2

    # Finished with the alert still active: "succeeded, with warnings", not the bare status.
    _in_thread(
        run_finish, run_id=run.pk, lease_owner="browser-test", status=Run.Status.SUCCEEDED, step=2
    )
    _wait_text(page, "#run-status", "succeeded, with warnings")
    page.wait_for_selector('#run-page[data-facts="synced"]', timeout=10_000)
    finished = Run.objects.get(pk=run.pk).finished_at
    assert _text(page, "#run-finished") == finished.strftime("%Y-%m-%d %H:%M:%S")
    wait_for(
        lambda: _shown_events(page) == _stored_events(run.pk), 10, "the succeeded event to show"
    )
    assert page.locator("#run-alerts").count() == 1
    # Each shown once, model text as text, and all of it without a reload.
    ids = [event[0] for event in _shown_events(page)]
    assert len(ids) == len(set(ids)) == 5
    assert page.evaluate("window.__xss") is None
    assert page.evaluate("window.__sameDocument") is True
    page.close()


def test_a_real_run_raises_its_alert_on_the_open_page_and_ends_with_warnings(
    browser, api, owner, web, broken_echo_url, worker
):
    env_id = register_echo(api, broken_echo_url)
    # Room for the error text (TRL drops a tool result that would overrun the completion);
    # every call fails, so the tool_failures alert comes at step 7 of 10, mid-run: late
    # enough for the page to be open first on a loaded machine (the whole suite running).
    config = run_config(env_id, max_steps=10, save_steps=2, max_completion_length=128)
    config["alerts"] = {"tool_failure_steps": 7}
    run_id = api.post("/api/runs/", config, format="json").json()["id"]

    page = _open(browser, web, run_id)
    # What the page itself saw when it loaded (not when `_open` returned, which may be after
    # the alert on a loaded machine): no banner then, and one later, while still running.
    no_banner_at_first = page.evaluate("window.__bannerAtLoad") is False

    wait_status(run_id, ("succeeded", "failed", "cancelled", "interrupted"), 300, worker)
    _wait_text(page, "#run-status", "succeeded, with warnings", timeout=20_000)
    page.wait_for_selector('#run-page[data-facts="synced"]', timeout=10_000)

    alerted = page.evaluate("window.__alerted")
    run = Run.objects.get(pk=run_id)
    assert no_banner_at_first
    # The banner came while the run was still training.
    assert alerted is not None and alerted["status"] == "running" and alerted["step"] < 10, alerted
    assert page.locator('#run-alerts li.run-alert[data-kind="tool_failures"]').count() == 1
    assert (run.status, run.step, run.checkpoint_step, run.attempts) == ("succeeded", 10, 10, 1)
    assert (
        _text(page, "#run-worker"),
        _text(page, "#run-attempts"),
        _text(page, "#run-checkpoint"),
    ) == (
        run.worker_name,
        "1",
        "step 10",
    )
    wait_for(lambda: _shown_events(page) == _stored_events(run_id), 10, "every event to show")
    kinds = [kind for _, kind, _ in _shown_events(page)]
    assert (kinds[0], kinds[-2:]) == ("succeeded", ["claimed", "queued"]), kinds
    assert "alert" in kinds
    assert page.evaluate("window.__sameDocument") is True
    page.close()
