"""A vLLM server the worker starts for one run and stops after it (`vllm_mode: "server"`
without a URL), on a GPU of its own.

The command line is TRL's (`trl.scripts.vllm_serve.build_command`): `vllm serve` with the
flags TRL's trainers rely on (NCCL weight transfer, processed logprobs, uncapped logprobs),
with `VLLM_SERVER_DEV_MODE=1` for the weight-transfer endpoints, as `trl vllm-serve` does.
The server is a child process in its own session: stopping it stops everything it forked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from envs.ports import free_port
from webapp.runs.config import GenerationSettings

START_TIMEOUT_SECONDS = 900.0  # loading a large model and capturing CUDA graphs takes minutes


class VLLMServerError(RuntimeError):
    pass


def serve_command(*, model: str, port: int, generation: GenerationSettings) -> list[str]:
    """The `vllm serve` command TRL builds for this model and these settings."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    arguments: dict[str, Any] = {"model": model, "host": "127.0.0.1", "port": port}
    if generation.vllm_gpu_memory_utilization is not None:
        arguments["gpu_memory_utilization"] = generation.vllm_gpu_memory_utilization
    if generation.vllm_tensor_parallel_size is not None:
        arguments["tensor_parallel_size"] = generation.vllm_tensor_parallel_size
    if generation.vllm_max_model_length is not None:
        arguments["max_model_len"] = generation.vllm_max_model_length
    return build_command(ScriptArguments(**arguments))


class ManagedVLLMServer:
    """`with ManagedVLLMServer(...) as url:` runs the server while the block runs.

    `command`: replaces the vLLM command line (tests run a stand-in server: there is no GPU
    on the CI machine). `gpu`: the CUDA device index the server gets to itself.
    """

    def __init__(
        self,
        *,
        model: str,
        generation: GenerationSettings,
        gpu: int,
        log_path: Path,
        port: int | None = None,
        command: list[str] | None = None,
        start_timeout: float = START_TIMEOUT_SECONDS,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = command or serve_command(model=model, port=self.port, generation=generation)
        self.gpu = gpu
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        return {**os.environ, "CUDA_VISIBLE_DEVICES": str(self.gpu), "VLLM_SERVER_DEV_MODE": "1"}

    def __enter__(self) -> str:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise VLLMServerError(
                    f"the vLLM server exited with {self.process.returncode} before it was ready: {self._log_tail()}"
                )
            if self._healthy():
                return self.url
            if time.monotonic() > deadline:
                self.stop()
                raise VLLMServerError(
                    f"the vLLM server was not ready after {self.start_timeout:g} s: {self._log_tail()}"
                )
            time.sleep(1.0)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:  # our own child
                return bool(response.status == 200)
        except OSError:
            return False

    def _log_tail(self, limit: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass
