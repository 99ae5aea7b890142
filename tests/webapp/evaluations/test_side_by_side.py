"""The arena's side by side: which columns a URL may name (2-4, the user's, the same
environment and episode seed), what the page embeds, the arena form reusing stored episodes
and queueing only the missing ones, and `episode_seeds` in an evaluation request. The echo
server is real (uvicorn); no task reaches a worker (no commit in these tests)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from tests.e2e.helpers import register_echo
from tests.support.replay import replay_scripts
from webapp.evaluations.arena.sidebyside import ColumnRef, arena_prepare
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.runs.config import RunConfigError

pytestmark = pytest.mark.django_db

XSS = "<script>window.__xss=1</script>"
DECODING = {
    "max_completion_length": 512,
    "max_tool_calling_iterations": 16,
    "chat_template_kwargs": {"enable_thinking": False},
}


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _messages(word: str, turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Play Wordle.\nGuess the word."}]
    for _ in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "guess", "arguments": {"guess": word}}}
                ],
            }
        )
        messages.append({"role": "tool", "name": "guess", "content": "C R A N E\nX X G X Y"})
    return messages


def _evaluation(
    owner,
    labels: list[str],
    *,
    seed: int = 7,
    environment_name: str = "wordle",
    status: str = "succeeded",
    played: bool = True,
    environment=None,
    prompt: str = "Play Wordle.",
    episode_seeds: list[int] | None = None,
    settings: dict[str, Any] | None = None,
) -> Evaluation:
    evaluation = Evaluation.objects.create(
        owner=owner,
        environment=environment,
        environment_name=environment_name,
        environment_key="wordle",
        prompt=prompt,
        model_specs=[{"spec": label, "label": label, "kind": "model"} for label in labels],
        episodes=1,
        seed=3,
        episode_seeds=episode_seeds or [],
        settings=settings if settings is not None else DECODING,
        total=len(labels),
        done=len(labels) if played else 0,
        status=status,
    )
    if played:
        for index, label in enumerate(labels):
            EvaluationEpisode.objects.create(
                evaluation=evaluation,
                model_index=index,
                model=label,
                index=0,
                seed=seed,
                reward=1.0 if index == 0 else 0.0,
                won=index == 0,
                tool_calls=index + 1,
                tool_failures=index,
                messages=_messages("crane", index + 1),
            )
    return evaluation


def _first_episodes(client: Client, *evaluations: Evaluation) -> Any:
    """The page whose columns are the first model's first episode of each evaluation, in order."""
    query = "&".join(f"episode={evaluation.pk}:0:0" for evaluation in evaluations)
    return client.get(f"/arena/side-by-side/?{query}")


