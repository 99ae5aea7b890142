"""The bundled environment servers: local processes this installation starts, watches and stops.

Each server is a uvicorn process started in its own session (so a Ctrl-C in the terminal,
or the death of the web or worker process that started it, does not take it down) with
its output appended to `<VAR_DIR>/log/envs/<key>.log`. A `BundledServer` row records what
the user wants (`desired`) and what was last seen (`status`, `pid`, `port`); the
supervisor (`bundled_supervise`, a Celery beat task every few seconds) restarts a server
that should run and whose process is gone, on the same port, so catalog URLs stay valid.

Contracts:
- Starting is claimed with a conditional UPDATE (status -> starting), so two callers (the
  page, the supervisor, `envlab_setup`) never start the same server twice.
- No network call and no wait happens inside a transaction: rows are updated in short
  writes before and after the process is started and its `/health` is polled.
- A pid alone proves nothing (pids are reused): a process is ours only while
  `/proc/<pid>/cmdline` still names the server's module.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from envs.ports import free_port
from envs.registry import BUNDLED, HOST, BundledSpec, uvicorn_command
from webapp.catalog.models import BundledServer, Environment
from webapp.catalog.names import BUNDLED_SUFFIX, own_names_taken
from webapp.catalog.probe import ProbeError, ors_environments
from webapp.catalog.services import environment_probe, environment_register

MAX_CAPACITY = 100_000
# A failed server is retried by the supervisor no more often than this (a module that is
# missing or broken would otherwise be relaunched every beat).
FAILED_RETRY_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0
LOG_TAIL_CHARS = 1500
START_HEADER = "--- envlab starting at "
ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class BundledError(Exception):
    """A bundled-server request was refused; the message says what to change."""


# The table of bundled servers (and their adapters) is envs.registry', the one
# registry; this module runs their processes.
_uvicorn = uvicorn_command

def bundled_spec(key: str) -> BundledSpec:
    try:
        return BUNDLED[key]
    except KeyError:
        raise BundledError(
            f"no bundled server named '{key}'; choose one of {', '.join(BUNDLED)}"
        ) from None


def bundled_log_dir() -> Path:
    return Path(settings.VAR_DIR) / "log" / "envs"


def bundled_overview() -> list[tuple[BundledSpec, BundledServer | None]]:
    """Every bundled server with its row (None when it was never started), in registry order."""
    rows = {row.key: row for row in BundledServer.objects.filter(key__in=list(BUNDLED))}
    return [(spec, rows.get(key)) for key, spec in BUNDLED.items()]


# --- processes --------------------------------------------------------------------------------

# Popen objects of the servers this process started: polling them reaps an exited child
# (an unreaped child is a zombie, which still answers os.kill(pid, 0)).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            _CHILDREN.pop(pid, None)
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its own parent (or init) reaps it


def process_is_ours(pid: int | None, spec: BundledSpec) -> bool:
    """Whether `pid` is alive and still the server `spec` describes (pids get reused)."""
    if not pid:
        return False
    _reap(pid)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False  # gone, or another user's process: not one we started
    if not Path("/proc/self/cmdline").exists():  # pragma: no cover - no procfs (macOS)
        return True
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # A zombie's cmdline is empty, so an exited but unreaped server counts as gone.
    return spec.marker.encode() in args


def _terminate(pid: int, spec: BundledSpec, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM the server's process group, then SIGKILL it if it outlives `grace` seconds."""
    if not process_is_ours(pid, spec):
        return
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        return

    # Started with start_new_session, the server leads its own group; anything else gets
    # only its own signal (never signal a group we did not create).
    def send(sig: int) -> None:
        try:
            if group == pid:
                os.killpg(group, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    send(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while process_is_ours(pid, spec) and time.monotonic() < deadline:
        time.sleep(0.1)
    if process_is_ours(pid, spec):
        send(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while process_is_ours(pid, spec) and time.monotonic() < deadline:
            time.sleep(0.05)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _healthy(port: int, timeout: float = 1.0) -> bool:
    """`GET /health` answers 200 with status healthy/ok (OpenEnv and ORS servers alike)."""
    with requests.Session() as session:
        session.trust_env = False  # never through a proxy: the server is on loopback
        try:
            response = session.get(f"http://{HOST}:{port}/health", timeout=timeout)
            body = response.json()
        except (requests.RequestException, ValueError):
            return False
    return (
        response.status_code == 200
        and isinstance(body, dict)
        and (str(body.get("status", "")).lower() in ("healthy", "ok"))
    )


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - LOG_TAIL_CHARS))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    header = text.rfind(START_HEADER)
    if header >= 0:  # only what the latest start wrote, without its header line
        text = text[header:].partition("\n")[2]
    return ANSI_ESCAPE_RE.sub("", text).strip()  # coloured log lines (the ORS SDK's)


def _start_timeout(wait: float | None) -> float:
    return float(
        wait if wait is not None else getattr(settings, "ENVLAB_BUNDLED_START_TIMEOUT", 30.0)
    )


# --- rows -------------------------------------------------------------------------------------


def _stale_start_cutoff() -> datetime:
    """A start claimed before this was abandoned (its process died mid-start): retake it."""
    return timezone.now() - timedelta(seconds=_start_timeout(None) + 60)


def _update(pk: int, **fields: object) -> int:
    with transaction.atomic():
        return BundledServer.objects.filter(pk=pk).update(updated_at=timezone.now(), **fields)


def _claim_start(
    *,
    spec: BundledSpec,
    port: int,
    capacity: int,
    restart_of_pid: int | None = None,
    restart: bool = False,
) -> BundledServer | None:
    """Mark the server starting unless someone else is starting it; None when they are.

    A restart also requires that the row still names the dead process it saw and that the
    server is still wanted, so a stop or a concurrent restart in between wins.
    """
    now = timezone.now()
    stale = _stale_start_cutoff()
    log_path = str(bundled_log_dir() / f"{spec.key}.log")
    with transaction.atomic():
        BundledServer.objects.get_or_create(
            key=spec.key, defaults={"port": port, "capacity": capacity}
        )
        rows = BundledServer.objects.filter(key=spec.key).filter(
            ~Q(status=BundledServer.Status.STARTING) | Q(updated_at__lt=stale) | Q(updated_at=None)
        )
        if restart:
            rows = rows.filter(desired=BundledServer.Desired.RUNNING, pid=restart_of_pid)
        changed = rows.update(
            status=BundledServer.Status.STARTING,
            desired=BundledServer.Desired.RUNNING,
            port=port,
            capacity=capacity,
            pid=None,
            log_path=log_path,
            updated_at=now,
            restarts=F("restarts") + (1 if restart else 0),
        )
    return BundledServer.objects.get(key=spec.key) if changed else None


# What a bundled server inherits from the web or worker process: enough to find Python and
# its libraries, nothing else. The secrets of those processes (SECRET_KEY, DATABASE_URL,
# keys and tokens) never reach an environment server.
SERVER_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "VIRTUAL_ENV", "OPENBLAS_CORETYPE",
                   "OPENBLAS_L2_SIZE", "OMP_NUM_THREADS")


