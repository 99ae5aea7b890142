"""The replay pages: who may open them, which renderer they pick, `?turn=`, and the stored
episode embedded as JSON (json_script), never as HTML."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from tests.factories import EvaluationEpisodeFactory, EvaluationFactory, RunFactory
from tests.fixtures.accounts import grant
from tests.support.replay import replay_scripts, run_on_catch
from webapp.evaluations.models import Evaluation
from webapp.runs.models import Rollout, Run

pytestmark = pytest.mark.django_db

EVIL = '</script><script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
CATCH_START = "o . . . .\n. . . . .\n. . P . .\nRows left: 2. Move left or right, or stay."


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _embedded(response) -> dict:
    html = response.content.decode()
    match = re.search(
        r'<script id="replay-data" type="application/json">(.*?)</script>', html, re.S
    )
    assert match is not None
    return json.loads(match.group(1))


@pytest.fixture
def catch_run(owner) -> Run:
    run = run_on_catch(owner, "my-catch", max_steps=2)
    Rollout.objects.create(
        run=run,
        seq=3,
        step=1,
        env="catch",
        prompt=[{"role": "user", "content": "Catch the ball.\n" + CATCH_START}],
        messages=[
            {
                "role": "assistant",
                "content": "<think>" + EVIL + "</think>",
                "tool_calls": [{"type": "function", "function": {"name": "stay", "arguments": {}}}],
            },
            {"role": "tool", "name": "stay", "content": EVIL},
            {"role": "assistant", "content": "done"},
        ],
        rewards={"env_reward": 1.0, "tool_called": None, "bogus": "x"},
        reward=1.0,
        advantage=-0.5,
    )
    return run


def test_owner_opens_a_rollout_replay_with_the_episode_embedded_as_json(owner, catch_run):
    response = _client(owner).get(f"/replay/runs/{catch_run.pk}/3/?turn=1")

    assert response.status_code == 200
    html = response.content.decode()
    # The model's text is in the page only inside the JSON, with <, > and & escaped.
    assert "<img src=x" not in html
    assert "window.__xss=1</script>" not in html
    data = _embedded(response)
    assert data["source"] == "rollout"
    assert data["renderer"] == "catch"
    assert data["key"] == "catch"
    assert data["turn"] == 1
    assert data["turns"] == 2
    assert data["path"] == f"/replay/runs/{catch_run.pk}/3/"
    assert data["prompt"] == [{"role": "user", "content": "Catch the ball.\n" + CATCH_START}]
    assert data["messages"][1] == {"role": "tool", "name": "stay", "content": EVIL}
    assert data["reward"] == 1.0
    assert data["advantage"] == -0.5
    # A value that is not a number is shown as unknown.
    assert data["rewards"] == {"env_reward": 1.0, "tool_called": None, "bogus": None}
    assert data["back_url"] == f"/runs/{catch_run.pk}/#rollout-3"
    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert scripts == replay_scripts("catch", "player")


def test_a_turn_past_the_end_is_the_last_turn_and_a_malformed_one_is_refused(owner, catch_run):
    client = _client(owner)

    assert _embedded(client.get(f"/replay/runs/{catch_run.pk}/3/?turn=99"))["turn"] == 2
    assert _embedded(client.get(f"/replay/runs/{catch_run.pk}/3/"))["turn"] == 0
    refused = client.get(f"/replay/runs/{catch_run.pk}/3/?turn=-1")
    assert refused.status_code == 400
    assert "turn must be a whole number from 0 to 2, got &#x27;-1&#x27;" in refused.content.decode()


def test_outsiders_get_404_and_viewers_with_the_permission_see_it(
    owner, outsider, staff, catch_run, client
):
    url = f"/replay/runs/{catch_run.pk}/3/"

    assert _client(outsider).get(url).status_code == 404
    assert _client(staff).get(url).status_code == 404
    assert _client(grant(outsider, "runs.view_run")).get(url).status_code == 200
    assert client.get(url).status_code == 302  # anonymous: to the login page
    assert _client(owner).get(f"/replay/runs/{catch_run.pk}/4/").status_code == 404
    assert _client(owner).get(f"/replay/runs/{catch_run.pk + 1}/3/").status_code == 404


def test_an_environment_without_a_renderer_replays_as_the_transcript(owner):
    run = RunFactory(owner=owner, name="echo", max_steps=1)
    Rollout.objects.create(run=run, seq=1, step=0, env="echo", prompt="Echo 'x'.", messages=[])

    data = _embedded(_client(owner).get(f"/replay/runs/{run.pk}/1/"))

    assert (data["key"], data["renderer"], data["turns"]) == ("", "transcript", 0)
    assert data["prompt"] == [{"role": "user", "content": "Echo 'x'."}]


def _evaluation(owner) -> Evaluation:
    evaluation = EvaluationFactory(
        owner=owner, environment_name="wordle", environment_key="wordle", prompt="Play Wordle.", seed=5
    )
    EvaluationEpisodeFactory(
        evaluation=evaluation,
        seed=5,
        messages=[
            {"role": "user", "content": "Play Wordle.\nGuess the secret word."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "guess", "arguments": {"guess": "crane"}},
                    }
                ],
            },
            {
                "role": "tool",
                "name": "guess",
                "content": "C R A N E\nG G G G G\nYou won in 1 guess!",
            },
        ],
    )
    return evaluation


def test_evaluation_episode_replay_and_its_access(owner, outsider):
    evaluation = _evaluation(owner)
    url = f"/replay/evaluations/{evaluation.pk}/0/0/"

    response = _client(owner).get(url)

    assert response.status_code == 200
    data = _embedded(response)
    assert (data["source"], data["renderer"], data["turns"], data["won"], data["seed"]) == (
        "evaluation",
        "wordle",
        1,
        True,
        5,
    )
    assert data["prompt"] == [{"role": "user", "content": "Play Wordle.\nGuess the secret word."}]
    assert [m["role"] for m in data["messages"]] == ["assistant", "tool"]
    assert _client(outsider).get(url).status_code == 404
    assert _client(owner).get(f"/replay/evaluations/{evaluation.pk}/0/1/").status_code == 404
    assert _client(owner).get(f"/replay/evaluations/{evaluation.pk}/1/0/").status_code == 404


def test_run_and_evaluation_pages_link_every_transcript_to_its_replay(owner, catch_run):
    evaluation = _evaluation(owner)
    client = _client(owner)

    run_page = client.get(f"/runs/{catch_run.pk}/").content.decode()
    evaluation_page = client.get(f"/evaluations/{evaluation.pk}/").content.decode()

    assert f'href="/replay/runs/{catch_run.pk}/3/"' in run_page
    episodes = json.loads(
        re.search(
            r'<script id="episodes-data" type="application/json">(.*?)</script>',
            evaluation_page,
            re.S,
        ).group(1)
    )
    assert [e["replay_url"] for e in episodes] == [f"/replay/evaluations/{evaluation.pk}/0/0/"]


def test_the_run_local_replay_path_redirects_for_those_who_may_see_it(owner, outsider, catch_run):
    path = f"/runs/{catch_run.pk}/rollouts/3/replay/"

    moved = _client(owner).get(path + "?turn=1")
    viewer = _client(grant(outsider, "runs.view_run")).get(path)

    assert (moved.status_code, moved["Location"]) == (301, f"/replay/runs/{catch_run.pk}/3/?turn=1")
    assert (viewer.status_code, viewer["Location"]) == (301, f"/replay/runs/{catch_run.pk}/3/")
    assert _client(owner).get(moved["Location"]).status_code == 200


def test_the_run_local_replay_path_tells_an_outsider_nothing(owner, outsider, staff, catch_run, client):
    refused = [_client(user).get(f"/runs/{catch_run.pk}/rollouts/3/replay/") for user in (outsider, staff)]

    assert [(r.status_code, r.has_header("Location")) for r in refused] == [(404, False), (404, False)]
    assert _client(owner).get(f"/runs/{catch_run.pk}/rollouts/4/replay/").status_code == 404
    assert _client(owner).get(f"/runs/{catch_run.pk + 1}/rollouts/3/replay/").status_code == 404
    anonymous = client.get(f"/runs/{catch_run.pk}/rollouts/3/replay/")
    assert (anonymous.status_code, anonymous["Location"].split("?")[0]) == (302, "/login/")
