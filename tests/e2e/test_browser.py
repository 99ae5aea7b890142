"""The live run page in headless Chromium (Debian's package): log in through the form,
open a running run, and watch a chart gain points and transcripts appear without a
reload, as telemetry flows through the real sink, database, Redis and ASGI server."""

from __future__ import annotations

import threading

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.services import run_claim
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]



def _push(run_id: int, steps: range, evil: str) -> None:
    """Telemetry from another thread, as the trainer's would be."""
    sink = TelemetrySink(run_id=run_id, lease_owner="browser-test", heartbeat_seconds=0.5)
    for step in steps:
        sink.metrics(
            step,
            {
                "reward": step / 10,
                "rewards/env_reward/mean": step / 10,
                "tools/call_frequency": 1.0,
                "tools/failure_frequency": 0.0,
                "loss": 0.5,
            },
        )
        sink.rollouts(
            [
                {
                    "step": step,
                    "env": "echo",
                    "prompt": [{"role": "user", "content": "Echo 'hi'."}],
                    "messages": [
                        {
                            "role": "assistant",
                            "content": evil,
                            "tool_calls": [
                                {
                                    "type": "function",
                                    "function": {"name": "echo", "arguments": {"message": evil}},
                                }
                            ],
                        },
                        {"role": "tool", "name": "echo", "content": evil},
                    ],
                    "rewards": {"env_reward": 1.0},
                    "reward": 1.0,
                    "advantage": 0.25,
                }
            ]
        )
    sink.close(timeout=20)


def test_live_page_gains_points_and_transcripts(browser, owner, web):
    run = RunFactory(owner=owner, name="live", config={"model": "demo:echo"}, max_steps=20)
    run_claim(run_id=run.pk, lease_owner="browser-test", worker_name="test")
    evil = '<img src=x onerror="window.__xss=1">'
    first = threading.Thread(target=_push, args=(run.pk, range(1, 3), evil))
    first.start()
    first.join()

    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    page.wait_for_selector('#chart-reward[data-points="2"]', timeout=10_000)
    assert page.locator("article.rollout").count() == 2

    # New steps arrive while the page is open: no reload.
    url_before = page.url
    later = threading.Thread(target=_push, args=(run.pk, range(3, 6), evil))
    later.start()
    later.join()
    page.wait_for_selector('#chart-reward[data-points="5"]', timeout=10_000)
    page.wait_for_function(
        "document.querySelectorAll('article.rollout').length === 5", timeout=10_000
    )
    assert page.url == url_before
    seqs = page.eval_on_selector_all(
        "article.rollout", "els => els.map(e => Number(e.dataset.seq))"
    )
    assert len(seqs) == len(set(seqs)) == 5
    # Model text is shown as text, never run (the list shows transcripts collapsed: open one).
    page.locator("article.rollout").first.locator("button.rollout-toggle").click()
    page.wait_for_selector("article.rollout.expanded .rollout-body")
    assert page.evaluate("window.__xss") is None
    assert evil in page.locator("article.rollout").first.inner_text()
    assert page.locator("#run-step").inner_text().strip() == "5"
    page.close()
