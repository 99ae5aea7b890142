"""A plain TRL GRPOTrainer script with envlab_client.trl.EnvlabCallback, as a researcher would
write it (no lab code: no Django, no worker), run in its own process by
tests/e2e/test_trl_callback.py.

    python trl_callback_script.py MODEL_DIR LAB_URL TOKEN RUN_ID CONTROL_DIR

The test takes the lab away and brings it back while this trains. A gate callback (before the
envlab one) makes that deterministic: before step 4 it waits until step 3's log left the
callback's queue, writes CONTROL_DIR/down and waits for CONTROL_DIR/down.ok (the lab is
stopped); before step 7 it writes CONTROL_DIR/up and waits for CONTROL_DIR/up.ok (restarted).
The gate's waits are the test's, not the callback's: the callback's own time in the training
thread is `hook_seconds`. Prints one JSON line: the callback's counters and the trainer's logs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from envlab_client.trl import EnvlabCallback
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

STOP_BEFORE = 4
RESTART_BEFORE = 7
MAX_STEPS = 7


def short(completions: list[Any], **kwargs: Any) -> list[float]:
    return [1.0 / (1 + len(str(c))) for c in completions]


def has_digit(completions: list[Any], **kwargs: Any) -> list[float]:
    return [float(any(ch.isdigit() for ch in str(c))) for c in completions]


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test did not answer with {path}")
        time.sleep(0.05)


class Gate(TrainerCallback):
    def __init__(self, envlab: EnvlabCallback, control: Path) -> None:
        self.envlab = envlab
        self.control = control
        self.logs: list[dict[str, Any]] = []
        self.logs_while_down = 0
        self.down = False

    def _drained(self) -> None:
        """While the lab is up, each entry goes before the next is made: the test's counts are exact."""
        deadline = time.monotonic() + 60
        while self.envlab._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == STOP_BEFORE - 1:
            self._drained()
            (self.control / "down").write_text(str(self.envlab.sent))
            _wait_for(self.control / "down.ok")
            self.down = True
        elif state.global_step == RESTART_BEFORE - 1:
            (self.control / "up").write_text(str(self.envlab.dropped))
            _wait_for(self.control / "up.ok")
            self.down = False
            self._drained()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # Called before the envlab callback's on_log (the order of `callbacks`).
        if not self.down:
            self._drained()
        self.logs.append({"step": state.global_step, "keys": sorted(logs or {})})
        self.logs_while_down += int(self.down)


def main() -> None:
    model_dir, url, token, run_id, control_dir = sys.argv[1:6]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    dataset = Dataset.from_list([{"prompt": f"{a}+{a}="} for a in range(16)])
    envlab = EnvlabCallback(url, token, run=int(run_id), max_queue=1, max_backoff=0.5, close_timeout=60)
    gate = Gate(envlab, Path(control_dir))
    args = GRPOConfig(
        output_dir=str(Path(control_dir) / "out"), max_steps=MAX_STEPS, per_device_train_batch_size=4,
        num_generations=2, max_completion_length=6, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=True, learning_rate=1e-4, seed=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=[short, has_digit], args=args, train_dataset=dataset,
        processing_class=tokenizer, callbacks=[gate, envlab],
    )
    started = time.perf_counter()
    trainer.train()
    print(json.dumps({
        "dropped": envlab.dropped, "rejected": envlab.rejected, "sent": envlab.sent,
        "hook_seconds": envlab.hook_seconds, "last_error": envlab.last_error,
        "train_seconds": time.perf_counter() - started, "logs": gate.logs,
        "logs_while_down": gate.logs_while_down, "found_trainer": envlab.trainer is trainer,
    }))


if __name__ == "__main__":
    main()