def _embedded(response) -> dict[str, Any]:
    match = re.search(
        r'<script id="sidebyside-data" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match is not None
    return json.loads(match.group(1))


def test_two_models_of_one_evaluation_show_in_columns_with_a_summary(owner):
    evaluation = _evaluation(owner, ["solver", XSS])

    response = _client(owner).get(
        f"/arena/side-by-side/?evaluation={evaluation.pk}&index=0&model=0&model=1&turn=1"
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert XSS not in html  # escaped in the summary and inside the JSON
    page = _embedded(response)
    assert (page["turn"], page["path"], page["pending"]) == (1, "/arena/side-by-side/", [])
    assert page["query"] == f"episode={evaluation.pk}%3A0%3A0&episode={evaluation.pk}%3A1%3A0"
    assert [(c["ref"], c["label"], c["seed"], c["state"]) for c in page["columns"]] == [
        (f"{evaluation.pk}:0:0", "solver", 7, "stored"),
        (f"{evaluation.pk}:1:0", XSS, 7, "stored"),
    ]
    assert [c["summary"] for c in page["columns"]] == [
        {"won": True, "steps": 1, "reward": 1.0, "tool_failures": 0},
        {"won": False, "steps": 2, "reward": 0.0, "tool_failures": 1},
    ]
    assert [c["replay"]["renderer"] for c in page["columns"]] == ["wordle", "wordle"]
    assert page["columns"][1]["replay"]["prompt"] == [
        {"role": "user", "content": "Play Wordle.\nGuess the word."}
    ]
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert scripts == replay_scripts("wordle", "sidebyside")
    assert html.count('class="sbs-column"') == 2
    assert html.count('class="sbs-summary-row"') == 2
    assert 'id="replay-controls"' in html and 'id="replay-position" class="muted">turn 1 / 2<' in html


def test_without_model_all_of_an_evaluations_models_are_columns(owner):
    evaluation = _evaluation(owner, ["a/one", "a/two", "a/three"])

    page = _embedded(_client(owner).get(f"/arena/side-by-side/?evaluation={evaluation.pk}&index=0"))

    assert [c["label"] for c in page["columns"]] == ["a/one", "a/two", "a/three"]


def test_columns_from_two_evaluations_on_the_same_seed(owner):
    first = _evaluation(owner, ["solver"], seed=11)
    second = _evaluation(owner, ["random"], seed=11)

    response = _first_episodes(_client(owner), first, second)

    assert response.status_code == 200
    assert [(c["label"], c["seed"]) for c in _embedded(response)["columns"]] == [
        ("solver", 11),
        ("random", 11),
    ]


@pytest.mark.parametrize("count", [1, 5])
def test_one_or_five_columns_are_refused(owner, count):
    evaluation = _evaluation(owner, [f"org/m{i}" for i in range(5)])
    models = "".join(f"&model={i}" for i in range(count))

    response = _client(owner).get(f"/arena/side-by-side/?evaluation={evaluation.pk}&index=0{models}")

    assert response.status_code == 400
    assert f"side by side shows 2 to 4 episodes; {count} given" in response.content.decode()


def test_episodes_of_different_seeds_are_refused(owner):
    first = _evaluation(owner, ["solver"], seed=11)
    second = _evaluation(owner, ["random"], seed=12)

    response = _first_episodes(_client(owner), first, second)

    assert response.status_code == 400
    assert (
        f"the columns are not the same episode: seeds 11 ({first.pk}:0:0), 12 ({second.pk}:0:0)"
        in response.content.decode()
    )


def test_a_pending_column_of_another_seed_is_refused_before_it_is_played(owner):
    stored = _evaluation(owner, ["solver"], seed=11)
    queued = _evaluation(owner, ["random"], status="queued", played=False, episode_seeds=[12])

    response = _first_episodes(_client(owner), stored, queued)

    assert response.status_code == 400


def test_episodes_of_different_environments_are_refused(owner, api, echo_url):
    from webapp.catalog.models import Environment

    echo = Environment.objects.get(pk=register_echo(api, echo_url))
    first = _evaluation(owner, ["solver"], seed=11)
    second = _evaluation(owner, ["random"], seed=11, environment=echo, environment_name="echo")

    response = _first_episodes(_client(owner), first, second)

    assert response.status_code == 400
    assert "episodes of different environments: echo, wordle" in response.content.decode()


def test_strangers_evaluations_are_not_found(owner, outsider):
    mine = _evaluation(owner, ["solver", "random"], seed=11)
    theirs = _evaluation(outsider, ["random"], seed=11)

    as_outsider = _client(outsider).get(f"/arena/side-by-side/?evaluation={mine.pk}&index=0&model=0&model=1")
    all_models = _client(outsider).get(f"/arena/side-by-side/?evaluation={mine.pk}&index=0")
    mixed = _first_episodes(_client(owner), mine, theirs)
    missing_model = _client(owner).get(f"/arena/side-by-side/?episode={mine.pk}:0:0&episode={mine.pk}:3:0")

    assert [r.status_code for r in (as_outsider, all_models, mixed, missing_model)] == [404] * 4
    assert f"no evaluation with id {theirs.pk}" in mixed.content.decode()
    assert _first_episodes(_client(outsider), mine, theirs).status_code == 404
    anonymous = _first_episodes(Client(), mine, theirs)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("episode=1:0", "episode must be &lt;evaluation id&gt;:&lt;model index&gt;:&lt;episode index&gt;"),
        ("evaluation=x&index=0&model=0&model=1", "evaluation, index and model are whole numbers"),
        ("", "name the columns"),
        ("{a}&turn=abc", "turn must be a whole number from 0 to 2"),
    ],
)
def test_malformed_queries_are_refused(owner, query, message):
    evaluation = _evaluation(owner, ["solver", "random"])
    query = query.replace("{a}", f"evaluation={evaluation.pk}&index=0")

    response = _client(owner).get(f"/arena/side-by-side/?{query}")

    assert response.status_code == 400
    assert message in response.content.decode()


