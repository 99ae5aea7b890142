"""The run page's virtualised transcript list in headless Chromium: a run with 2,100 stored
rollouts keeps only a window of them in the DOM, scrolls to the last rollout of a step,
filters by step, shows markup in messages as text, opens a linked rollout, and puts a
rollout arriving over the socket on top. No worker: the rows are made here and the live
one goes through the real telemetry sink, Redis and the ASGI server."""

from __future__ import annotations

import threading

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.runs.models import Rollout, Run, prompt_key
from webapp.runs.services import run_claim
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "<script>window.__xss = 'script'</script>"
IMG = '<img src=x onerror="window.__xss = \'img\'">'
STEPS = {1: 1000, 2: 1000, 3: 100}  # 2,100 rollouts; step 3 is the newest


def _rows(run: Run) -> dict[int, list[int]]:
    """Rollouts of every step (seq ascending over steps), two turns each; the newest of
    step 2 carries markup. Returns {step: seqs, oldest first}."""
    seqs: dict[int, list[int]] = {}
    rows = []
    seq = 0
    for step, count in STEPS.items():
        for i in range(count):
            seq += 1
            evil = step == 2 and i == count - 1
            prompt = [{"role": "user", "content": f"row {i}"}]
            rows.append(
                Rollout(
                    run=run, seq=seq, step=step, env="echo", seed=i, prompt_key=prompt_key("echo", prompt, i),
                    prompt=prompt,
                    messages=[
                        {"role": "assistant", "content": SCRIPT if evil else f"said {seq}"},
                        {"role": "tool", "name": "echo", "content": IMG if evil else f"tool {seq}"},
                    ],
                    rewards={"env_reward": 1.0, "tool_called": 0.5}, reward=1.5, advantage=0.25,
                )
            )
            seqs.setdefault(step, []).append(seq)
    Rollout.objects.bulk_create(rows, batch_size=500)
    Run.objects.filter(pk=run.pk).update(last_seq=seq, step=3)
    return seqs


def _shown(page) -> list[int]:
    return page.eval_on_selector_all("#rollouts article.rollout", "els => els.map(e => Number(e.dataset.seq))")


def _texts(page, selector: str) -> list[str]:
    """textContent, the prompt's included (it is in a closed <details>)."""
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def _ready(page, rows: int) -> None:
    page.wait_for_selector(f'#rollouts[data-ready="true"][data-rows="{rows}"]', timeout=15_000)


def _push_live(run_id: int, advantage: float = -1.0) -> None:
    """One rollout of step 3 through the real telemetry sink, from another thread as the trainer's."""
    sink = TelemetrySink(run_id=run_id, lease_owner="list-test", heartbeat_seconds=0.5)
    sink.rollouts(
        [
            {
                "step": 3, "env": "echo", "prompt": [{"role": "user", "content": "live"}],
                "messages": [{"role": "assistant", "content": "the live one"}],
                "rewards": {"env_reward": 0.0}, "reward": 0.0, "advantage": advantage,
            }
        ]
    )
    sink.close(timeout=20)


def _live(run_id: int, advantage: float) -> int:
    pusher = threading.Thread(target=_push_live, args=(run_id, advantage))
    pusher.start()
    pusher.join()
    return Rollout.objects.get(run_id=run_id, advantage=advantage).seq


@pytest.fixture
def big_run(owner):
    run = RunFactory(owner=owner, name="big", config={"model": "demo:echo"}, max_steps=10)
    run_claim(run_id=run.pk, lease_owner="list-test", worker_name="test")
    return run, _rows(run)


