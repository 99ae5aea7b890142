"""Several training processes (worker/training/distributed.py): the launch command, the config rules,
the counts the processes add up, and the task's watch over processes that die or never
record the end. The end-to-end runs of two real processes are in tests/e2e/test_processes.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from envs.adapters import toolstats
from tests.factories import RunFactory
from tests.support import processes
from webapp.runs.config import RunConfigError, parse_run_config
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import run_claim
from worker.training import distributed, launch
from worker.training.perf import perf_metrics

BASE = {
    "name": "r",
    "model": "demo:echo",
    "environments": [{"environment": 1, "prompt": "Echo 'x'."}],
}


def _config(**extra):
    return parse_run_config({**BASE, **extra})


def _errors(**extra) -> dict[str, list[str]]:
    with pytest.raises(RunConfigError) as caught:
        _config(**extra)
    return caught.value.errors


def test_ranks_default_to_one_per_gpu_on_cuda_and_one_on_cpu():
    assert _config().ranks == 1
    assert _config(device="cuda", gpus=3).ranks == 3
    assert _config(device="cuda", gpus=2, processes=2).ranks == 2
    assert _config(processes=2).ranks == 2


def test_process_counts_that_cannot_run_are_refused_with_the_field():
    assert _errors(device="cuda", gpus=2, processes=1) == {
        "processes": ["on device 'cuda' a run trains one process per GPU: processes must equal gpus (2)"]
    }
    assert _errors(processes=5) == {"processes": ["at most 4 training processes on device 'cpu'"]}
    assert "processes" in _errors(processes=0)


def test_a_harness_run_is_refused_several_processes():
    harness = {
        "device": "cuda", "gpus": 2, "generation": {"backend": "vllm", "vllm_mode": "server"},
        "grpo": {"beta": 0.0}, "harness": {"dataset": "d", "harness": "h"},
    }
    errors = _errors(**harness)
    assert list(errors) == ["gpus"] and "one process on one GPU" in errors["gpus"][0]


def test_cpu_processes_start_through_the_labs_launcher():
    command = distributed.rank_command(
        config=_config(processes=2), run_id=7, lease_owner="lease-x", start_step=3,
        resume_from=Path("/runs/7/checkpoint-3"), model_source=None, vllm_url=None, supervisor_pid=42, python="py",
    )
    assert command == [
        "py", "-m", "worker.training.launch", "--processes", "2", "--device", "cpu", "--",
        "py", "-m", "worker.training.rank",
        "--run-id", "7", "--lease-owner", "lease-x", "--start-step", "3",
        "--resume-from", "/runs/7/checkpoint-3", "--model-source", "", "--vllm-url", "",
        "--supervisor", "42",
    ]


def test_gpu_processes_start_on_the_first_gpus_with_nccl_kept_to_loopback(monkeypatch):
    # A managed vLLM server runs on the GPU after the training ones (worker/training/vllm_server.py).
    config = _config(device="cuda", gpus=2, generation={"backend": "vllm", "vllm_mode": "server"})
    command = distributed.rank_command(
        config=config, run_id=7, lease_owner="l", start_step=0, resume_from=None, model_source="/w",
        vllm_url="http://127.0.0.1:8011", supervisor_pid=42, python="py",
    )
    launcher = command[: command.index("worker.training.rank") + 1]
    assert launcher == [
        "py", "-m", "worker.training.launch", "--processes", "2", "--device", "cuda", "--",
        "py", "-m", "worker.training.rank",
    ]
    args = command[len(launcher):]
    assert args[args.index("--model-source") + 1] == "/w"
    assert args[args.index("--vllm-url") + 1] == "http://127.0.0.1:8011"
    env = launch.rank_environment(
        {"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500", "CUDA_VISIBLE_DEVICES": "3,4,5"},
        rank=1, world=2, device="cuda", rendezvous="/tmp/x/store",
    )
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES")} == {
        "RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0,1",
    }
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "lo"
    assert "MASTER_ADDR" not in env and "MASTER_PORT" not in env  # no TCP rendezvous to look for


def test_the_rank_entry_point_reads_what_the_command_gives():
    from worker.training import rank

    command = distributed.rank_command(
        config=_config(processes=2), run_id=7, lease_owner="l", start_step=4, resume_from=Path("/c"),
        model_source=None, vllm_url=None, supervisor_pid=42,
    )
    args = rank.build_parser().parse_args(command[command.index("worker.training.rank") + 1 :])
    assert (args.run_id, args.lease_owner, args.start_step, args.resume_from, args.model_source, args.supervisor) == (
        7, "l", 4, "/c", "", 42
    )


def test_tool_counts_of_several_processes_add_up_with_a_weighted_latency():
    first, second = toolstats.ToolStats(), toolstats.ToolStats()
    for stats in (first, second):
        stats.start(tool_names=["echo"])
    first.record("echo", 1.0, None)
    first.record("echo", 3.0, "tool_error")
    second.record("echo", 2.0, None)
    second.record("other", None, None)
    merged = toolstats.merge_counts([first.take(), second.take(), None])
    values = toolstats.counts_metrics(merged)
    assert values["tools/echo/call_total"] == 3
    assert values["tools/echo/failure_total"] == 1
    assert values["tools/echo/latency_s"] == pytest.approx(2.0)  # (1 + 3 + 2) / 3, not the mean of means
    assert values["tools/other/call_total"] == 1
    assert "tools/other/latency_s" not in values
    # Counting starts afresh after a take, and one process alone reads as before.
    first.record("echo", 5.0, None)
    assert first.drain()["tools/echo/latency_s"] == 5.0
    assert toolstats.merge_counts([None, None]) is None and toolstats.counts_metrics(None) == {}


def test_throughput_of_several_processes_is_their_sum_and_memory_the_fullest_gpu():
    parts = [
        {"tokens": 100, "seconds": 2.0, "gpu_memory_gib": 3.5},
        {"tokens": 300, "seconds": 3.0, "gpu_memory_gib": 5.0},
        {"tokens": 0, "seconds": 0.0, "gpu_memory_gib": None},
    ]
    assert perf_metrics(parts) == {"perf/generated_tokens_per_s": 150.0, "perf/gpu_memory_gib": 5.0}
    assert perf_metrics([{"tokens": 0, "seconds": 0.0, "gpu_memory_gib": None}]) == {}


def test_where_the_time_went_is_the_slowest_process_and_every_tool_call_summed():
    from worker.training.perf import PerfMeter, tool_seconds

    parts = [
        {"tokens": 100, "seconds": 2.0, "step_seconds": 3.5, "gpu_memory_gib": None},
        {"tokens": 300, "seconds": 2.5, "step_seconds": 3.0, "gpu_memory_gib": None},
    ]
    assert perf_metrics(parts) == {
        "perf/generated_tokens_per_s": 170.0, "perf/step_s": 3.5, "perf/generation_s": 2.5,
    }
    # A step that reused its generation batch: timed, with no generation in it.
    assert perf_metrics([{"tokens": 0, "seconds": 0.0, "step_seconds": 0.5, "gpu_memory_gib": None}]) == {
        "perf/step_s": 0.5, "perf/generation_s": 0.0,
    }
    first, second = toolstats.ToolStats(), toolstats.ToolStats()
    for stats in (first, second):
        stats.start(tool_names=["echo"])
    first.record("echo", 0.25, None)
    first.record("echo", 0.5, None)
    second.record("echo", 1.0, "tool_error")
    assert tool_seconds(toolstats.merge_counts([first.take(), second.take()])) == {"perf/tool_s": 1.75}
    assert tool_seconds(None) == {}
    meter = PerfMeter()
    meter.generation(seconds=1.0, tokens=10)
    meter.step(seconds=1.5)
    assert meter.take() == {"tokens": 10, "seconds": 1.0, "step_seconds": 1.5, "gpu_memory_gib": None}
    assert meter.take()["step_seconds"] is None  # taken once


def test_a_single_process_group_passes_values_through():
    group = distributed.RankGroup(rank=0, world=1)
    assert group.lead and group.agree("cancelled") == "cancelled" and group.gather([1, 2]) == [1, 2]



_PEER_DIES = """
import os, sys, torch.distributed as dist
from accelerate.utils import broadcast_object_list
from worker.training.distributed import peer_lost
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=rank, world_size=2)
if rank == 1:
    os._exit(9)  # dies as a killed process does: no goodbye to the group
