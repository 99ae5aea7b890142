"""Side by side in headless Chromium (Debian's package) against the real ASGI server: two
checkpoints of a real tiny run on one Wordle seed. The run (a real Celery worker process,
the real wordle server) warms the test demo model up on the solver's Wordle episodes
(checkpoint 0) and takes one GRPO step (checkpoint 1); the arena form has the worker play
both checkpoints greedily on the chosen seed, the page shows its progress line until they are
stored, then the columns, and three ArrowRight presses move both boards."""

from __future__ import annotations

from typing import Any

import pytest

from envs.wordle.rules import score_guess
from envs.wordle.server import secret_for_seed
from tests.e2e.helpers import register_lab_entry, wait_status
from tests.support.browser import log_in
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.runs.checkpoints import run_checkpoints
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SEED = 77
PROMPT = "Play Wordle: find the secret five-letter word with the guess tool."
# Measured on 2 busy shared cores: the warm-up (16 solver games x 32 epochs = 64 SFT steps)
# and one GRPO step took 124 s; with 4 or 16 epochs the checkpoints made one valid guess at
# most. The evaluation keeps the default 512-token budget: it counts every turn's tokens and
# the tool results', and 64 ended the episodes after one guess.
WARMUP = {
    "source": "solver",
    "episodes": 16,
    "epochs": 32,
    "learning_rate": 5e-3,
    "per_device_train_batch_size": 8,
}
GRPO = {
    "num_generations": 2,
    "max_steps": 1,
    "per_device_train_batch_size": 2,
    "max_completion_length": 48,
    # Wordle's six guesses: the warm-up's solver games are cut at GRPO's cap, and at 3 those
    # needing more guesses would end unwon and not be kept.
    "max_tool_calling_iterations": 6,
    "learning_rate": 1e-4,
    "save_steps": 1,
}


def _wordle_run(api: Any, wordle_url: str, worker: Any) -> Run:
    env_id = register_lab_entry(api, "wordle", wordle_url, capacity=8)
    config = {
        "name": "wordle-sbs",
        "model": "demo:echo",
        "environments": [
            {"environment": env_id, "name": "wordle", "prompt": PROMPT, "rows": 8}
        ],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "sft_warmup": WARMUP,
        "grpo": GRPO,
    }
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run = wait_status(response.json()["id"], ("succeeded", "failed", "cancelled"), 900, worker)
    assert run.status == "succeeded", run.error
    assert [(c.step, c.phase) for c in run_checkpoints(run=run)] == [(0, "warmup"), (1, "grpo")]
    return run


def _board(page: Any, column: int, name: str) -> str | None:
    return page.locator(f'.sbs-column[data-column="{column}"] .replay-board').get_attribute(f"data-{name}")


def _guesses(page: Any) -> list[int]:
    return [int(_board(page, i, "guesses") or -1) for i in (0, 1)]


def _column_state(page: Any, column: int) -> tuple[str, str, str | None]:
    box = page.locator(f'.sbs-column[data-column="{column}"]')
    return (
        box.locator(".replay-board").text_content() or "",
        box.locator(".replay-turn").text_content() or "",
        box.get_attribute("data-turn"),
    )


def test_two_checkpoints_on_one_wordle_seed_step_together(
    api, owner, worker, web, browser, wordle_url
):
    run = _wordle_run(api, wordle_url, worker)
    environment_id = run.config["environments"][0]["environment"]

    page = browser.new_page()
    log_in(page, web, "/arena/")
    page.wait_for_selector("#arena-form")
    page.select_option("#id_environment", str(environment_id))
    page.select_option("#id_model_0", f"run:{run.pk}@0")
    page.select_option("#id_model_1", f"run:{run.pk}@1")
    page.fill("#id_seed", str(SEED))
    page.fill("#id_max_completion_length", "512")
    page.fill("#id_max_tool_calling_iterations", "6")
    page.click("#arena-submit")

    # Nothing was stored for these checkpoints: one evaluation plays both, then the page reloads.
    page.wait_for_selector("#sidebyside-page")
    evaluation = Evaluation.objects.get()
    assert (evaluation.episode_seeds, [e["label"] for e in evaluation.model_specs]) == (
        [SEED],
        [f"run:{run.pk}@0", f"run:{run.pk}@1"],
    )
    try:
        page.wait_for_selector('#sidebyside-page[data-pending="0"][data-ready="true"]', timeout=300_000)
    except Exception:
        raise AssertionError(worker.log_text()[-6000:]) from None
    assert page.url.endswith(f"/arena/side-by-side/?episode={evaluation.pk}%3A0%3A0&episode={evaluation.pk}%3A1%3A0")
    episodes = list(EvaluationEpisode.objects.filter(evaluation=evaluation).order_by("model_index"))
    assert [e.seed for e in episodes] == [SEED, SEED]
    turns = [sum(1 for m in e.messages if m.get("role") == "assistant") for e in episodes]
    # Measured: both checkpoints make valid guesses for several turns on this seed.
    assert min(turns) >= 3, [e.messages for e in episodes]
    assert [_board(page, i, "renderer") for i in (0, 1)] == ["wordle", "wordle"]
    assert (page.locator("#sidebyside-page").get_attribute("data-turn"), _guesses(page)) == ("0", [0, 0])
    assert [
        page.locator(f'.sbs-summary-row[data-column="{i}"] td[data-field="steps"]').inner_text()
        for i in (0, 1)
    ] == [str(t) for t in turns]
    before = [_column_state(page, i) for i in (0, 1)]

    for _ in range(3):
        page.keyboard.press("ArrowRight")

    assert page.locator("#sidebyside-page").get_attribute("data-turn") == "3"
    assert page.url.endswith(f"/arena/side-by-side/?episode={evaluation.pk}%3A0%3A0&episode={evaluation.pk}%3A1%3A0&turn=3")
    assert page.locator("#replay-position").inner_text() == f"turn 3 / {max(turns)}"
    after = [_column_state(page, i) for i in (0, 1)]
    for column, (old, new) in enumerate(zip(before, after, strict=True)):
        assert new[2] == "3"
        assert new[0] != old[0], f"column {column}'s board did not change"
        assert new[1] != old[1], f"column {column}'s turn panel did not change"
    assert all(0 < count <= 3 for count in _guesses(page))
    # Both boards were scored against the seed's one secret word.
    secret = secret_for_seed(SEED)
    for column, episode in enumerate(episodes):
        first = next(m for m in episode.messages if m.get("tool_calls"))
        guess = str(first["tool_calls"][0]["function"]["arguments"]["guess"]).lower()
        tiles = page.locator(f'.sbs-column[data-column="{column}"] .wordle-row').nth(0).locator(".wordle-tile")
        assert [t.get_attribute("data-mark") for t in tiles.all()] == list(score_guess(guess, secret))
    page.keyboard.press("End")
    assert page.locator("#sidebyside-page").get_attribute("data-turn") == str(max(turns))
    assert [_column_state(page, i)[2] for i in (0, 1)] == [str(t) for t in turns]
    page.close()
