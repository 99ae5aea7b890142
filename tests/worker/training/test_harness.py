"""Harness runs on CPU: the run config as TRL's async GRPO config field by field, the reward
recipe on recorded harness outcomes, and TRL's own harness rollout loop playing sessions of a
real Harbor server (tests/envs/harbor_stub.py) whose rollouts are recorded.

STAND-IN, beside what cannot run here: the stub answers `run_rollout` with recorded results
(no `harbor` package, sandbox, agent or GPU engine on this machine). Everything from the MCP
call to TRL's training sequences is the real code; no vLLM is needed for a loop-owning agent's
session, only for training, which needs a GPU (routing sends harness runs to vLLM workers).
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl.experimental.async_grpo import AsyncGRPOConfig
from trl.experimental.async_grpo.openenv_harness import HarnessRolloutOutcome, _HarnessRolloutLoop

from tests.envs.servers import run_env_server
from webapp.runs.config import GRPOSettings, RunConfigError, parse_run_config
from webapp.runs.grpo_fields import ASYNC_REFUSED, TRL_PASSTHROUGH
from webapp.runs.routing import queue_for, run_needs
from worker.training.harness import (
    ASYNC_GRPO_FIELDS,
    ASYNC_TRL_FIELDS,
    HarnessReward,
    async_config_kwargs,
    harness_dataset_rows,
    rollout_worker_kwargs,
)

VLLM = "http://127.0.0.1:9"


def config(**overrides: Any) -> Any:
    data: dict[str, Any] = {
        "name": "agent",
        "model": "org/model",
        "environments": [{"environment": 1, "name": "harbor", "prompt": ""}],
        "device": "cuda",
        "generation": {"backend": "vllm", "vllm_mode": "server", "vllm_server_base_url": VLLM},
        "grpo": {"num_generations": 2, "per_device_train_batch_size": 4, "max_steps": 7, "learning_rate": 3e-6,
                 "temperature": 0.7, "max_completion_length": 512, "save_steps": 3, "seed": 11},
        "harness": {"dataset": "mini", "harness": "bash", "tasks": 3, "max_concurrent_rollouts": 5,
                    "max_staleness": 2, "weight_sync_steps": 3},
        "rewards": [
            {"name": "outcome", "kind": "outcome"},
            {"name": "failures", "kind": "penalty", "weight": 1.0, "params": {"attribute": "tool_failures", "scale": 0.1}},
        ],
    }
    data.update(overrides)
    return parse_run_config(data)


def test_the_async_config_gets_every_setting_by_name(tmp_path: Path) -> None:
    run = config()
    kwargs = async_config_kwargs(run, output_dir=str(tmp_path))
    args = AsyncGRPOConfig(**kwargs)
    fields = {f.name for f in dataclasses.fields(AsyncGRPOConfig)}
    # Every GRPO setting but beta (refused) is an AsyncGRPOConfig field of the same name.
    assert set(GRPOSettings.model_fields) - set(ASYNC_GRPO_FIELDS) == {"beta", *TRL_PASSTHROUGH}
    assert set(ASYNC_GRPO_FIELDS) <= fields and set(kwargs) <= fields
    # The allowlisted TRL fields the async config has; the schema refuses the others for a harness run.
    assert set(ASYNC_TRL_FIELDS) <= fields and set(ASYNC_REFUSED) - fields == set(ASYNC_REFUSED)
    for name in ASYNC_GRPO_FIELDS:
        assert getattr(args, name) == getattr(run.grpo, name), name
    assert (args.max_inflight_tasks, args.max_staleness, args.weight_sync_steps) == (5, 2, 3)
    assert args.vllm_server_base_url == VLLM
    assert (args.logging_steps, args.report_to, args.save_strategy) == (1, [], "steps")
    # A managed server's address when the run names none.
    managed = config(generation={"backend": "vllm", "vllm_mode": "server"})
    assert async_config_kwargs(managed, output_dir="o", vllm_server_base_url="http://10.0.0.2:8000")[
        "vllm_server_base_url"] == "http://10.0.0.2:8000"
    with pytest.raises(ValueError, match="vLLM server"):
        async_config_kwargs(managed, output_dir="o")


def test_the_async_config_gets_the_allowlisted_fields_a_harness_run_sets(tmp_path: Path) -> None:
    grpo = {"num_generations": 2, "per_device_train_batch_size": 4, "top_p": 0.9, "epsilon_high": 0.28,
            "lr_scheduler_type": "cosine", "gradient_checkpointing": False}
    kwargs = async_config_kwargs(config(grpo=grpo), output_dir=str(tmp_path))
    assert {k: kwargs[k] for k in ("top_p", "epsilon_high", "lr_scheduler_type", "activation_checkpointing", "bf16")} == {
        "top_p": 0.9, "epsilon_high": 0.28, "lr_scheduler_type": "cosine", "activation_checkpointing": False,
        "bf16": False,
    }
    assert "min_p" not in kwargs  # not set: the async trainer's default
    args = AsyncGRPOConfig(**kwargs)
    assert (args.top_p, args.epsilon_high, args.activation_checkpointing) == (0.9, 0.28, False)


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ({"generation": {"backend": "vllm", "vllm_mode": "colocate"}}, "generation", "vLLM server"),
        ({"device": "cpu", "generation": {}}, "generation", "vLLM server"),
        ({"grpo": {"beta": 0.1}}, "grpo.beta", "no KL term"),
        ({"grpo": {"loss_type": "dr_grpo"}}, "grpo.loss_type", "has no loss_type"),
        ({"sft_warmup": {"source": "solver"}}, "sft_warmup", "no SFT warm-up"),
        ({"environments": [{"environment": 1, "name": "a"}, {"environment": 2, "name": "b"}]}, "environments", "one environment"),
        ({"harness": {"dataset": "mini", "harness": "bash", "max_concurrent_rollouts": 0}},
         "harness.max_concurrent_rollouts", "greater than or equal to 1"),
    ],
)
def test_a_harness_run_the_async_trainer_cannot_carry_is_refused(overrides: dict, key: str, words: str) -> None:
    with pytest.raises(RunConfigError) as caught:
        config(**overrides)
    assert words in " ".join(caught.value.errors[key]), caught.value.errors


def test_a_harness_run_goes_to_a_vllm_worker() -> None:
    run = config()
    assert queue_for(run_needs(run)) == "train-vllm-1"
    managed = config(generation={"backend": "vllm", "vllm_mode": "server"})
    assert queue_for(run_needs(managed)) == "train-vllm-2"  # one more GPU for the server


def outcome(reward: float | None, *, calls: int = 2, failures: int = 0, timed_out: bool = False,
            by_name: dict[str, int] | None = None) -> HarnessRolloutOutcome:
    return HarnessRolloutOutcome(
        env_reward=reward, completion=[{"role": "assistant", "content": "done"}], trace=[],
        tool_call_count=calls, tool_failure_count=failures, tool_calls_by_name=by_name or {"bash": calls},
        timed_out=timed_out,
    )


def test_the_recipe_scores_recorded_harness_outcomes_exactly() -> None:
    reward = HarnessReward(config().rewards)
    assert reward(outcome(1.0)) == 1.0
    assert reward(outcome(1.0, calls=5, failures=3)) == pytest.approx(0.7)
    assert reward(outcome(0.0, failures=1)) == pytest.approx(-0.1)
    # No verifier reward: the outcome term is None and the penalty still counts (TRL's nansum).
    assert reward(outcome(None, failures=2)) == pytest.approx(-0.2)
    only_outcome = HarnessReward(config(rewards=[{"name": "outcome", "kind": "outcome"}]).rewards)
    assert only_outcome(outcome(None)) is None  # unscorable: left out of the group's baseline
    timed = HarnessReward(config(rewards=[
        {"name": "solved", "kind": "expression", "params": {"expression": "won - 0.5 * timed_out"}},
        {"name": "bash", "kind": "expression", "weight": 0.01, "params": {"expression": "calls_bash"}},
    ]).rewards)
    assert timed(outcome(1.0, timed_out=True, calls=3)) == pytest.approx(0.5 + 0.03)
    # It crosses into the rollout worker's child process as a pickle.
    assert pickle.loads(pickle.dumps(reward))(outcome(1.0, calls=5, failures=3)) == pytest.approx(0.7)


def test_every_attribute_of_an_outcome_is_listed_for_the_composer() -> None:
    from envs.adapters.attributes import ATTRIBUTES
    from worker.training.harness import outcome_episode

    listed = {name for name, _ in ATTRIBUTES["harbor"]}
    names = set(outcome_episode(outcome(1.0, by_name={"bash": 2})).attributes)
    assert {n for n in names if not n.startswith("calls_")} <= listed | {"reward_last", "reward_sum", "reward_max", "steps"}
    assert "calls_bash" in names and "calls_<tool>" in listed


# --- TRL's harness loop on a real Harbor server with recorded rollouts ----------------------------


def _turn(node: str, prompt: list[int], completion: list[int]) -> dict[str, Any]:
    return {
        "turn": 0, "node_id": node, "prompt_token_ids": prompt, "completion_token_ids": completion,
        "per_token_logps": [-0.5] * len(completion), "loss_mask": [0] * len(prompt) + [1] * len(completion),
        "text": "ls", "tool_calls": [{"name": "bash", "arguments": {"cmd": "ls"}}],
        "request_messages": [{"role": "user", "content": "fix it"}],
    }


RECORDED = {
    "0": {"reward": 1.0, "rollout_type": "train", "n_turns": 2,
          "turns": [_turn("a", [1, 2, 3], [4, 5]), {**_turn("b", [1, 2, 3, 4, 5, 6], [7, 8, 9]), "turn": 1}]},
    "1": {"reward": 0.0, "rollout_type": "train", "n_turns": 1, "turns": [_turn("c", [1, 2], [3])]},
    "2": {"ok": False, "error": "the sandbox did not start", "exception_type": "SandboxError"},
}


@pytest.fixture(scope="module")
def harbor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("harbor")
    task = root / "mini" / "tasks" / "fix-it"
    task.mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "instruction.md").write_text("Fix it.")
    (root / "rollouts.json").write_text(json.dumps(RECORDED))
    calls = root / "calls.jsonl"
    env = {"HARBOR_STUB_DATASET": str(root / "mini"), "HARBOR_STUB_ROLLOUTS": str(root / "rollouts.json"),
           "HARBOR_STUB_CALLS": str(calls)}
    with run_env_server("tests.envs.harbor_stub:app", env, startup_timeout=60) as url:
        yield url, calls


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """The demo models' tokenizer and chat template; no weights (a loop-owning agent samples)."""
    from worker.demo_model.tokenizer import train_tokenizer

    return train_tokenizer(vocab_size=600, seed=0, conversations=50)


