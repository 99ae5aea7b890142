"""A run whose rollouts follow two training prompts across steps, written through the
worker's own write path (telemetry_record), for the prompt timeline's tests."""

from __future__ import annotations

from tests.factories import RunFactory
from webapp.runs.models import Rollout, Run, prompt_key
from webapp.runs.telemetry.record import telemetry_record

XSS = '</pre><script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
PROMPT_A = [{"role": "user", "content": "Echo 'alpha'."}]
PROMPT_B = [{"role": "user", "content": "Echo 'beta'."}]
KEY_A = prompt_key("echo", PROMPT_A, 11)
KEY_B = prompt_key("echo", PROMPT_B, 22)


def _row(step: int, prompt: list, seed: int, reward: float, text: str) -> dict:
    return {
        "step": step, "env": "echo", "seed": seed, "prompt": prompt,
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "echo", "arguments": {"message": text}}}]},
            {"role": "tool", "name": "echo", "content": text},
        ],
        "rewards": {"env_reward": reward, "tool_called": 1.0},
        "reward": reward + 0.1, "advantage": reward - 0.5,
    }


def record_two_prompts(run: Run) -> None:
    """Prompt A (seed 11) at steps 1 and 3, prompt B (seed 22) at step 2, two rollouts each:
    totals A@1 0.1, 1.1; B@2 0.6, 0.35; A@3 1.1, 1.1 (seqs 1-6 in that order)."""
    rows = [
        (1, PROMPT_A, 11, 0.0, "alpha?"), (1, PROMPT_A, 11, 1.0, "alpha"),
        (2, PROMPT_B, 22, 0.5, "bet"), (2, PROMPT_B, 22, 0.25, XSS),
        (3, PROMPT_A, 11, 1.0, "alpha"), (3, PROMPT_A, 11, 1.0, "alpha"),
    ]
    events = [("rollouts", [_row(*row)]) for row in rows]
    telemetry_record(run_id=run.pk, lease_owner="lease", events=events)


def running_run(owner, name: str = "prompts") -> Run:
    return RunFactory(owner=owner, name=name, status=Run.Status.RUNNING, lease_owner="lease")


def prompted_run(owner, name: str = "prompts") -> Run:
    """A running run with record_two_prompts's rollouts."""
    run = running_run(owner, name)
    record_two_prompts(run)
    return run


def legacy_run(owner) -> Run:
    """A run stored before prompt tracking: its rollouts have the prompt key ""."""
    run = RunFactory(owner=owner, name="old", max_steps=2)
    for seq in (1, 2, 3):
        Rollout.objects.create(run=run, seq=seq, step=seq, env="echo", prompt=PROMPT_A, reward=1.0)
    return run
