"""Harbor rollouts as OpenEnv harness sessions, for TRL's harness rollout worker
(`trl.experimental.async_grpo.openenv_harness.HarnessRolloutWorker`, worker/training/harness.py).

A Harbor server (openenv.harbor, `openenv harbor serve`) runs a whole rollout in one MCP call,
`run_rollout`: the loop-owning agent (its harness) works the task in a sandbox and samples every
turn from the engine at `llm_url` (the run's vLLM server), and the answer carries the verifier's
reward and the exact tokens and log-probabilities of each turn. One session here is one such
call: `wait_for_completion` makes it, `fetch_training_trace` hands TRL the captured turns
(openenv's own `to_training_trace`), `verify` forwards the verifier's reward. The agent's
tools live in its sandbox, so the session offers none of its own.

The answer is untrusted: it is validated by openenv's pydantic model, a failed rollout
(`ok: false`) raises so that TRL scores it as unscorable, and the server's address passes
the lab's outbound rules (envs/netguard.py) before anything is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from openenv.core.harness import ResourceSession, ResourceSessionFactory, VerifyResult
from openenv.core.harness.training import TrainingTrace

from envs import netguard
from envs.adapters import outage

log = logging.getLogger(__name__)

# The dataset row's message carries the task's index under this key (worker/training/harness.py): the
# rollout worker gives the factory the row's prompt and nothing else.
TASK_INDEX_KEY = "harbor_task_index"
DEFAULT_MESSAGE_TIMEOUT_S = 1800.0  # one rollout runs for minutes


def task_index(task: Any) -> int:
    """The Harbor task index a dataset row's prompt names."""
    messages = task if isinstance(task, list) else [task]
    for message in messages:
        if isinstance(message, Mapping):
            index = message.get(TASK_INDEX_KEY)
            if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
                return index
    raise ValueError(f"the row's prompt names no Harbor task (a message with '{TASK_INDEX_KEY}')")


class HarborSession(ResourceSession):
    """One rollout of one task. Loop-owning: TRL calls wait_for_completion, then
    fetch_training_trace and verify (openenv's TrainableSession protocol)."""

    def __init__(self, factory: HarborSessionFactory, index: int, episode_id: str | None) -> None:
        self.factory = factory
        self.index = index
        self.episode_id = episode_id or ""
        self.result: Any = None
        self._client: Any = None

    def initial_messages(self) -> list[dict[str, Any]]:
        return []  # the harness writes its own prompt from the task

    def list_tools(self) -> list[Any]:
        return []  # the agent's tools are in its sandbox

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise NotImplementedError("a loop-owning Harbor agent calls its own tools in its sandbox")

    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        """Run the rollout on the server (once); the number of turns it captured."""
        if self.result is None:
            from openenv.harbor.client import HarborEnv

            from envs.adapters import pinned_ws

            pinned_ws.install()  # its MCP WebSocket connects only where the outbound rules allow
            factory = self.factory

            def attempt() -> Any:
                # A fresh client each attempt: one whose connection failed holds no rollout.
                self.close()
                self._client = HarborEnv(factory.base_url, message_timeout_s=timeout_s or factory.message_timeout_s)
                # Its own httpx client (the Task API) would resolve the name again and honour
                # proxies, past the outbound rules (security review N1). The lab reads the Task
                # API through its own checked probe and needs only the pinned WebSocket here.
                self._client._http.close()  # noqa: SLF001 - HarborEnv's Task API client has no public close
                return self._client.run_rollout(
                    split=factory.dataset,
                    task_index=self.index,
                    harness=factory.harness,
                    sandbox=factory.sandbox,
                    llm_url=factory.llm_url,
                    model=factory.model,
                    agent_timeout_sec=factory.agent_timeout_sec,
                    agent_step_limit=factory.agent_step_limit,
                    sampling=factory.sampling,
                )

            self.result = outage.call_with_retry(
                attempt, env=factory.env_name or factory.base_url, what=f"the rollout of task {self.index}"
            )
        result = self.result
        if not result.ok:
            kind = result.exception_type or "error"
            if "timeout" in kind.lower():
                raise TimeoutError(f"Harbor rollout of task {self.index} timed out: {result.error or kind}")
            raise RuntimeError(f"Harbor rollout of task {self.index} failed ({kind}): {(result.error or '')[:500]}")
        return int(result.n_turns or len(result.turns))

    def fetch_training_trace(self) -> TrainingTrace:
        from openenv.harbor.contract import to_training_trace

        if self.result is None:
            raise RuntimeError("no rollout yet: wait_for_completion() first")
        return to_training_trace(self.result)  # ValueError for an eval-only capture

    def verify(self, transcript: list[dict[str, Any]], final_state: Any | None = None) -> VerifyResult:
        result = self.result
        if result is None:
            return VerifyResult(env_reward=None, done=False)
        return VerifyResult(
            env_reward=result.reward,
            done=True,
            metrics={"harbor_rewards": dict(result.rewards), "wall_s": result.wall_s, "turns": result.n_turns},
        )

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing must not turn a scored rollout into a failed one
                log.warning("closing the Harbor client failed", exc_info=True)


class HarborSessionFactory(ResourceSessionFactory[HarborSession]):
    """Sessions on one Harbor server, dataset, harness and sandbox. `sampling`: the training
    policy the rollout worker passes in loop-owning mode (the engine samples with it)."""

    def __init__(
        self,
        base_url: str,
        *,
        dataset: str,
        harness: str,
        sandbox: str,
        llm_url: str,
        model: str = "",
        agent_timeout_sec: float = 0.0,
        agent_step_limit: int = 0,
        sampling: dict[str, Any] | None = None,
        message_timeout_s: float = DEFAULT_MESSAGE_TIMEOUT_S,
        env_name: str = "",
    ) -> None:
        self.base_url = netguard.check_outbound_url(base_url.rstrip("/"), name="Harbor server")
        self.dataset = dataset
        self.harness = harness
        self.sandbox = sandbox
        self.llm_url = llm_url
        self.model = model
        self.agent_timeout_sec = float(agent_timeout_sec)
        self.agent_step_limit = int(agent_step_limit)
        self.sampling = dict(sampling) if sampling else None
        self.message_timeout_s = float(message_timeout_s)
        self.env_name = env_name  # the catalog's name, for the outage clock and its messages

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> HarborSession:
        return HarborSession(self, task_index(task), episode_id)
