"""The prompt-pinned timeline on a real run: a real echo server, a real Celery worker
training with TRL, real Redis. Two dataset rows over four steps of one prompt each: every
prompt comes back in the second epoch, and its timeline shows both of its groups."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import register_echo, run_config, wait_status
from webapp.runs.models import Rollout

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NUM_GENERATIONS = 4


def test_a_prompt_repeated_across_epochs_shows_its_groups_side_by_side(api, owner, client, echo_url, worker):
    env_id = register_echo(api, echo_url)
    # per_device_train_batch_size == num_generations: one prompt a step; 2 rows, 4 steps: two epochs.
    config = run_config(env_id, max_steps=4, rows=2, num_generations=NUM_GENERATIONS,
                        per_device_train_batch_size=NUM_GENERATIONS)
    response = api.post("/api/runs/", config, format="json")
    assert response.status_code == 201, response.json()
    run_id = response.json()["id"]
    run = wait_status(run_id, ("succeeded", "failed"), 300, worker)
    assert (run.status, run.error, run.step) == ("succeeded", "", 4)

    listed = api.get(f"/api/runs/{run_id}/prompts/").json()
    assert (listed["count"], listed["untracked_rollouts"], listed["next"]) == (2, 0, None)
    assert [(p["steps"], p["rollouts"], p["env"]) for p in listed["results"]] == [
        (2, 2 * NUM_GENERATIONS, "echo"), (2, 2 * NUM_GENERATIONS, "echo"),
    ]
    # The two prompts share the four steps between them, one a step.
    first, second = listed["results"]
    timelines = [api.get(f"/api/runs/{run_id}/prompts/{p['prompt_key']}/").json() for p in (first, second)]
    steps_of = [[column["step"] for column in t["steps"]] for t in timelines]
    assert sorted(steps_of[0] + steps_of[1]) == [1, 2, 3, 4]

    timeline = timelines[0]
    assert (timeline["prompt_key"], timeline["seed"], timeline["env"]) == (first["prompt_key"], first["seed"], "echo")
    assert timeline["trained_steps"] == timeline["default_steps"] == steps_of[0]
    stored = Rollout.objects.filter(run_id=run_id, prompt_key=first["prompt_key"]).order_by("seq")
    assert timeline["prompt"] == stored[0].prompt
    for column in timeline["steps"]:
        group = [r for r in stored if r.step == column["step"]]
        assert column["rollout_count"] == len(column["rollouts"]) == NUM_GENERATIONS
        assert [r["seq"] for r in column["rollouts"]] == [r.seq for r in group]
        assert [r["reward"] for r in column["rollouts"]] == [r.reward for r in group]
        assert [r["advantage"] for r in column["rollouts"]] == [r.advantage for r in group]
        assert {tuple(sorted(r["rewards"])) for r in column["rollouts"]} == {("env_reward", "tool_called")}
        rewards = [r.reward for r in group]
        assert column["reward_mean"] == pytest.approx(sum(rewards) / len(rewards))

    # The page draws one column per step the prompt was trained at, each linking its replays.
    client.force_login(owner)
    page = client.get(f"/runs/{run_id}/prompts/{first['prompt_key']}/")
    assert page.status_code == 200
    html = page.content.decode()
    for step in steps_of[0]:
        assert f'data-step="{step}" id="step-{step}"' in html
    assert html.count('class="rollout-replay"') == 2 * NUM_GENERATIONS
