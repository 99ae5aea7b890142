"""The replay viewer in headless Chromium (Debian's package) against the real ASGI server:
a Catch rollout and a Wordle evaluation episode, each played by the bundled solver through
the real adapter against the real environment server (uvicorn), step by step with the
keyboard; and a transcript whose model output and tool results carry HTML that must stay text."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from envs.adapters import adapter_class
from envs.catch.solver import CatchSolver
from envs.solvers import ToolCall
from envs.sudoku.solver import SudokuSolver, parse_board
from envs.wordle.solver import WordleSolver
from tests.envs.servers import run_env_servers
from tests.envs.wire import SERVER_ENV
from tests.factories import EvaluationEpisodeFactory, EvaluationFactory, RunFactory
from tests.support.browser import log_in
from tests.support.replay import run_on_catch
from webapp.evaluations.models import Evaluation
from webapp.runs.models import Rollout, Run
from webapp.runs.services import run_claim
from worker.episodes import Episode, play_episode
from worker.training.telemetry import TelemetrySink

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EVIL_MODEL = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
EVIL_TOOL = '<img src=x onerror="window.__xss=3"><script>window.__xss=4</script>'


class RefusedThenSolved:
    """The sudoku solver, after one move the server refuses: a digit written over a given."""

    final_text = SudokuSolver.final_text

    def __init__(self) -> None:
        self.solver = SudokuSolver()
        self.given: ToolCall | None = None

    def start(self, prompt: str, row: Any) -> None:
        self.solver.start(prompt, row)
        board = parse_board(prompt)
        assert board is not None
        r, c = next((r, c) for r in range(9) for c in range(9) if board[r][c])
        self.given = ToolCall("place", {"row": r + 1, "column": c + 1, "digit": board[r][c]})

    def next_call(self, last_result: str | None) -> ToolCall | None:
        call, self.given = self.given, None
        return call or self.solver.next_call(last_result)


@pytest.fixture(scope="module")
def played() -> Iterator[dict[str, Episode]]:
    """One seeded episode per game, played by its solver on the real server."""
    names = ("catch", "wordle", "sudoku")
    with run_env_servers(names, SERVER_ENV, startup_timeout=90) as urls:
        policies = {"catch": CatchSolver(), "wordle": WordleSolver(), "sudoku": RefusedThenSolved()}
        prompts = {
            "catch": "Catch the ball: move the paddle under it.",
            "wordle": "Play Wordle.",
            "sudoku": "Solve the sudoku.",
        }
        episodes = {}
        for name in names:
            adapter = adapter_class(metadata_name=name, base_url=urls[name], env_name=name)()
            row = {"prompt": [{"role": "user", "content": prompts[name]}], "env": name, "seed": 3}
            if name == "sudoku":
                row["blanks"] = 4
            episodes[name] = play_episode(adapter=adapter, policy=policies[name], row=row, max_calls=16)
        yield episodes


def _login(
    browser: Any, web: str, path: str, ready: str = '#replay-page[data-ready="true"]'
) -> Any:
    page = browser.new_page()
    log_in(page, web, path)
    page.wait_for_selector(ready)
    return page


def _board(page: Any, name: str) -> str:
    return page.locator("#replay-board").get_attribute(f"data-{name}")


def test_catch_replay_moves_the_ball_as_you_step_with_the_keyboard(browser, owner, web, played):
    episode = played["catch"]
    run = run_on_catch(owner, "catch", max_steps=1)
    Rollout.objects.create(
        run=run,
        seq=1,
        step=0,
        env="catch",
        prompt=episode.messages[:1],
        messages=episode.messages[1:],
        rewards={"env_reward": 1.0},
        reward=1.0,
        advantage=0.25,
    )
    moves = sum(1 for m in episode.messages if m.get("tool_calls"))
    assert episode.won and moves == 9  # a 10-row grid: the ball falls one row per move

    page = _login(browser, web, f"/replay/runs/{run.pk}/1/")

    assert page.locator("#replay-board").get_attribute("data-renderer") == "catch"
    assert (_board(page, "ball-row"), page.locator("#replay-page").get_attribute("data-turn")) == (
        "0",
        "0",
    )
    assert page.locator("#replay-board .catch-grid tr").count() == 10
    page.keyboard.press("ArrowRight")
    assert _board(page, "ball-row") == "1"
    assert page.url.endswith(f"/replay/runs/{run.pk}/1/?turn=1")
    page.keyboard.press("ArrowRight")
    assert _board(page, "ball-row") == "2"
    page.keyboard.press("ArrowLeft")
    assert _board(page, "ball-row") == "1"
    page.keyboard.press("End")
    # The last turn is the solver's closing words; the ball lies caught under the paddle.
    assert _board(page, "ball-row") == "9"
    assert _board(page, "ball-column") == _board(page, "paddle-column")
    assert page.locator("#replay-board .catch-status").inner_text() == "caught"
    assert page.locator("#replay-turn .replay-so-far").inner_text() == "reward so far 1"
    assert page.locator("#replay-turn .replay-turn-advantage").inner_text() == "advantage 0.25"
    page.keyboard.press("Home")
    assert _board(page, "ball-row") == "0"
    assert page.url.endswith("?turn=0")
    page.fill("#replay-jump-turn", "4")
    page.click("#replay-jump button")
    assert (_board(page, "ball-row"), page.url.endswith("?turn=4")) == ("4", True)
    page.locator("#replay-scrubber").fill("6")
    assert _board(page, "ball-row") == "6"
    page.select_option("#replay-speed", "4")
    page.click("#replay-play")
    assert page.locator("#replay-play").inner_text() == "Pause"
    page.wait_for_selector('#replay-page[data-turn="10"][data-playing="false"]', timeout=5_000)
    assert page.locator("#replay-play").inner_text() == "Play"
    page.close()


def _evaluation(owner: Any, key: str, messages: list[dict[str, Any]], reward: float) -> Evaluation:
    evaluation = EvaluationFactory(owner=owner, environment_name=key, environment_key=key, prompt="p", seed=3)
    EvaluationEpisodeFactory(evaluation=evaluation, seed=3, reward=reward, won=reward == 1.0, messages=messages)
    return evaluation


def test_wordle_replay_fills_the_board_turn_by_turn(browser, owner, web, played):
    episode = played["wordle"]
    guesses = [
        m["tool_calls"][0]["function"]["arguments"]["guess"]
        for m in episode.messages
        if m.get("tool_calls")
    ]
    assert episode.won and len(guesses) >= 2
    evaluation = _evaluation(owner, "wordle", episode.messages, 1.0)

    page = _login(browser, web, f"/evaluations/{evaluation.pk}/", "a.episode-replay")
    page.click("a.episode-replay")
    page.wait_for_selector('#replay-page[data-ready="true"]')
    assert page.url.endswith(f"/replay/evaluations/{evaluation.pk}/0/0/")
    assert _board(page, "guesses") == "0"
    page.keyboard.press("ArrowRight")

    assert _board(page, "guesses") == "1"
    row = page.locator("#replay-board .wordle-row").nth(0)
    assert row.locator(".wordle-tile").all_inner_texts() == list(guesses[0].upper())
    page.keyboard.press("End")
    assert _board(page, "guesses") == str(len(guesses))
    last_row = page.locator("#replay-board .wordle-row").nth(len(guesses) - 1)
    assert [t.get_attribute("data-mark") for t in last_row.locator(".wordle-tile").all()] == [
        "G"
    ] * 5
    assert (
        page.locator(
            f'#replay-board .wordle-key[data-key="{guesses[-1][0].upper()}"]'
        ).get_attribute("data-mark")
        == "G"
    )
    assert page.locator("#replay-board .wordle-row.filled").count() == len(guesses)
    # The last turn is the solver's closing words, after the winning guess.
    assert page.locator("#replay-page").get_attribute("data-turn") == str(len(guesses) + 1)
    page.keyboard.press("ArrowLeft")
    assert _board(page, "guesses") == str(len(guesses))
    page.keyboard.press("ArrowLeft")
    assert _board(page, "guesses") == str(len(guesses) - 1)
    page.close()


def test_html_in_model_output_and_tool_results_shows_as_text_and_runs_nothing(browser, owner, web):
    messages = [
        {"role": "user", "content": "Echo " + EVIL_MODEL},
        {
            "role": "assistant",
            "content": "<think>" + EVIL_MODEL + "</think>" + EVIL_MODEL,
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "echo", "arguments": {"message": EVIL_MODEL}},
                }
            ],
        },
        {"role": "tool", "name": "echo", "content": EVIL_TOOL},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "nope", "arguments": "{not json " + EVIL_MODEL},
                }
            ],
        },
        {
            "role": "tool",
            "name": "nope",
            "content": str({"error": "Tool nope not found. " + EVIL_TOOL}),
        },
    ]
    evaluation = _evaluation(owner, "echo", messages, 0.0)

    page = _login(browser, web, f"/replay/evaluations/{evaluation.pk}/0/0/?turn=2")

    assert page.locator("#replay-board").get_attribute("data-renderer") == "transcript"
    board = page.locator("#replay-board").text_content()
    assert EVIL_MODEL in board and EVIL_TOOL in board
    panel = page.locator("#replay-turn")
    assert panel.locator(".replay-error .message-content").inner_text() == str(
        {"error": "Tool nope not found. " + EVIL_TOOL}
    )
    page.keyboard.press("ArrowLeft")
    assert panel.locator(".replay-said").inner_text() == EVIL_MODEL
    assert panel.locator(".replay-think pre").text_content() == EVIL_MODEL
    assert panel.locator(".replay-result .message-content").inner_text() == EVIL_TOOL
    assert page.locator("#replay-page img").count() == 0
    assert page.locator("#replay-page script").count() == 1  # the json_script data block only
    assert page.evaluate("window.__xss") is None
    page.close()


def test_sudoku_replay_marks_givens_placements_and_the_refused_move(browser, owner, web, played):
    episode = played["sudoku"]
    calls = [
        m["tool_calls"][0]["function"]["arguments"] for m in episode.messages if m.get("tool_calls")
    ]
    assert episode.won and len(calls) == 5  # one refused move, then the four blanks
    refused = calls[0]
    evaluation = _evaluation(owner, "sudoku", episode.messages, 1.0)

    page = _login(browser, web, f"/replay/evaluations/{evaluation.pk}/0/0/?turn=1")

    cell = f'#replay-board td[data-row="{refused["row"]}"][data-column="{refused["column"]}"]'
    assert page.locator(cell).get_attribute("class") == "sudoku-cell given refused current"
    assert (_board(page, "placed"), _board(page, "refused")) == ("0", "1")
    assert page.locator("#replay-board td.given").count() == 81 - 4
    assert (
        page.locator("#replay-turn .replay-result .message-content")
        .inner_text()
        .startswith("Invalid move:")
    )
    page.keyboard.press("ArrowRight")
    placed = calls[1]
    latest = f'#replay-board td[data-row="{placed["row"]}"][data-column="{placed["column"]}"]'
    assert page.locator(latest).get_attribute("class") == "sudoku-cell placed latest"
    assert page.locator(latest).inner_text() == str(placed["digit"])
    assert page.locator(cell).get_attribute("class") == "sudoku-cell given refused"
    assert page.locator("#replay-turn .replay-so-far").inner_text() == "reward so far 0.25"
    page.keyboard.press("End")
    assert (_board(page, "placed"), _board(page, "refused")) == ("4", "1")
    page.close()


def _push_rollout(run_id: int) -> None:
    """One rollout through the real telemetry sink, from another thread as the trainer's."""
    sink = TelemetrySink(run_id=run_id, lease_owner="replay-test", heartbeat_seconds=0.5)
    sink.rollouts(
        [
            {
                "step": 1,
                "env": "echo",
                "prompt": [{"role": "user", "content": "Echo 'hi'."}],
                "messages": [{"role": "assistant", "content": "live one"}],
                "rewards": {"env_reward": 0.0},
                "reward": 0.0,
                "advantage": 0.0,
            }
        ]
    )
    sink.close(timeout=20)


