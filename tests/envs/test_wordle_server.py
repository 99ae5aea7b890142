"""The wordle environment over the wire: a real uvicorn server, the real client."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs.wordle.client import open_wordle_env
from envs.wordle.models import WordleAction, WordleState
from envs.wordle.server import (
    RULES,
    WORDS,
    WordleEnvironment,
    feedback_lines,
    invalid_reason,
    load_words,
    score_guess,
    secret_for_seed,
)
from tests.envs.servers import run_env_server
from tests.envs.wire import (
    NOT_STARTED_ERROR,
    SERVER_ENV,
    assert_bundled_routes,
    assert_openenv_validate_passes,
    assert_session_refused,
    get_json,
    over_error,
    refused_then_stepped,
    server_error,
    two_session_server,
)

APP = "envs.wordle.server:app"
SEED = 2024






def other_words(secret: str, count: int) -> list[str]:
    """``count`` listed words sharing no letter with ``secret`` (all marks X)."""
    words = [w for w in WORDS if not set(w) & set(secret)]
    assert len(words) >= count
    return words[:count]


def metadata(
    episode_id: str,
    step_count: int,
    *,
    num_guesses: int,
    invalid_moves: int = 0,
    greens: int = 0,
    won: bool = False,
) -> dict[str, Any]:
    return {
        "episode_id": episode_id,
        "step_count": step_count,
        "num_guesses": num_guesses,
        "invalid_moves": invalid_moves,
        "greens": greens,
        "won": won,
    }


@pytest.fixture(scope="module")
def wordle_url() -> Iterator[str]:
    with run_env_server(APP, {**SERVER_ENV, "MAX_CONCURRENT_ENVS": "8"}) as url:
        yield url


# --- in-process units -------------------------------------------------------------


def test_word_list_is_sorted_unique_five_letter_words() -> None:
    assert 300 <= len(WORDS) <= 2000
    assert list(WORDS) == sorted(set(WORDS))
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in WORDS)
    assert {"crane", "there", "hello", "llama"} <= set(WORDS)


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("apple\nCrane\n", r"entry 2 \('Crane'\) is not a lowercase 5-letter word$"),
        ("apple\nfour\n", r"entry 2 \('four'\) is not a lowercase 5-letter word$"),
        ("crane\napple\n", r"words must be sorted and unique$"),
        ("apple\napple\n", r"words must be sorted and unique$"),
        ("\n", r"no words$"),
    ],
)
def test_load_words_rejects_bad_lists(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "words.txt"
    path.write_text(content)
    with pytest.raises(ValueError, match=error):
        load_words(path)


@pytest.mark.parametrize(
    ("guess", "secret", "marks"),
    [
        ("crane", "crane", "GGGGG"),
        ("crane", "crate", "GGGXG"),
        ("slate", "crane", "XXGXG"),
        ("speed", "abide", "XXYXY"),  # one E in the secret: only the first E is Y
        ("eerie", "there", "YXYXG"),  # the green E uses one E; the first other E gets Y
        ("geese", "those", "XXXGG"),  # the secret's only E is green: the other Es are X
        ("llama", "hello", "YYXXX"),  # two L in the secret: both L of the guess are Y
        ("allow", "llama", "YGYXX"),
        ("abbey", "babes", "YYGGX"),
        ("mummy", "dummy", "XGGGG"),
    ],
)
def test_score_guess(guess: str, secret: str, marks: str) -> None:
    assert score_guess(guess, secret) == marks


def test_score_guess_rejects_length_mismatch() -> None:
    with pytest.raises(ValueError, match=r"^guess and secret differ in length"):
        score_guess("cat", "crane")


def test_feedback_lines() -> None:
    assert feedback_lines("crane", "XGYXX") == "C R A N E\nX G Y X X"


def test_invalid_reason() -> None:
    assert invalid_reason("crane", []) is None
    assert invalid_reason("crane", ["slate"]) is None
    assert invalid_reason("", []) == "use letters A-Z only"
    assert invalid_reason("cr4ne", []) == "use letters A-Z only"
    assert invalid_reason("crâne", []) == "use letters A-Z only"
    assert invalid_reason("abc", []) == "a guess must have exactly 5 letters (got 3)"
    assert invalid_reason("zzzzz", []) == "not in the word list"
    assert invalid_reason("crane", ["crane"]) == "already guessed"


def test_secret_for_seed_is_deterministic() -> None:
    assert secret_for_seed(SEED) == secret_for_seed(SEED) == random.Random(SEED).choice(WORDS)
    assert len({secret_for_seed(seed) for seed in range(20)}) > 1
    assert secret_for_seed(None) in WORDS


def test_reset_validates_arguments() -> None:
    env = WordleEnvironment()
    with pytest.raises(ValueError, match=r"^seed must be an integer, got str$"):
        env.reset(seed="7")
    with pytest.raises(ValueError, match=r"^seed must be an integer, got bool$"):
        env.reset(seed=True)
    with pytest.raises(ValueError, match=r"^word must be a 5-letter word from the word list$"):
        env.reset(word="zzzzz")
    with pytest.raises(ValueError, match=r"^word must be a string, got int$"):
        env.reset(word=12345)
    with pytest.raises(ValueError, match=r"^episode_id must be a string$"):
        env.reset(episode_id=3)
    assert env.reset(word=" CRANE ").metadata["step_count"] == 0
    assert env.step(WordleAction(guess="crane")).reward == 1.0


# --- over the wire ----------------------------------------------------------------


def test_http_routes(wordle_url: str) -> None:
    description, schema = assert_bundled_routes(
        wordle_url, "wordle", action="WordleAction", required=["guess"],
        observation=["message", "feedback", "board", "guesses_left", "invalid_move", "won"],
        state=["guesses", "max_guesses", "invalid_moves", "done", "won"],
    )
    assert description.startswith("Wordle: find a secret 5-letter word in 6 guesses")
    assert schema["action"]["properties"]["guess"]["maxLength"] == 100
    assert get_json(f"{wordle_url}/state") == {
        "episode_id": None, "step_count": 0, "guesses": [], "max_guesses": 6, "invalid_moves": 0,
        "done": False, "won": False,
    }


def test_seeded_reset_picks_the_same_secret(wordle_url: str) -> None:
    secret = secret_for_seed(SEED)  # computed in this process, played in the server's
    probes = [w for w in WORDS if w != secret][:3]
    with open_wordle_env(wordle_url) as a, open_wordle_env(wordle_url) as b:
        a.reset(seed=SEED)
        b.reset(seed=SEED)
        for probe in probes:
            fa = a.step(WordleAction(guess=probe)).observation.feedback
            fb = b.step(WordleAction(guess=probe)).observation.feedback
            assert fa == fb == feedback_lines(probe, score_guess(probe, secret))
        won = a.step(WordleAction(guess=secret))
        assert (won.reward, won.done, won.observation.won) == (1.0, True, True)
        assert won.observation.message == f"You won in 4 guesses! The word was {secret.upper()}."


def test_win(wordle_url: str) -> None:
    with open_wordle_env(wordle_url) as env:
        first = env.reset(word="crane")
        episode_id = first.observation.metadata["episode_id"]
        assert (first.reward, first.done) == (None, False)
        assert first.observation.message == RULES
        assert (first.observation.feedback, first.observation.board) == ("", "")
        assert first.observation.guesses_left == 6
        assert (first.observation.invalid_move, first.observation.won) == (False, False)
        assert first.metadata == metadata(episode_id, 0, num_guesses=0)
        assert "crane" not in json.dumps(first.observation.model_dump()).lower()

        miss = env.step(WordleAction(guess="slate"))
        assert (miss.reward, miss.done) == (0.0, False)
        assert miss.observation.feedback == "S L A T E\nX X G X G"
        assert miss.observation.board == "S L A T E\nX X G X G"
        assert miss.observation.message == "5 guesses left."
        assert miss.observation.guesses_left == 5
        assert miss.observation.metadata == metadata(episode_id, 1, num_guesses=1, greens=2)
        assert "crane" not in json.dumps(miss.observation.model_dump()).lower()

        hit = env.step(WordleAction(guess=" Crane\n"))
        assert (hit.reward, hit.done) == (1.0, True)
        assert hit.observation.feedback == "C R A N E\nG G G G G"
        assert hit.observation.board == "S L A T E\nX X G X G\nC R A N E\nG G G G G"
        assert hit.observation.message == "You won in 2 guesses! The word was CRANE."
        assert (hit.observation.guesses_left, hit.observation.won) == (4, True)
        assert hit.observation.metadata == metadata(
            episode_id, 2, num_guesses=2, greens=5, won=True
        )
        assert env.state() == WordleState(
            episode_id=episode_id,
            step_count=2,
            guesses=["slate", "crane"],
            invalid_moves=0,
            done=True,
            won=True,
        )

        assert server_error(lambda: env.step(WordleAction(guess="crane"))) == over_error(episode_id)
        assert env.state().step_count == 2

        # The socket survives the error; reset starts over.
        again = env.reset(word="crane")
        assert again.observation.metadata["episode_id"] != episode_id
        assert env.step(WordleAction(guess="crane")).observation.message == (
            "You won in 1 guess! The word was CRANE."
        )


def test_loss(wordle_url: str) -> None:
    guesses = other_words("crane", 6)
    with open_wordle_env(wordle_url) as env:
        episode_id = env.reset(word="crane").observation.metadata["episode_id"]
        results = [env.step(WordleAction(guess=g)) for g in guesses]
        assert [r.reward for r in results] == [0.0] * 6
        assert [r.done for r in results] == [False] * 5 + [True]
        assert [r.observation.guesses_left for r in results] == [5, 4, 3, 2, 1, 0]
        assert [r.observation.message for r in results] == [
            "5 guesses left.",
            "4 guesses left.",
            "3 guesses left.",
            "2 guesses left.",
            "1 guess left.",
            "Out of guesses. The word was CRANE.",
        ]
        last = results[-1].observation
        assert last.board == "\n".join(feedback_lines(g, "XXXXX") for g in guesses)
        assert last.won is False
        assert last.metadata == metadata(episode_id, 6, num_guesses=6)
        assert server_error(lambda: env.step(WordleAction(guess="crane"))) == over_error(episode_id)


def test_repeated_letters_over_the_wire(wordle_url: str) -> None:
    with open_wordle_env(wordle_url) as env:
        env.reset(word="there")
        result = env.step(WordleAction(guess="eerie"))
        assert result.observation.feedback == "E E R I E\nY X Y X G"
        assert result.observation.metadata["greens"] == 1


def test_invalid_guesses_use_no_guess(wordle_url: str) -> None:
    with open_wordle_env(wordle_url) as env:
        episode_id = env.reset(word="crane").observation.metadata["episode_id"]
        guesses = ["abc", "cr4ne", "zzzzz", "slate", " SLATE ", "x" * 30]
        results = [env.step(WordleAction(guess=g)) for g in guesses]
        assert [r.observation.message for r in results] == [
            "Invalid guess 'abc': a guess must have exactly 5 letters (got 3). "
            "No guess used; 6 guesses left.",
            "Invalid guess 'cr4ne': use letters A-Z only. No guess used; 6 guesses left.",
            "Invalid guess 'zzzzz': not in the word list. No guess used; 6 guesses left.",
            "5 guesses left.",
            "Invalid guess 'slate': already guessed. No guess used; 5 guesses left.",
            f"Invalid guess '{'x' * 20}...': a guess must have exactly 5 letters (got 30). "
            "No guess used; 5 guesses left.",
        ]
        assert [r.observation.invalid_move for r in results] == [True] * 3 + [False] + [True] * 2
        assert [r.observation.guesses_left for r in results] == [6, 6, 6, 5, 5, 5]
        assert [r.reward for r in results] == [0.0] * 6
        assert [r.done for r in results] == [False] * 6
        assert [r.observation.feedback for r in results] == [""] * 3 + ["S L A T E\nX X G X G"] + [
            ""
        ] * 2
        assert results[-1].observation.board == "S L A T E\nX X G X G"
        assert [r.observation.metadata for r in results] == [
            metadata(episode_id, 1, num_guesses=0, invalid_moves=1),
            metadata(episode_id, 2, num_guesses=0, invalid_moves=2),
            metadata(episode_id, 3, num_guesses=0, invalid_moves=3),
            metadata(episode_id, 4, num_guesses=1, invalid_moves=3, greens=2),
            metadata(episode_id, 5, num_guesses=1, invalid_moves=4),
            metadata(episode_id, 6, num_guesses=1, invalid_moves=5),
        ]


def test_state_never_holds_the_secret(wordle_url: str) -> None:
    with open_wordle_env(wordle_url) as env:
        episode_id = env.reset(word="crane").observation.metadata["episode_id"]
        env.step(WordleAction(guess="slate"))
        env.step(WordleAction(guess="1234"))
        state = env.state()
        # State allows extra fields: anything more the server sent would show up here.
        assert state.model_dump() == {
            "episode_id": episode_id,
            "step_count": 2,
            "guesses": ["slate"],
            "max_guesses": 6,
            "invalid_moves": 1,
            "done": False,
            "won": False,
        }
        assert "crane" not in json.dumps(state.model_dump()).lower()


def test_step_before_reset_is_an_error(wordle_url: str) -> None:
    with open_wordle_env(wordle_url) as env:
        assert server_error(lambda: env.step(WordleAction(guess="crane"))) == NOT_STARTED_ERROR


def test_overlong_guess_is_a_validation_error_and_no_step(wordle_url: str) -> None:
    first, error, stepped = refused_then_stepped(
        wordle_url, {"word": "crane"}, {"guess": "y" * 101}, {"guess": "crane"}
    )
    assert first["type"] == "observation"
    assert error["type"] == "error"
    assert error["data"]["code"] == "VALIDATION_ERROR"
    assert error["data"]["errors"][0]["type"] == "string_too_long"
    reply = stepped["data"]
    assert reply["reward"] == 1.0
    assert reply["metadata"]["step_count"] == 1


def test_capacity_reached() -> None:
    with two_session_server("envs.wordle.server") as url:
        with open_wordle_env(url) as a, open_wordle_env(url) as b:
            a.reset(word="crane")
            b.reset()
            assert_session_refused(open_wordle_env(url))
            assert a.step(WordleAction(guess="crane")).reward == 1.0
        # Both sessions closed: slots are free again.
        with open_wordle_env(url) as a, open_wordle_env(url) as b:
            assert a.reset().done is False
            assert b.reset().done is False


def test_openenv_validate(wordle_url: str, tmp_path: Path) -> None:
    assert_openenv_validate_passes(wordle_url, tmp_path)