def test_a_column_still_being_played_is_pending_with_its_evaluation(owner):
    stored = _evaluation(owner, ["solver"], seed=5, episode_seeds=[5])
    queued = _evaluation(owner, ["random", "a/b"], status="running", played=False, episode_seeds=[5])

    response = _client(owner).get(
        f"/arena/side-by-side/?episode={stored.pk}:0:0&episode={queued.pk}:0:0&episode={queued.pk}:1:0"
    )

    assert response.status_code == 200
    page = _embedded(response)
    assert [c["state"] for c in page["columns"]] == ["stored", "pending", "pending"]
    assert page["pending"] == [
        {"id": queued.pk, "api": f"/api/evaluations/{queued.pk}/", "done": 0, "total": 2, "status": "running"}
    ]
    assert "Playing on the worker (greedy): 0 / 2 episode(s) stored" in response.content.decode()


def test_a_finished_evaluation_without_the_episode_says_so(owner):
    stored = _evaluation(owner, ["solver"], seed=5)
    failed = _evaluation(owner, ["random"], status="failed", played=False)
    Evaluation.objects.filter(pk=failed.pk).update(error="boom")

    response = _first_episodes(_client(owner), stored, failed)

    assert response.status_code == 200
    assert f"random: evaluation #{failed.pk} is failed without this episode: boom" in response.content.decode()


def test_the_evaluation_page_links_each_episode_to_its_side_by_side(owner):
    evaluation = _evaluation(owner, ["solver", "random"])
    Evaluation.objects.filter(pk=evaluation.pk).update(episodes=2)

    html = _client(owner).get(f"/evaluations/{evaluation.pk}/").content.decode()

    links = re.findall(r'class="side-by-side-link" data-index="(\d)" href="([^"]+)"', html)
    assert links == [
        ("0", f"/arena/side-by-side/?evaluation={evaluation.pk}&amp;index=0&amp;model=0&amp;model=1"),
        ("1", f"/arena/side-by-side/?evaluation={evaluation.pk}&amp;index=1&amp;model=0&amp;model=1"),
    ]


# --- the arena form and its service ------------------------------------------------------


def test_arena_reuses_a_stored_episode_and_queues_only_the_missing_model(owner, echo_id):
    from webapp.catalog.models import Environment

    echo = Environment.objects.get(pk=echo_id)
    # Stored: the solver on seed 42 in an evaluation of given seeds, same prompt and settings.
    stored = _evaluation(
        owner, ["solver"], seed=42, environment=echo, environment_name="echo",
        prompt="Echo '{phrase}'.", episode_seeds=[42],
    )
    # Not reusable: a `{phrase}` prompt played with drawn seeds, and other settings.
    _evaluation(owner, ["random"], seed=42, environment=echo, environment_name="echo", prompt="Echo '{phrase}'.")
    _evaluation(
        owner, ["random"], seed=42, environment=echo, environment_name="echo", prompt="Echo '{phrase}'.",
        episode_seeds=[42], settings={**DECODING, "max_completion_length": 64},
    )
    before = Evaluation.objects.count()

    refs, queued = arena_prepare(
        user=owner, data={"environment": echo_id, "models": ["solver", "random"], "seed": 42}
    )

    assert queued is not None and Evaluation.objects.count() == before + 1
    assert refs == [ColumnRef(stored.pk, 0, 0), ColumnRef(queued.pk, 0, 0)]
    assert (
        [e["label"] for e in queued.model_specs], queued.episodes, queued.episode_seeds,
        queued.prompt, queued.settings, queued.status,
    ) == (["random"], 1, [42], "Echo '{phrase}'.", DECODING, "queued")


