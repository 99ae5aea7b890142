"""The run page stays live in headless Chromium: while a run trains, the Tools table fills
with calls and the Checkpoints table gains a row (and the evaluate card shows) from the run's
socket notes, without a reload; when the run ends the live badge goes and the re-score card
shows. No training worker: the telemetry goes
through the real telemetry sink (as the trainer's), Redis, the ASGI server and the REST reads,
and the checkpoint folder is written here as the trainer would leave it."""

from __future__ import annotations

import shutil
import threading

import pytest
from django.conf import settings

from envs.adapters.tool_metrics import CALLS, FAILURES, LATENCY, tool_key
from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import Run
from webapp.runs.services import run_claim, run_finish
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEASE = "live-page-test"


@pytest.fixture
def training_run(owner):
    run = RunFactory(owner=owner, name="live", max_steps=4, config={"model": "demo:echo"})
    run_claim(run_id=run.pk, lease_owner=LEASE, worker_name="test")
    yield run
    shutil.rmtree(settings.RUNS_DIR / str(run.pk), ignore_errors=True)


def _in_thread(work) -> None:
    """As the trainer's thread does: the ORM and the channel layer's sync sends refuse to run
    in the thread of Playwright's event loop."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def _step(run_id: int, step: int, calls: int, checkpoint: bool = False) -> None:
    sink = TelemetrySink(run_id=run_id, lease_owner=LEASE, heartbeat_seconds=0.5)
    sink.metrics(step, {
        "reward": 0.5, tool_key("echo", CALLS): calls, tool_key("echo", FAILURES): 0, tool_key("echo", LATENCY): 0.25,
    })
    if checkpoint:
        folder = settings.RUNS_DIR / str(run_id) / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
        sink.checkpoint(step)
    sink.close(timeout=20)


def test_tools_and_checkpoints_fill_in_and_the_live_badge_goes_at_the_end(browser, web, training_run):
    run = training_run
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    assert page.inner_text("#no-tools") == "No tool calls recorded yet."
    assert page.locator("#checkpoints tr.checkpoint-row").count() == 0
    assert page.locator("#live-indicator").is_visible()
    assert not page.locator("#evaluate-checkpoints").is_visible()
    assert not page.locator("#rescore-card").is_visible()  # offered once the run has ended
    page.evaluate("window.__samePage = true")

    _in_thread(lambda: _step(run.pk, 1, 3))
    page.wait_for_selector('#tool-table[data-calls="3"]', timeout=15_000)
    assert page.inner_text('#tool-table tr.tool-row[data-tool="echo"] .tool-calls') == "3"
    assert page.inner_text('#tool-table tr.tool-row[data-tool="echo"] .tool-latency') == "0.250 s"

    _in_thread(lambda: _step(run.pk, 2, 4, checkpoint=True))
    page.wait_for_selector('#checkpoints tr.checkpoint-row[data-step="2"]', timeout=15_000)
    page.wait_for_selector('#tool-table[data-calls="7"]', timeout=15_000)
    assert page.locator("#checkpoints tr.checkpoint-row").count() == 1
    assert page.locator("#evaluate-checkpoints").is_visible()
    assert page.inner_text('#checkpoints tr.checkpoint-row[data-step="2"] code') == f'{{"run": {run.pk}, "checkpoint": 2}}'

    finished = []
    _in_thread(lambda: finished.append(run_finish(run_id=run.pk, lease_owner=LEASE, status=Run.Status.SUCCEEDED, step=2)))
    assert finished == [True]
    page.wait_for_selector("#live-indicator", state="hidden", timeout=15_000)
    assert page.get_attribute("#run-page", "data-status") == "succeeded"
    assert page.locator("#rescore-card").is_visible()
    assert page.evaluate("window.__samePage") is True  # never reloaded
    page.close()