def _loop(url: str, tokenizer: Any) -> _HarnessRolloutLoop:
    from datasets import Dataset

    run = config()
    args = AsyncGRPOConfig(**async_config_kwargs(run, output_dir="unused"))
    dataset = Dataset.from_list(harness_dataset_rows(run, [{"index": 0, "name": "fix-it", "dataset": "mini"}]))
    kwargs = rollout_worker_kwargs(
        config=run, args=args, environment=type("Env", (), {"base_url": url}), dataset=dataset,
        tokenizer=tokenizer, model_name="org/model", eos_token_ids=[0],
    )
    pickle.dumps(kwargs)  # what HarnessRolloutWorker.start checks before spawning its child
    ctx = multiprocessing.get_context("spawn")
    return _HarnessRolloutLoop(
        **kwargs, rollout_buffer=ctx.Queue(), model_version_value=ctx.Value("i", 0),
        heartbeat_value=ctx.Value("d", 0.0), failed_event=ctx.Event(), exception_info_queue=ctx.Queue(),
        metrics_queue=ctx.Queue(),
    )


def test_trls_harness_loop_plays_recorded_rollouts_and_scores_them_with_the_recipe(
    harbor: tuple[str, Path], tokenizer: Any
) -> None:
    url, calls = harbor
    loop = _loop(url, tokenizer)
    rows = harness_dataset_rows(config(), [{"index": 0, "name": "fix-it", "dataset": "mini"}])
    assert [r["prompt"][0]["content"] for r in rows] == ["fix-it", "mini task 1", "mini task 2"]

    (_completion, ids, sequences, tool_calls, failures, reward), metrics = loop._run_session(rows[0]["prompt"], 0)
    assert (reward, tool_calls, failures) == (1.0, 2, 0)
    assert ids == [4, 5, 7, 8, 9] and len(sequences) == 1  # the second turn extends the first
    assert metrics["tool_calls_by_name"] == {"bash": 2} and metrics["correctness"] == 1.0

    (_, _, sequences, _, _, reward), _ = loop._run_session(rows[1]["prompt"], 1)
    assert reward == 0.0 and len(sequences) == 1
    # A rollout the server could not run is unscorable, not a crash of the worker.
    assert loop._run_session(rows[2]["prompt"], 2) == (_HarnessRolloutLoop._EMPTY_ROLLOUT, None)

    sent = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [(c["split"], c["task_index"], c["harness"], c["sandbox"]) for c in sent] == [
        ("mini", 0, "bash", "docker"), ("mini", 1, "bash", "docker"), ("mini", 2, "bash", "docker")]
    assert {c["llm_url"] for c in sent} == {VLLM}
    assert sent[0]["sampling"]["temperature"] == 0.7  # the trainer's policy, for the engine