def server_environment() -> dict[str, str]:
    return {key: os.environ[key] for key in SERVER_ENV_KEEP if key in os.environ}


def _launch(server: BundledServer, spec: BundledSpec, wait: float | None) -> BundledServer:
    """Start the claimed server's process and wait for its /health; record the outcome."""
    port, capacity = int(server.port or 0), int(server.capacity or spec.default_capacity)
    log_path = Path(server.log_path)
    command = spec.command(port)
    root = str(settings.BASE_DIR)
    env = {
        **server_environment(),
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
        "MAX_CONCURRENT_ENVS": str(capacity),
        "HF_HUB_OFFLINE": "1",
        "OPENREWARD_DISABLE_UPDATE_CHECK": "1",
        "ENABLE_WEB_INTERFACE": "false",
        "PYTHONUNBUFFERED": "1",
    }
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            log.write(
                f"\n{START_HEADER}{timezone.now():%Y-%m-%d %H:%M:%S} {' '.join(command)} "
                f"(MAX_CONCURRENT_ENVS={capacity})\n".encode()
            )
            log.flush()
            process = subprocess.Popen(  # a fixed command from the registry
                command,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        _update(
            server.pk,
            status=BundledServer.Status.FAILED,
            pid=None,
            last_error=f"could not start {spec.key}: {exc}",
        )
        return BundledServer.objects.get(pk=server.pk)
    _CHILDREN[process.pid] = process
    _update(server.pk, pid=process.pid)

    timeout = _start_timeout(wait)
    deadline = time.monotonic() + timeout
    error = ""
    while not error:
        code = process.poll()
        if code is not None:
            error = f"exited with code {code} before answering /health"
        elif _healthy(port):
            break
        elif time.monotonic() > deadline:
            error = f"did not answer /health on port {port} within {timeout:g} s"
        else:
            time.sleep(0.2)
    if error:
        _terminate(process.pid, spec, grace=2.0)
        tail = _log_tail(log_path)
        _update(
            server.pk,
            status=BundledServer.Status.FAILED,
            pid=None,
            last_error=f"{spec.key} {error}; see {log_path}" + (f"\n{tail}" if tail else ""),
        )
        return BundledServer.objects.get(pk=server.pk)
    with transaction.atomic():
        running = BundledServer.objects.filter(
            pk=server.pk, pid=process.pid, desired=BundledServer.Desired.RUNNING
        ).update(
            status=BundledServer.Status.RUNNING,
            started_at=timezone.now(),
            last_error="",
            updated_at=timezone.now(),
        )
    if not running:  # stopped while it was starting: the stop wins
        _terminate(process.pid, spec)
        _update(server.pk, status=BundledServer.Status.STOPPED, pid=None)
    return BundledServer.objects.get(pk=server.pk)


# --- services ---------------------------------------------------------------------------------


def bundled_start(
    *, key: str, port: int | None = None, capacity: int | None = None, wait: float | None = None
) -> BundledServer:
    """Start (or adopt, when it already runs healthy as asked) the bundled server `key`.

    `port` None: the recorded port when it is free, else a free one. `capacity` None: the
    recorded capacity, else the registry default. A server that fails to start is returned
    with status failed and `last_error` saying why (and where its log is); the supervisor
    retries it. BundledError only for a request that cannot be carried out as given.
    """
    spec = bundled_spec(key)
    if capacity is not None and not (1 <= capacity <= MAX_CAPACITY):
        raise BundledError(f"capacity must be between 1 and {MAX_CAPACITY}")
    if port is not None and not (1024 <= port <= 65535):
        raise BundledError("port must be between 1024 and 65535")
    server = BundledServer.objects.filter(key=key).first()
    if server is not None and process_is_ours(server.pid, spec):
        asked_as_running = port in (None, server.port) and capacity in (None, server.capacity)
        if asked_as_running and server.port and _healthy(server.port):
            _update(
                server.pk,
                desired=BundledServer.Desired.RUNNING,
                status=BundledServer.Status.RUNNING,
            )
            return BundledServer.objects.get(pk=server.pk)
        _terminate(int(server.pid or 0), spec)
    capacity = capacity or (
        server.capacity if server and server.capacity else spec.default_capacity
    )
    if port is None:
        port = server.port if server and server.port and port_is_free(server.port) else free_port()
    elif not port_is_free(port):
        raise BundledError(f"port {port} is in use on {HOST}; choose another or leave it empty")
    claimed = _claim_start(spec=spec, port=port, capacity=capacity)
    if claimed is None:
        raise BundledError(f"'{key}' is being started right now; wait a moment and reload")
    return _launch(claimed, spec, wait)


def bundled_stop(*, key: str, grace: float = STOP_GRACE_SECONDS) -> BundledServer:
    """Stop the server and keep it stopped (the supervisor leaves it alone)."""
    spec = bundled_spec(key)
    with transaction.atomic():
        server, _ = BundledServer.objects.get_or_create(key=key)
        BundledServer.objects.filter(pk=server.pk).update(
            desired=BundledServer.Desired.STOPPED, updated_at=timezone.now()
        )
    server.refresh_from_db()
    if server.pid:
        _terminate(server.pid, spec, grace=grace)
    _update(server.pk, status=BundledServer.Status.STOPPED, pid=None)
    return BundledServer.objects.get(pk=server.pk)


def bundled_supervise() -> list[str]:
    """Restart every server that should run and whose process is gone; say what was done.

    Safe to run concurrently with itself and with start/stop: each restart is claimed.
    """
    actions: list[str] = []
    now = timezone.now()
    stale = _stale_start_cutoff()
    for server in list(BundledServer.objects.filter(desired=BundledServer.Desired.RUNNING)):
        spec = BUNDLED.get(server.key)
        if spec is None:
            continue
        if (
            server.status == BundledServer.Status.STARTING
            and server.updated_at
            and server.updated_at >= stale
        ):
            continue  # someone is starting it now
        if process_is_ours(server.pid, spec):
            continue
        if (
            server.status == BundledServer.Status.FAILED
            and server.updated_at
            and (now - server.updated_at < timedelta(seconds=FAILED_RETRY_SECONDS))
        ):
            continue
        port = server.port or free_port()
        claimed = _claim_start(
            spec=spec,
            port=port,
            capacity=server.capacity or spec.default_capacity,
            restart_of_pid=server.pid,
            restart=True,
        )
        if claimed is None:
            continue  # someone else restarted or stopped it meanwhile
        result = _launch(claimed, spec, None)
        if result.status == BundledServer.Status.RUNNING:
            actions.append(
                f"{spec.key}: restarted on port {result.port} (restart {result.restarts})"
            )
        else:
            actions.append(f"{spec.key}: restart failed: {result.last_error.splitlines()[0]}")
    return actions


def bundled_register(*, key: str, owner: User | None) -> list[Environment]:
    """Register (or refresh) the catalog entries of a running bundled server.

    An OpenEnv server is one entry named `key`; the ORS server one entry per hosted
    environment, named `ors-<env>` (names no user may register: webapp.catalog.names). The
    entry marked as this server's gets the server's URL and capacity and is re-probed; a new
    one is owned by `owner` and shared. Where `owner` has an entry of that name of their own,
    the bundled one is `<name>-bundled` (theirs stays theirs, and never becomes the shared
    entry). Raises BundledError (server not running or not an environment server) or
    EnvironmentRejected (registration refused).
    """
    spec = bundled_spec(key)
    server = BundledServer.objects.filter(key=key).first()
    if server is None or server.status != BundledServer.Status.RUNNING or not server.port:
        raise BundledError(f"the bundled server '{key}' is not running; start it first")
    base_url = server.url
    targets: list[tuple[str, str]] = [(key, "")]
    if spec.kind == Environment.Kind.ORS:
        try:
            targets = [(f"ors-{name}", name) for name in ors_environments(base_url)]
        except ProbeError as exc:
            raise BundledError(f"{key} at {base_url}: {exc}") from None
    return [
        _register_one(
            spec=spec,
            owner=owner,
            name=name,
            ors_env=ors_env,
            base_url=base_url,
            capacity=server.capacity,
        )
        for name, ors_env in targets
    ]


def _register_one(
    *,
    spec: BundledSpec,
    owner: User | None,
    name: str,
    ors_env: str,
    base_url: str,
    capacity: int | None,
) -> Environment:
    marks: dict[str, object] = {"bundled": spec.key, **({"ors_env": ors_env} if ors_env else {})}
    # The bundled entry is the one marked as this server's, whoever registered it. Its names
    # are reserved (webapp.catalog.names), so no user's entry can be taken for it (review N5);
    # a `<name>-bundled` entry comes from before names were reserved, or from an operator who
    # had an entry of that name of their own.
    existing = (
        Environment.objects.filter(metadata__bundled=spec.key, name__in=[name, f"{name}{BUNDLED_SUFFIX}"])
        .order_by("pk")
        .first()
    )
    if existing is None and own_names_taken(owner=owner, names=[name]):
        name = f"{name}{BUNDLED_SUFFIX}"
        if own_names_taken(owner=owner, names=[name]):
            raise BundledError(
                f"the names '{name.removesuffix(BUNDLED_SUFFIX)}' and '{name}' are taken by entries of "
                "the registering user that are not this bundled server: rename one of them, then "
                "start it again"
            )
    if existing is None:
        environment = environment_register(
            owner=owner,
            name=name,
            base_url=base_url,
            kind=spec.kind,
            capacity=capacity,
            ors_env=ors_env,
            allow_reserved_name=True,
        )
        with transaction.atomic():
            environment.metadata = {**(environment.metadata or {}), **marks}
            # Bundled servers serve every user of the installation (webapp.catalog.selectors).
            environment.shared = True
            environment.save(update_fields=["metadata", "shared"])
        return environment
    with transaction.atomic():
        environment = Environment.objects.select_for_update().get(pk=existing.pk)
        environment.base_url = base_url
        environment.kind = spec.kind
        environment.capacity = capacity
        environment.metadata = {
            **(environment.metadata or {}),
            **marks,
            "capacity_source": "declared",
        }
        environment.shared = True
        environment.save(update_fields=["base_url", "kind", "capacity", "metadata", "shared"])
    return environment_probe(environment=environment)