def test_arena_with_everything_stored_queues_nothing(owner, echo_id):
    from webapp.catalog.models import Environment

    echo = Environment.objects.get(pk=echo_id)
    stored = _evaluation(
        owner, ["solver", "random"], seed=42, environment=echo, environment_name="echo",
        prompt="Echo '{phrase}'.", episode_seeds=[42],
    )
    before = Evaluation.objects.count()

    refs, queued = arena_prepare(
        user=owner, data={"environment": echo_id, "models": ["random", "solver"], "seed": 42}
    )

    assert (queued, Evaluation.objects.count()) == (None, before)
    assert refs == [ColumnRef(stored.pk, 1, 0), ColumnRef(stored.pk, 0, 0)]


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        ({"models": ["solver"]}, {"models": ["pick 2 to 4 models or checkpoints; 1 given"]}),
        ({"models": ["solver", "random", "a/b", "a/c", "a/d"]}, {"models": ["pick 2 to 4 models or checkpoints; 5 given"]}),
        ({"models": ["solver", "random"], "seed": -1}, {"seed": ["Input should be greater than or equal to 0"]}),
        ({"models": ["solver", "solver"], "seed": 1}, {"models.1": ["'solver' is listed twice (as model 0)"]}),
        ({"models": ["solver", {"run": 999, "checkpoint": 1}], "seed": 1}, {"models.1": ["no run with id 999"]}),
    ],
)
def test_arena_refusals_write_nothing(owner, echo_id, data, errors):
    with pytest.raises(RunConfigError) as refused:
        arena_prepare(user=owner, data={"environment": echo_id, **data})

    assert refused.value.errors == errors
    assert Evaluation.objects.count() == 0


def test_the_arena_form_redirects_to_the_side_by_side(owner, echo_id):
    client = _client(owner)
    page = client.get("/arena/")
    assert page.status_code == 200 and 'aria-current="page">Arena<' in page.content.decode()
    assert '<option value="solver">solver (reference policy)</option>' in page.content.decode()

    response = client.post(
        "/arena/",
        {"environment": str(echo_id), "model_0": "solver", "model_1": "", "model_text_1": "random", "seed": "9"},
    )

    evaluation = Evaluation.objects.get()
    assert response.status_code == 302
    assert response["Location"] == (
        f"/arena/side-by-side/?episode={evaluation.pk}%3A0%3A0&episode={evaluation.pk}%3A1%3A0"
    )
    assert (evaluation.episode_seeds, [e["label"] for e in evaluation.model_specs]) == ([9], ["solver", "random"])
    pending = client.get(response["Location"])
    assert pending.status_code == 200
    assert [c["state"] for c in _embedded(pending)["columns"]] == ["pending", "pending"]


def test_the_arena_form_shows_errors_escaped_and_writes_nothing(owner, echo_id):
    response = _client(owner).post(
        "/arena/", {"environment": str(echo_id), "model_0": "solver", "model_text_1": XSS, "seed": "1"}
    )

    assert response.status_code == 400
    assert XSS not in response.content.decode()
    assert "models.1: give a hub id" in response.content.decode()
    assert Evaluation.objects.count() == 0


def test_episode_seeds_in_an_evaluation_request(api, echo_id):
    given = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver"], "episode_seeds": [5, 9]},
        format="json",
    )
    clash = api.post(
        "/api/evaluations/",
        {"environment": echo_id, "models": ["solver"], "episode_seeds": [5], "episodes": 3},
        format="json",
    )

    assert given.status_code == 201, given.json()
    assert (given.json()["episodes"], given.json()["episode_seeds"]) == (2, [5, 9])
    assert clash.status_code == 400
    assert clash.json()["episodes"] == [
        "3 given with 1 episode_seeds; leave episodes out or give one seed per episode"
    ]
    assert Evaluation.objects.count() == 1