try:
    for _ in range(50):
        broadcast_object_list([["facts"]], from_process=0)
        dist.barrier()
except Exception as exc:
    print("lost" if peer_lost(exc) else "other", type(exc).__name__, exc)
else:
    print("no error")
"""


def test_a_collective_with_a_dead_process_is_told_apart_from_an_ordinary_error():
    """Two real gloo processes; one dies: what the other's collective raises is a lost peer,
    so the first process leaves the record to the task, which has the processes' log."""
    import subprocess

    from tests.support.ports import free_port

    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    procs = [
        subprocess.Popen([sys.executable, "-c", _PEER_DIES, str(r), port], stdout=subprocess.PIPE, text=True, env=env)
        for r in (0, 1)
    ]
    out, _ = procs[0].communicate(timeout=120)
    procs[1].wait(timeout=30)
    assert out.startswith("lost "), out
    assert not distributed.peer_lost(RuntimeError("CUDA error: an illegal memory access"))
    assert not distributed.peer_lost(ValueError("Connection reset by peer"))

@pytest.fixture
def claimed_run(owner, settings, tmp_path):
    settings.ENVLAB_HEARTBEAT_SECONDS = 0.2
    config = {**BASE, "processes": 2}
    run = RunFactory(owner=owner, name="r", config=config, max_steps=10)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="w")
    return Run.objects.get(pk=run.pk)