def test_a_row_without_a_task_index_is_refused(harbor: tuple[str, Path]) -> None:
    from envs.adapters.harbor import HarborSessionFactory

    url, _ = harbor
    factory = HarborSessionFactory(url, dataset="mini", harness="bash", sandbox="docker", llm_url=VLLM)
    with pytest.raises(ValueError, match="names no Harbor task"):
        factory.create([{"role": "user", "content": "fix-it"}])


def test_a_rollouts_client_has_no_unchecked_http_path(harbor: tuple[str, Path]) -> None:
    """Security review N1: openenv's HarborEnv opens an httpx client of its own, which would
    resolve the server's name again and follow proxies; only its pinned WebSocket is used."""
    from envs.adapters.harbor import TASK_INDEX_KEY, HarborSessionFactory

    url, _ = harbor
    factory = HarborSessionFactory(url, dataset="mini", harness="bash", sandbox="docker", llm_url=VLLM)
    session = factory.create([{"role": "user", "content": "fix-it", TASK_INDEX_KEY: 0}])
    try:
        assert session.wait_for_completion(60) == 2  # played over the pinned WebSocket
        client = session._client
        assert client._http.is_closed
        with pytest.raises(RuntimeError, match="client has been closed"):
            client.splits()
    finally:
        session.close()
