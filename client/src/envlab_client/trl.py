"""Stream a TRL (or any transformers) training run into envlab from your own script:

    from envlab_client.trl import EnvlabCallback
    trainer = GRPOTrainer(..., callbacks=[EnvlabCallback("http://lab:8000", token, name="my run")])
    trainer.train()

What it sends, to an external run it makes on the lab (`POST /api/runs/external/`, with the
trainer's arguments as its config) or to `run=` (an external run's id):
- every `on_log` entry, every numeric key of it (TRL's per-reward `rewards/<name>/mean|std`
  included), at the trainer's global step;
- with TRL's GRPOTrainer, the generation batch behind each log: prompt, completion (a chat
  transcript, tool calls and tool results included when the trainer uses tools), each reward
  function's score, the weighted reward and the advantage. They are read from the trainer's
  rolling buffers (`trainer._logs`, TRL 1.x; the lab's own worker reads the same ones), which
  hold the newest batch; a batch is sent once. The trainer is found when training starts (the
  frame that calls the callback) or given with `callback.trainer = trainer`; without it only
  the metrics go;
- at `on_train_end`, the end of the run (succeeded).

It never slows or fails the training: the hooks only put a small dict on a bounded queue and
a background thread sends it. When the lab is away that thread retries the oldest entry with
backoff; entries that find the queue full are dropped and counted in `dropped` (also what is
still unsent when `close_timeout` runs out at the end). An entry the lab refuses (400) is
counted in `rejected` (a log refused for its rollouts is sent again without them); once the run has ended on the lab (cancelled there: 409) nothing more is
sent. Only the main process (`state.is_world_process_zero`) sends.

transformers is imported here, not by `import envlab_client`: the client needs no torch.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback

from envlab_client.client import Client, EnvlabError

log = logging.getLogger(__name__)

# The lab's bounds (webapp/runs/external.py): what goes over them is cut here, not refused there.
MAX_METRICS = 500
MAX_KEY_CHARS = 200
MAX_ROLLOUTS = 256
MAX_CONFIG_BYTES = 60 * 1024
# Answers that mean "the lab is away or busy, try again later".
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def _finite(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Plain JSON: strings for anything else (tensors, dtypes), None for non-finite numbers."""
    if depth > 7:
        return str(value)[:1000]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def metrics_of(logs: Mapping[str, Any]) -> dict[str, float]:
    """Every numeric entry of a log, under the lab's bounds on names and count."""
    out: dict[str, float] = {}
    for key, value in logs.items():
        number = _finite(value)
        name = str(key)
        if number is None or not name or len(name) > MAX_KEY_CHARS or any(ord(ch) < 32 for ch in name):
            continue
        out[name] = number
        if len(out) >= MAX_METRICS:
            break
    return out


def config_of(args: Any) -> dict[str, Any]:
    """The trainer's arguments as a JSON object the lab takes (bounded; `environments` is the lab's)."""
    try:
        raw = args.to_dict() if hasattr(args, "to_dict") else dict(vars(args))
    except Exception:  # arguments that cannot be listed: the run still logs
        return {}
    config = _jsonable({k: v for k, v in raw.items() if k != "environments" and not str(k).startswith("_")})
    if len(json.dumps(config)) > MAX_CONFIG_BYTES:
        config = {k: v for k, v in config.items() if len(json.dumps(v)) <= 1000}
    return config


def grpo_rollouts(trainer: Any) -> list[dict[str, Any]]:
    """The newest generation batch in TRL GRPOTrainer's rolling buffers, as the lab's rollouts."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, Mapping) or "completion" not in logs:
        return []
    completions = list(logs.get("completion") or [])[-MAX_ROLLOUTS:]
    n = len(completions)
    prompts = list(logs.get("prompt") or [])[-n:]
    advantages = list(logs.get("advantages") or [])[-n:]
    reward_logs = logs.get("rewards") or {}
    rewards = {str(name): list(values)[-n:] for name, values in reward_logs.items()}
    try:
        weights = [float(w) for w in trainer.reward_weights.tolist()]
    except Exception:  # no weights to read: every term counts once
        weights = [1.0] * len(rewards)
    rows = []
    for i in range(n):
        per_term = {name: _finite(values[i]) if i < len(values) else None for name, values in rewards.items()}
        scored = [(w, v) for w, v in zip(weights, per_term.values(), strict=False) if v is not None]
        prompt = _jsonable(prompts[i]) if i < len(prompts) else []
        completion = _jsonable(completions[i])
        rows.append({
            # A text prompt as the one user message it stands for (the lab shows chat transcripts).
            "prompt": prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}],
            # A text completion is one assistant message; a conversational one is the transcript.
            "messages": completion if isinstance(completion, list) else [{"role": "assistant", "content": str(completion)}],
            "rewards": per_term,
            "reward": sum(w * v for w, v in scored) if scored else None,
            "advantage": _finite(advantages[i]) if i < len(advantages) else None,
        })
    return rows


def _batch_fingerprint(rows: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


class EnvlabCallback(TrainerCallback):
    """`EnvlabCallback(url, token, run=None, name=...)`: see the module's docstring."""

    def __init__(
        self,
        url: str,
        token: str,
        run: int | None = None,
        *,
        name: str = "",
        tags: list[str] | None = None,
        rollouts: bool = True,
        max_queue: int = 256,
        timeout: float = 10.0,
        max_backoff: float = 30.0,
        close_timeout: float = 10.0,
    ) -> None:
        self.client = Client(url, token, timeout=timeout)
        self.run_id = run
        self.name = name
        self.tags = list(tags or [])
        self.send_rollouts = rollouts
        self.max_backoff = max_backoff
        self.close_timeout = close_timeout
        self.trainer: Any = None
        # Counters: entries lost (queue full, or unsent at the end), refused by the lab, sent.
        self.dropped = 0
        self.rejected = 0
        self.sent = 0
        self.last_error = ""
        # Seconds the training thread spent in this callback's hooks, all together.
        self.hook_seconds = 0.0
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue(maxsize=max(1, max_queue))
        self._config: dict[str, Any] = {}
        self._max_steps = 0
        self._model = ""
        self._last_batch = ""
        self._ended = threading.Event()  # the lab ended the run: send nothing more
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # --- the trainer's hooks: quick, and never raising -------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            if not state.is_world_process_zero:
                return
            self._config = config_of(args)
            self._max_steps = int(state.max_steps or 0)
            model = kwargs.get("model")
            self._model = str(getattr(getattr(model, "config", None), "_name_or_path", "") or "")[:500]
            self.name = self.name or str(getattr(args, "run_name", "") or "") or "trl run"
            if self.trainer is None:
                self.trainer = _calling_trainer(self)
            self._start()
        except Exception:  # telemetry never fails training
            log.exception("envlab: could not start streaming")
        finally:
            self.hook_seconds += time.perf_counter() - started

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            if not state.is_world_process_zero or not logs or self._ended.is_set():
                return
            body: dict[str, Any] = {"step": int(state.global_step), "metrics": metrics_of(logs)}
            rows = grpo_rollouts(self.trainer) if self.send_rollouts and self.trainer is not None else []
            if rows:
                fingerprint = _batch_fingerprint(rows)
                if fingerprint != self._last_batch:
                    self._last_batch = fingerprint
                    body["rollouts"] = rows
            if body["metrics"]:
                self._put("log", body)
        except Exception:  # telemetry never fails training
            log.exception("envlab: a log was not queued")
        finally:
            self.hook_seconds += time.perf_counter() - started

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        # After training: the end of the run may wait for room (up to close_timeout), not be dropped.
        started = time.monotonic()
        self._put("finish", {"status": "succeeded"}, wait=self.close_timeout)
        self.close(max(0.0, self.close_timeout - (time.monotonic() - started)))

    # --- the queue and its sender ------------------------------------------------------------

    def _put(self, kind: str, body: dict[str, Any], *, wait: float = 0.0) -> None:
        try:
            if wait > 0 and self._thread is not None and self._thread.is_alive():
                self._queue.put((kind, body), timeout=wait)
            else:
                self._queue.put_nowait((kind, body))
        except queue.Full:
            with self._lock:
                self.dropped += 1

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._send_forever, name="envlab-callback", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Wait up to `timeout` seconds for what is queued to go; what is left counts as dropped."""
        deadline = time.monotonic() + max(0.0, timeout)
        while self._thread is not None and self._thread.is_alive() and time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                break
            time.sleep(0.05)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()) + 1.0)
        left = self._queue.unfinished_tasks
        with self._lock:
            self.dropped += left

    def _send_forever(self) -> None:
        backoff = 0.5
        item: tuple[str, dict[str, Any]] | None = None
        while not self._stop.is_set():
            if item is None:
                try:
                    item = self._queue.get(timeout=0.2)
                except queue.Empty:
                    continue
            try:
                done = self._send(*item)
            except Exception as exc:  # a bug in the sender must not loop forever on one entry
                log.exception("envlab: entry dropped")
                self.last_error = str(exc)[:500]
                done = True
                with self._lock:
                    self.dropped += 1
            if done:
                self._queue.task_done()
                item = None
                backoff = 0.5
            else:
                self._stop.wait(backoff)
                backoff = min(self.max_backoff, backoff * 2)
        # An entry still unsent is not task_done: close() counts it with the rest.

    def _send(self, kind: str, body: dict[str, Any]) -> bool:
        """Send one entry. True: done with it (sent, refused, or moot); False: retry later."""
        if self._ended.is_set():
            with self._lock:
                self.dropped += 1
            return True
        try:
            if self.run_id is None:
                run = self.client.create_external_run(
                    self.name, config=self._config, tags=self.tags, model=self._model, max_steps=self._max_steps
                )
                self.run_id = int(run["id"])
                log.info("envlab: streaming to run %s", self.run_id)
            if kind == "log":
                self.client.log(self.run_id, body["step"], body["metrics"], body.get("rollouts"))
            else:
                self.client.finish_run(self.run_id, body["status"])
        except EnvlabError as exc:
            self.last_error = str(exc)[:500]
            if exc.status is None or exc.status in RETRY_STATUSES:
                return False
            if exc.status == 409:
                self._ended.set()
            with self._lock:
                self.rejected += 1
            log.warning("envlab: %s refused (%s): %s", kind, exc.status, exc)
            if exc.status == 400 and kind == "log" and body.get("rollouts"):
                # Rollouts over the lab's bounds: the step's metrics still go, next try.
                body.pop("rollouts")
                return False
            return True
        self.sent += 1
        return True


def _calling_trainer(callback: EnvlabCallback) -> Any:
    """The Trainer whose callback handler holds `callback`, from the frames that called it."""
    frame = inspect.currentframe()
    try:
        for _ in range(12):
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            handler = getattr(candidate, "callback_handler", None)
            if handler is not None and callback in getattr(handler, "callbacks", []):
                return candidate
            frame = frame.f_back
        return None
    finally:
        del frame
