"""Per-tool metrics end to end: real TRL training (the demo model), real echo and mcpdemo
servers, the database. Every step stores the per-tool keys, and their counts agree with
TRL's own per-step tool counts and with the stored transcripts.

Trains in this process (as test_health's NaN test does): the counts are checked against
the step's rollouts, which needs nothing a worker process would add."""

from __future__ import annotations

import pytest

from envs.adapters.tool_metrics import ERROR_CLASSES
from tests.e2e.helpers import register_echo, run_config
from tests.factories import RunFactory
from webapp.runs.config import parse_run_config
from webapp.runs.models import MetricPoint, Rollout, Run
from webapp.runs.services import run_claim

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ERROR_KEYS = {f"tools/errors/{name}" for name in ERROR_CLASSES}
SERVER_ENV = {"ENABLE_WEB_INTERFACE": "false", "OPENENV_MODE": "simulation"}


def train_run(owner, config: dict, lease: str) -> Run:
    from worker.training.runner import train

    parsed = parse_run_config(config)
    run = RunFactory(
        owner=owner,
        name="tools",
        config=parsed.model_dump(mode="json"),
        model=parsed.model,
        max_steps=parsed.grpo.max_steps,
    )
    assert run_claim(run_id=run.pk, lease_owner=lease, worker_name="test").outcome == "claimed"
    assert train(run_id=run.pk, lease_owner=lease, worker_name="test") == "succeeded"
    return Run.objects.get(pk=run.pk)


def step_values(run: Run, step: int) -> dict[str, float]:
    return dict(MetricPoint.objects.filter(run=run, step=step).values_list("key", "value"))


def per_tool(values: dict[str, float], field: str) -> dict[str, float]:
    return {
        key.split("/")[1]: value
        for key, value in values.items()
        if key.count("/") == 2 and key.endswith(f"/{field}") and not key.startswith("tools/errors/")
    }


def test_echo_run_stores_per_tool_metrics_at_every_step(api, owner, echo_url, demo_model):
    config = run_config(register_echo(api, echo_url), max_steps=2, save_steps=10)

    run = train_run(owner, config, "lease-tools-echo")

    assert run.step == 2
    for step in (1, 2):
        values = step_values(run, step)
        calls, failures = per_tool(values, "call_total"), per_tool(values, "failure_total")
        rollouts = Rollout.objects.filter(run=run, step=step).count()
        assert ERROR_KEYS <= set(values), step
        assert "echo" in calls and set(failures) == set(calls), values
        # TRL's own counts for the step: calls per rollout, and the failed share of them.
        assert sum(calls.values()) == round(values["tools/call_frequency"] * rollouts), values
        failed = sum(failures.values())
        assert failed == round(values["tools/failure_frequency"] * sum(calls.values())), values
        assert sum(values[key] for key in ERROR_KEYS) == failed
        assert ("tools/echo/latency_s" in values) == (calls["echo"] > 0)
        if calls["echo"]:
            assert 0 < values["tools/echo/latency_s"] < 30


@pytest.fixture(scope="module")
def mcpdemo_url():
    from tests.envs.servers import run_env_server

    with run_env_server("envs.mcpdemo.server:app", SERVER_ENV) as url:
        yield url


