"""The managed vLLM server: TRL's command line, and the process lifecycle. vLLM and a GPU do
not exist here: the lifecycle tests run a stand-in HTTP server in vLLM's place (fake, said so)."""

from __future__ import annotations

import json
import sys
import urllib.request

import pytest

from webapp.runs.config import GenerationSettings
from worker.training.vllm_server import ManagedVLLMServer, VLLMServerError, serve_command


def test_the_command_is_trls_vllm_serve_with_the_runs_settings():
    generation = GenerationSettings(
        backend="vllm", vllm_mode="server", vllm_gpu_memory_utilization=0.5, vllm_tensor_parallel_size=2,
        vllm_max_model_length=4096,
    )
    command = serve_command(model="Qwen/Qwen3-0.6B", port=8123, generation=generation)
    assert command[:5] == [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "Qwen/Qwen3-0.6B"]
    pairs = dict(zip(command[5::2], command[6::2], strict=False))
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert pairs["--gpu-memory-utilization"] == "0.5" and pairs["--tensor-parallel-size"] == "2"
    assert "--max-model-len" in command and command[command.index("--max-model-len") + 1] == "4096"
    # The flags TRL's trainers rely on: weight transfer over NCCL, processed logprobs, no logprob cap.
    tail = command[command.index("--weight-transfer-config"):]
    assert tail == [
        "--weight-transfer-config", json.dumps({"backend": "nccl"}), "--logprobs-mode", "processed_logprobs",
        "--max-logprobs", "-1",
    ]


# Fake vLLM: an HTTP server answering /health, as `vllm serve` does once it is ready.
STAND_IN = """
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404); self.end_headers()
        self.wfile.write(os.environ.get("CUDA_VISIBLE_DEVICES", "").encode() + b"|" + os.environ.get("VLLM_SERVER_DEV_MODE", "").encode())
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_the_server_runs_on_its_own_gpu_while_the_block_runs_and_stops_after(tmp_path):
    server = ManagedVLLMServer(
        model="m", generation=GenerationSettings(backend="vllm", vllm_mode="server"), gpu=3,
        log_path=tmp_path / "vllm.log", command=None, start_timeout=30,
    )
    server.command = [sys.executable, "-c", STAND_IN, str(server.port)]
    with server as url:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            assert response.read() == b"3|1"
        process = server.process
        assert process is not None and process.poll() is None
    assert process.poll() is not None and server.process is None


def _server_running(tmp_path, code: str, start_timeout: float) -> ManagedVLLMServer:
    """A managed server on GPU 0 whose process runs the Python ``code`` in vLLM's place."""
    return ManagedVLLMServer(
        model="m", generation=GenerationSettings(backend="vllm", vllm_mode="server"), gpu=0,
        log_path=tmp_path / "vllm.log", command=[sys.executable, "-c", code], start_timeout=start_timeout,
    )


def test_a_server_that_dies_at_start_says_why(tmp_path):
    server = _server_running(tmp_path, "print('CUDA out of memory'); raise SystemExit(3)", start_timeout=30)
    with pytest.raises(VLLMServerError) as caught:
        server.__enter__()
    assert str(caught.value) == "the vLLM server exited with 3 before it was ready: CUDA out of memory"


def test_a_server_never_ready_is_stopped_at_the_deadline(tmp_path):
    server = _server_running(tmp_path, "import time; print('loading'); time.sleep(60)", start_timeout=2)
    with pytest.raises(VLLMServerError) as caught:
        server.__enter__()
    assert "not ready after 2 s" in str(caught.value)
    assert server.process is None
