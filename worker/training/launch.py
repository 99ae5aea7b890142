"""The launcher of a run's training processes (worker/training/distributed.py explains the whole).

    python -m worker.training.launch --processes N --device cpu|cuda -- python -m worker.training.rank ...

It starts N copies of the command with the variables a process group needs (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE) and watches them: when one exits with an error, it stops the others
(they may be waiting for it in a collective) and exits with that status; when all exit cleanly,
it exits 0. It replaces `accelerate launch`/`torchrun` for one reason (security review N8):
their rendezvous is a TCPStore, which listens on every interface of the worker host whatever
address it is given, and through which (and through the gloo connections it sets up) the
processes trade pickled objects, so anyone who could reach the worker could feed a training
process a pickle. Here the processes meet through a FileStore in a fresh folder only this user
can open (mode 0700, a random name: the run's rendezvous secret), and their gloo connections stay
on the loopback interface. NCCL (GPU runs) is kept on loopback for its bootstrap the same way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

STOP_GRACE_SECONDS = 30.0  # from SIGTERM to SIGKILL for the processes still running after one failed
POLL_SECONDS = 0.2
RENDEZVOUS_VARIABLE = "ENVLAB_RENDEZVOUS_FILE"


def loopback_interface() -> str | None:
    names = {name for _, name in socket.if_nameindex()}
    return next((name for name in ("lo", "lo0") if name in names), None)


def rank_environment(
    base: dict[str, str], *, rank: int, world: int, device: str, rendezvous: str
) -> dict[str, str]:
    """The variables process `rank` of `world` starts with."""
    env = {
        **base,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0",
        RENDEZVOUS_VARIABLE: rendezvous,
        # What `accelerate launch --mixed_precision no --dynamo_backend no` would have set.
        "ACCELERATE_MIXED_PRECISION": "no",
        "ACCELERATE_DYNAMO_BACKEND": "NO",
    }
    # Nothing else of the run listens on a port: a stale MASTER_ADDR/PORT from the worker's
    # environment must not send a process looking for a TCP rendezvous.
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)
    loopback = loopback_interface()
    if loopback:
        # Every process of a run is on this machine; an operator's own choice wins.
        env.setdefault("GLOO_SOCKET_IFNAME", loopback)
        if device == "cuda":
            env.setdefault("NCCL_SOCKET_IFNAME", loopback)
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(world))
    return env


def _stop_all(processes: list[subprocess.Popen[bytes]], grace: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        alive = [p for p in processes if p.poll() is None]
        for process in alive:
            try:
                process.send_signal(sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        if all(p.poll() is not None for p in alive):
            return


def supervise(processes: list[subprocess.Popen[bytes]], *, grace: float = STOP_GRACE_SECONDS) -> int:
    """Wait for the processes; the first error stops the rest and is the result."""
    while True:
        codes = [p.poll() for p in processes]
        failed = next((c for c in codes if c not in (None, 0)), None)
        if failed is not None:
            _stop_all(processes, grace)
            return 128 - failed if failed < 0 else failed  # a signal's death as a shell reports it
        if all(c == 0 for c in codes):
            return 0
        time.sleep(POLL_SECONDS)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m worker.training.launch --processes N --device D -- COMMAND ...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m worker.training.launch")
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if args.processes < 1 or not command:
        parser.error("at least one process and a command")

    folder = tempfile.mkdtemp(prefix="envlab-rendezvous-")  # mode 0700, a name nobody can guess
    rendezvous = os.path.join(folder, "store")
    processes: list[subprocess.Popen[bytes]] = []

    def stop(signum: int, frame: object) -> None:
        # The processes got the same signal when it came to the whole group (the task's stop);
        # when it came to this process only, `finally` passes it on.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        for rank in range(args.processes):
            env = rank_environment(
                dict(os.environ), rank=rank, world=args.processes, device=args.device, rendezvous=rendezvous
            )
            processes.append(subprocess.Popen(command, env=env))
        return supervise(processes)
    finally:
        _stop_all(processes, STOP_GRACE_SECONDS)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