def _supervise_with(monkeypatch, run, tmp_path, script: str) -> str:
    """The task's watch over a launcher that is a real process running `script`."""
    monkeypatch.setattr(distributed, "rank_command", lambda **kw: [sys.executable, "-c", script])
    monkeypatch.setenv("DATABASE_URL", processes.test_database_url())  # the processes read the test database
    return distributed.run_ranks(
        run=run, config=parse_run_config(run.config), lease_owner="lease-a", output_dir=tmp_path, start_step=0,
        resume_from=None, model_source=None,
    )


@pytest.mark.django_db(transaction=True)
def test_processes_that_exit_without_recording_the_end_fail_the_run_with_their_log(
    claimed_run, monkeypatch, tmp_path
):
    script = "import sys; print('rank 1: CUDA error: an illegal memory access'); sys.exit(3)"
    assert _supervise_with(monkeypatch, claimed_run, tmp_path, script) == Run.Status.FAILED
    run = Run.objects.get(pk=claimed_run.pk)
    assert run.status == Run.Status.FAILED and run.lease_owner == ""
    assert run.error.startswith("the training processes exited (code 3) before recording the run's end")
    assert "rank 1: CUDA error: an illegal memory access" in run.error
    assert RunEvent.objects.filter(run=run, kind="failed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_task_keeps_the_lease_alive_while_the_processes_start(claimed_run, monkeypatch, tmp_path, settings):
    settings.ENVLAB_STALE_SECONDS = 1.0
    before = claimed_run.heartbeat_at
    # Starting takes longer than the stale limit; then rank 0 records the end, as it does.
    script = (
        "import time, os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'webapp.settings.test'); "
        "time.sleep(1.5); django.setup(); from webapp.runs.services import run_finish; "
        f"run_finish(run_id={claimed_run.pk}, lease_owner='lease-a', status='succeeded')"
    )
    assert _supervise_with(monkeypatch, claimed_run, tmp_path, script) == Run.Status.SUCCEEDED
    run = Run.objects.get(pk=claimed_run.pk)
    assert run.status == Run.Status.SUCCEEDED and run.heartbeat_at > before


@pytest.mark.django_db(transaction=True)
def test_processes_that_do_not_stop_after_a_cancel_are_stopped_and_the_run_cancelled(
    claimed_run, monkeypatch, tmp_path, settings
):
    settings.ENVLAB_CANCEL_GRACE_SECONDS = 0.5
    Run.objects.filter(pk=claimed_run.pk).update(cancel_requested=True)
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    assert _supervise_with(monkeypatch, claimed_run, tmp_path, script) == Run.Status.CANCELLED
    run = Run.objects.get(pk=claimed_run.pk)
    assert run.status == Run.Status.CANCELLED and "did not stop at a step end" in run.error
    assert not distributed.supervisor_alive(int(pid_file.read_text()))


_IGNORES_SIGTERM = """
import signal, sys, time
sys.path.insert(0, sys.argv[2])
from worker.training.distributed import watch_supervisor
signal.signal(signal.SIGTERM, lambda *_: print("sigterm: ignored", flush=True))
watch_supervisor(int(sys.argv[1]), every=0.1, grace=1.0)
time.sleep(60)
"""


def test_a_training_process_whose_task_died_stops_even_if_it_ignores_sigterm():
    """The task's process is killed and left a zombie (its Celery parent has not reaped it yet):
    the training process sees it gone, sends itself SIGTERM, and SIGKILL after the grace."""
    import signal
    import subprocess
    import time

    task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(task.pid, signal.SIGKILL)
    time.sleep(0.3)  # not reaped: a zombie, as a killed pool child is until its parent waits
    assert open(f"/proc/{task.pid}/stat").read().split()[2] == "Z"
    assert not distributed.supervisor_alive(task.pid)

    started = time.monotonic()
    training = subprocess.Popen(
        [sys.executable, "-c", _IGNORES_SIGTERM, str(task.pid), str(Path(__file__).resolve().parents[3])],
        stdout=subprocess.PIPE, text=True,
    )
    out, _ = training.communicate(timeout=60)
    assert training.returncode == -signal.SIGKILL
    assert "sigterm: ignored" in out
    assert time.monotonic() - started < 30
    task.wait()
    assert distributed.supervisor_alive(os.getpid())


def test_a_cpu_runs_gloo_keeps_to_loopback_unless_the_operator_chose() -> None:
    # Security review N8: all of a run's processes are on this machine.
    env = launch.rank_environment({}, rank=0, world=2, device="cpu", rendezvous="/tmp/x/store")
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and "NCCL_SOCKET_IFNAME" not in env
    assert "CUDA_VISIBLE_DEVICES" not in env
    env = launch.rank_environment({"GLOO_SOCKET_IFNAME": "eth9"}, rank=0, world=2, device="cpu", rendezvous="/s")
    assert env["GLOO_SOCKET_IFNAME"] == "eth9"


_JOINS = """
import json, os, stat, sys, time
import psutil, torch.distributed as dist
from accelerate import PartialState
from accelerate.utils import broadcast_object_list, gather_object
from worker.training.distributed import join_group
join_group()
state = PartialState(cpu=True)  # as TRL's Accelerator does: it takes the group that exists
rank = dist.get_rank()
assert (state.num_processes, state.process_index) == (2, rank)
box = [{"secret": "from rank 0"} if rank == 0 else None]
broadcast_object_list(box, from_process=0)
gathered = gather_object([rank * 10])
dist.barrier()
# Every socket the process listens on, while the group is up (gloo's pairs are connected).
listening = sorted({c.laddr.ip for c in psutil.Process().net_connections(kind="inet") if c.status == "LISTEN"})
folder = os.path.dirname(os.environ["ENVLAB_RENDEZVOUS_FILE"])
mode = stat.S_IMODE(os.stat(folder).st_mode)
# One write per line (unbuffered, print writes the text and its newline apart, and the two
# processes' lines ran together).
sys.stdout.write(json.dumps({"rank": rank, "box": box[0], "gathered": gathered, "listening": listening,
                             "folder": folder, "mode": oct(mode), "master": os.environ.get("MASTER_ADDR")}) + "\\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
"""


def test_the_processes_meet_through_a_private_file_and_listen_on_loopback_only(tmp_path):
    """Security review N8: two real processes started by the launcher join one gloo group with no
    TCP rendezvous store; nothing they open listens beyond loopback, the rendezvous folder is
    the user's alone (0700), and the launcher removes it. (torch's TCPStore, which `accelerate
    launch` used, listens on 0.0.0.0 / :: whatever address it is given.)"""
    import json
    import subprocess

    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("GLOO_SOCKET_IFNAME", None)
    done = subprocess.run(
        [sys.executable, "-m", "worker.training.launch", "--processes", "2", "--device", "cpu", "--",
         sys.executable, "-c", _JOINS],
        capture_output=True, text=True, env=env, cwd=root, timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reports = sorted((json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["box"] == {"secret": "from rank 0"} and r["gathered"] == [0, 10] for r in reports)
    assert all(r["master"] is None for r in reports)
    assert all(set(r["listening"]) <= {"127.0.0.1", "::1"} for r in reports), reports
    assert {r["mode"] for r in reports} == {"0o700"} and reports[0]["folder"] == reports[1]["folder"]
    assert not Path(reports[0]["folder"]).exists()


def test_the_launcher_stops_the_others_when_one_process_fails_and_exits_with_its_status():
    import subprocess
    import time

    root = str(Path(__file__).resolve().parents[3])
    script = "import os, sys, time; sys.exit(5) if os.environ['RANK'] == '1' else time.sleep(120)"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "worker.training.launch", "--processes", "2", "--device", "cpu", "--",
         sys.executable, "-c", script],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root}, cwd=root, timeout=120,
    )
    assert done.returncode == 5, done.stderr
    assert time.monotonic() - started < 30  # rank 0 was stopped, not waited for