def register_mcpdemo(api, url: str) -> dict:
    response = api.post("/api/environments/", {"name": "my-mcpdemo", "base_url": url}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def mcpdemo_config(env_id: int, **grpo) -> dict:
    config = run_config(env_id, max_steps=1, save_steps=10, **grpo)
    config["environments"][0]["name"] = "mcpdemo"
    return config


def test_mcpdemo_run_stores_its_tools_at_every_step(api, owner, mcpdemo_url, demo_model):
    """The echo demo model does not know the shopping-list tools: whatever it calls is counted,
    and both tools of the environment are listed, zero calls included."""
    config = mcpdemo_config(register_mcpdemo(api, mcpdemo_url)["id"])

    run = train_run(owner, config, "lease-tools-mcpdemo")

    values = step_values(run, 1)
    calls, failures = per_tool(values, "call_total"), per_tool(values, "failure_total")
    assert {"add_item", "total"} <= set(calls) and set(failures) == set(calls), values
    assert ERROR_KEYS <= set(values)
    rollouts = Rollout.objects.filter(run=run, step=1).count()
    assert sum(calls.values()) == round(values["tools/call_frequency"] * rollouts), values
    assert sum(values[key] for key in ERROR_KEYS) == sum(failures.values())


def test_a_scripted_turn_through_trls_tool_loop_is_counted_exactly(api, owner, mcpdemo_url, demo_model, tmp_path):
    """One assistant turn with five tool calls, scripted (the demo model would not make
    them), run by TRL's own tool loop against the real mcpdemo server; the model then
    answers the results, as in training."""
    from envs.adapters import toolstats
    from worker.training.runner import build_trainer, environment_factory

    config = parse_run_config(
        mcpdemo_config(register_mcpdemo(api, mcpdemo_url)["id"], max_completion_length=512,
                       max_tool_calling_iterations=1)
    )
    run = RunFactory(
        owner=owner,
        name="scripted",
        config=config.model_dump(mode="json"),
        model=config.model,
        max_steps=1,
    )
    trainer = build_trainer(run, config, None, tmp_path)
    adapter = environment_factory(config, owner)[0]()
    adapter.reset(seed=3)
    trainer._sync_tool_dicts = [{name: getattr(adapter, name) for name in ("add_item", "total")}]
    trainer._async_tool_dicts = [{}]
    trainer._batch_environments = [None]  # what TRL sets per batch: one environment, unnamed
    prompt = [{"role": "user", "content": "Build a shopping list that adds up to 5."}]
    prompt_ids = trainer.processing_class(
        trainer.processing_class.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    )["input_ids"]
    completion_ids = trainer.processing_class("calling tools")["input_ids"]

    def call(tool: str, **arguments) -> dict:
        return {"type": "function", "function": {"name": tool, "arguments": arguments}}

    completions = [[{"role": "assistant", "content": "", "tool_calls": [
        call("add_item", name="apple", quantity=2),
        call("add_item", name=" ", quantity=1),  # the tool raises on the server: execution_error
        call("add_item", quantity=1),  # no name: refused before the server
        call("echo", message="hi"),  # no such tool: TRL answers
        call("total"),
    ]}]]
    toolstats.COLLECTOR.start(tool_names=trainer.envlab_tool_names())
    try:
        _, completions, _, _, trl_calls, trl_failures, _ = trainer._tool_call_loop(
            [prompt], [prompt_ids], [completion_ids], completions, None, None, None
        )
        toolstats.COLLECTOR.record_transcripts([{"messages": completions[0]}], tool_names=trainer.envlab_tool_names())
        values = toolstats.COLLECTOR.drain()
    finally:
        toolstats.COLLECTOR.stop()
        adapter._close()

    # Short results (the demo tokenizer spends a token per character or so): TRL keeps them all.
    assert [(m["name"], m["content"]) for m in completions[0] if m["role"] == "tool"] == [
        ("add_item", "apple: 2. Total quantity: 2."),
        ("add_item", str({"error": "Error calling tool 'add_item': name must not be blank"})),
        ("add_item", str({"error": "add_item: missing a required argument: 'name'"})),
        ("echo", str({"error": "Tool echo not found."})),
        ("total", "2"),
    ]
    assert set(latencies := {k: values.pop(k) for k in list(values) if k.endswith("/latency_s")}) == {
        "tools/add_item/latency_s", "tools/total/latency_s",
    }, latencies
    assert values == {
        "tools/add_item/call_total": 3.0,
        "tools/add_item/failure_total": 2.0,
        "tools/total/call_total": 1.0,
        "tools/total/failure_total": 0.0,
        "tools/echo/call_total": 1.0,
        "tools/echo/failure_total": 1.0,
        **{key: 0.0 for key in ERROR_KEYS},
        "tools/errors/execution_error": 1.0,
        "tools/errors/invalid_args": 1.0,
        "tools/errors/unknown_tool": 1.0,
    }
    assert (trl_calls, trl_failures) == (5, 3)  # TRL's own count of the same turn
