"""envlab_client.trl's pieces without a trainer: what a log and a GRPO batch become, and the
sender's promise when the lab is away (the hooks return at once; everything unsent is counted).
A plain GRPOTrainer streaming into a live lab is tests/e2e/test_trl_callback.py."""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, ClassVar

from envlab_client.trl import EnvlabCallback, config_of, grpo_rollouts, metrics_of

from tests.support.ports import free_port


def test_a_log_keeps_every_finite_number_under_the_labs_bounds():
    logs = {
        "loss": 0.5, "epoch": 1, "flag": True, "name": "x", "nan": math.nan, "inf": math.inf,
        "k" * 201: 1.0, "ctrl\x01": 1.0, "rewards/short/mean": 0.25,
    }

    assert metrics_of(logs) == {"loss": 0.5, "epoch": 1.0, "flag": 1.0, "rewards/short/mean": 0.25}


def test_the_config_is_plain_json_without_the_labs_own_keys():
    args = SimpleNamespace(to_dict=lambda: {
        "learning_rate": 1e-5, "max_grad_norm": math.inf, "environments": [1], "dtype": object, "_private": 1,
    })

    config = config_of(args)

    assert config["learning_rate"] == 1e-5
    assert config["max_grad_norm"] is None
    assert "environments" not in config and "_private" not in config
    assert config["dtype"].startswith("<class")


class _Weights:
    def tolist(self):
        return [1.0, 0.5]


def test_a_grpo_batch_becomes_rollouts_with_per_term_rewards():
    trainer = SimpleNamespace(
        reward_weights=_Weights(),
        _logs={
            "prompt": deque(["old", "1+1=", [{"role": "user", "content": "hi"}]], maxlen=3),
            "completion": deque(["x", "2", [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}]], maxlen=3),
            "rewards": {"short": deque([0.0, 0.5, 1.0]), "digit": deque([0.0, 1.0, math.nan])},
            "advantages": deque([0.0, 0.25, -0.25]),
        },
    )

    rows = grpo_rollouts(trainer)

    assert rows[1:] == [
        {
            "prompt": [{"role": "user", "content": "1+1="}],
            "messages": [{"role": "assistant", "content": "2"}],
            "rewards": {"short": 0.5, "digit": 1.0}, "reward": 1.0, "advantage": 0.25,
        },
        {
            "prompt": [{"role": "user", "content": "hi"}],
            "messages": [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}]}],
            "rewards": {"short": 1.0, "digit": None}, "reward": 1.0, "advantage": -0.25,
        },
    ]
    assert grpo_rollouts(SimpleNamespace()) == []


def test_with_the_lab_away_the_hooks_return_at_once_and_count_what_was_lost():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    callback = EnvlabCallback(url, "token", name="away", max_queue=4, max_backoff=0.1)
    state = SimpleNamespace(is_world_process_zero=True, max_steps=50, global_step=0)
    args = SimpleNamespace(to_dict=lambda: {"learning_rate": 1e-5}, run_name="")

    callback.on_train_begin(args, state, None)
    for step in range(1, 51):
        state.global_step = step
        callback.on_log(args, state, None, logs={"loss": 1.0 / step})
    during = callback.dropped
    callback.close(0.3)

    assert callback.hook_seconds < 0.5
    assert 45 <= during <= 46  # the queue holds 4, the sender one more while it retries
    assert (callback.dropped, callback.sent, callback.rejected, callback.run_id) == (50, 0, 0, None)
    assert callback.last_error.startswith(f"cannot reach the lab at {url}/")


def test_only_the_main_process_sends():
    callback = EnvlabCallback("http://127.0.0.1:1", "token")
    state = SimpleNamespace(is_world_process_zero=False, max_steps=1, global_step=1)

    callback.on_train_begin(SimpleNamespace(), state, None)
    callback.on_log(SimpleNamespace(), state, None, logs={"loss": 1.0})

    assert (callback._thread, callback._queue.qsize(), callback.dropped) == (None, 0, 0)


class _Lab(BaseHTTPRequestHandler):
    """Answers logs as the lab would one whose rollouts are over its bounds."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        status, answer = (400, {"rollouts": ["rollout 0: too big"]}) if "rollouts" in body else (200, {"seq": 1})
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_log_refused_for_its_rollouts_still_sends_its_metrics():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Lab)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        callback = EnvlabCallback(f"http://127.0.0.1:{server.server_port}", "token", run=7, max_backoff=0.05)
        callback._start()
        callback._put("log", {"step": 1, "metrics": {"loss": 0.5}, "rollouts": [{"messages": []}]})
        callback.close(5)
    finally:
        server.shutdown()

    assert _Lab.bodies == [
        {"step": 1, "metrics": {"loss": 0.5}, "rollouts": [{"messages": []}]},
        {"step": 1, "metrics": {"loss": 0.5}},
    ]
    assert (callback.sent, callback.rejected, callback.dropped) == (1, 1, 0)