def test_every_process_samples_itself_and_the_first_records_the_others_under_their_rank():
    """Issue 22: a sampler in every training process. The second process's newest sample travels
    to the first in the step's gathered counts (a stand-in group answers the gather as two
    processes would) and is recorded as system/rank1/*; the first's own samples go to its sink."""
    from worker.training.runner import TelemetryCallback
    from worker.training.system_metrics import LatestSample, rank_metrics

    second = {"system/cpu_percent": 97.0, "system/rss_gib": 1.5, "system/process_threads": 12.0}

    class TwoProcesses(distributed.RankGroup):
        def gather(self, items):
            return [*items, (None, {}, second)]

    held = LatestSample()
    callback = TelemetryCallback(None, group=TwoProcesses(rank=0, world=2), system=held)
    logs = callback._with_tool_metrics(1, {"loss": 0.5})
    assert {k: v for k, v in logs.items() if k.startswith("system/")} == {
        "system/rank1/cpu_percent": 97.0, "system/rank1/rss_gib": 1.5, "system/rank1/process_threads": 12.0,
    }
    # A process's sample is taken once: the next step has only what was sampled since.
    held.put({"system/cpu_percent": 3.0})
    assert held.take() == {"system/cpu_percent": 3.0} and held.take() is None
    assert rank_metrics(3, {"system/gpu0/util_percent": 1.0}) == {"system/rank3/gpu0/util_percent": 1.0}