def test_every_transcript_on_the_run_page_links_to_its_replay(browser, owner, web):
    run = RunFactory(owner=owner, name="live", config={"model": "demo:echo"}, max_steps=5)
    run_claim(run_id=run.pk, lease_owner="replay-test", worker_name="test")
    Rollout.objects.create(run=run, seq=1, step=0, env="echo", prompt="Echo 'x'.", messages=[])
    Run.objects.filter(pk=run.pk).update(last_seq=1)

    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector('#run-page[data-live="live"]', timeout=20_000)
    pusher = threading.Thread(target=_push_rollout, args=(run.pk,))
    pusher.start()
    pusher.join()
    page.wait_for_function(
        "document.querySelectorAll('article.rollout').length === 2", timeout=10_000
    )

    links = page.eval_on_selector_all(
        "article.rollout a.rollout-replay", "els => els.map(e => e.getAttribute('href'))"
    )
    live_seq = Rollout.objects.get(run=run, step=1).seq
    assert links == [f"/replay/runs/{run.pk}/{live_seq}/", f"/replay/runs/{run.pk}/1/"]
    page.click(f'article.rollout[data-seq="{live_seq}"] a.rollout-replay')
    page.wait_for_selector('#replay-page[data-ready="true"]')
    assert page.locator("#replay-turn").inner_text().startswith("Start")
    page.keyboard.press("End")
    assert page.locator("#replay-turn .replay-said").inner_text() == "live one"
    page.close()