def test_the_list_keeps_a_window_scrolls_filters_and_shows_markup_as_text(browser, web, big_run):
    run, seqs = big_run
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    log_in(page, web, f"/runs/{run.pk}/")
    _ready(page, 2100)
    shown = _shown(page)
    # Newest first, from the top, and only a window of the 2,100 in the DOM.
    assert shown[:3] == [2100, 2099, 2098]
    assert shown == list(range(2100, 2100 - len(shown), -1))
    assert 5 <= len(shown) <= 40
    options = page.eval_on_selector_all("#rollout-step-filter option", "els => els.map(e => e.textContent)")
    assert options == ["all steps (2100)", "step 3 (100)", "step 2 (1000)", "step 1 (1000)"]
    first = page.locator("#rollouts article.rollout").first
    assert first.locator("a.rollout-replay").get_attribute("href") == f"/replay/runs/{run.pk}/2100/"
    key = Rollout.objects.get(run=run, seq=2100).prompt_key
    assert first.locator("a.rollout-prompt-link").get_attribute("href") == f"/runs/{run.pk}/prompts/{key}/"
    assert first.locator(".rollout-rewards").inner_text().split() == ["env_reward", "1.000", "tool_called", "0.500"]

    # One step: its 1,000 rows, the bottom of the list is its oldest rollout.
    page.select_option("#rollout-step-filter", "2")
    _ready(page, 1000)
    assert _shown(page)[0] == seqs[2][-1]
    page.eval_on_selector("#rollouts", "box => { box.scrollTop = box.scrollHeight; }")
    page.wait_for_function(
        f"document.querySelector('#rollouts article.rollout:last-of-type') && "
        f"Number(document.querySelector('#rollouts article.rollout:last-of-type').dataset.seq) === {seqs[2][0]}",
        timeout=15_000,
    )
    _ready(page, 1000)
    bottom = _shown(page)
    assert bottom[-1] == seqs[2][0] == 1001
    assert len(bottom) <= 40
    assert {int(s) for s in page.eval_on_selector_all(
        "#rollouts article.rollout", "els => els.map(e => e.dataset.step)"
    )} == {2}

    # Back to the top: the newest of step 2 carries markup, shown as text once expanded.
    page.eval_on_selector("#rollouts", "box => { box.scrollTop = 0; }")
    page.wait_for_function(f"!!document.getElementById('rollout-{seqs[2][-1]}')", timeout=10_000)
    evil = page.locator(f"#rollout-{seqs[2][-1]}")
    assert evil.locator(".rollout-body").count() == 0  # collapsed
    evil.locator("button.rollout-toggle").click()
    page.wait_for_selector(f"#rollout-{seqs[2][-1]}.expanded .rollout-body")
    assert _texts(page, f"#rollout-{seqs[2][-1]} .message-content") == ["row 999", SCRIPT, IMG]
    assert page.evaluate("window.__xss") is None
    assert page.locator("#rollouts script, #rollouts img").count() == 0
    # The expanded row grew: the next row starts below it.
    tops = page.eval_on_selector_all(
        "#rollouts article.rollout", "els => els.slice(0, 2).map(e => [e.offsetTop, e.offsetHeight])"
    )
    assert tops[0][0] == 0 and tops[1][0] == tops[0][1] + 8 and tops[0][1] > 68
    page.close()


def test_a_linked_rollout_opens_in_its_step_and_a_live_one_arrives_on_top(browser, web, big_run):
    run, seqs = big_run
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    target = seqs[1][10]  # deep in step 1: the list pages down to it
    log_in(page, web, f"/runs/{run.pk}/?rollout={target}")
    page.wait_for_selector(f'#rollouts[data-focused="{target}"]', timeout=20_000)
    assert page.eval_on_selector("#rollouts", "box => box.dataset.filter") == "1"
    assert _texts(page, f"#rollout-{target}.expanded .message-content") == [
        "row 10", f"said {target}", f"tool {target}",
    ]
    assert page.locator(f"#rollout-{target}").is_visible()

    page.select_option("#rollout-step-filter", "all")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    _ready(page, 2100)
    live_seq = _live(run.pk, -1.0)
    page.wait_for_function(
        "Number((document.querySelector('#rollouts article.rollout') || {dataset: {}}).dataset.seq) === "
        f"{live_seq}",
        timeout=10_000,
    )
    _ready(page, 2101)
    assert _shown(page)[:3] == [live_seq, 2100, 2099]
    options = page.eval_on_selector_all("#rollout-step-filter option", "els => els.map(e => e.textContent)")
    assert options[:2] == ["all steps (2101)", "step 3 (101)"]
    assert page.locator("#rollouts article.rollout").first.locator(".rollout-advantage").inner_text() == (
        "advantage -1.000"
    )

    # Scrolled down, a new rollout on top leaves the rows on screen where they were.
    row = 76  # rollout_list.js ROW_HEIGHT
    page.eval_on_selector("#rollouts", f"box => {{ box.scrollTop = {row * 300}; }}")
    page.wait_for_function(f"!!document.getElementById('rollout-{2100 - 299}')", timeout=10_000)
    _ready(page, 2101)
    at_top = f"document.elementFromPoint(600, document.querySelector('#rollouts').getBoundingClientRect().top + {row // 2})"
    before = page.evaluate(f"{at_top}.closest('article.rollout').dataset.seq")
    assert before == str(2100 - 299)
    second = _live(run.pk, -2.0)
    _ready(page, 2102)
    assert page.eval_on_selector("#rollouts", "box => box.scrollTop") == row * 301
    assert page.evaluate(f"{at_top}.closest('article.rollout').dataset.seq") == before
    assert page.locator(f"#rollout-{second}").count() == 0  # above the view: not in the DOM
    page.close()
