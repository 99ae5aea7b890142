"""Bundled environment servers: real uvicorn processes started, supervised, stopped, registered.

Every test that starts a server runs with `transaction=True`: `envlab_setup` starts servers
from threads with their own database connections, and the rows must be committed for them.
The `no_leftovers` fixture stops whatever a test started, even when it fails half-way.
"""

from __future__ import annotations

import html
import os
import re
import signal
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from tests.envs.servers import is_healthy
from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import grant
from webapp.catalog import bundled
from webapp.catalog.bundled import (
    BUNDLED,
    BundledSpec,
    bundled_register,
    bundled_start,
    bundled_stop,
    bundled_supervise,
    process_is_ours,
)
from webapp.catalog.models import BundledServer, Environment
from webapp.catalog.services import EnvironmentRejected, environment_register

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def var_dir(settings: Any, tmp_path: Path) -> Path:
    """Server logs under the test's own folder, not the installation's var/log/envs."""
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    yield
    for server in BundledServer.objects.exclude(pid=None):
        if server.key in BUNDLED:
            bundled_stop(key=server.key, grace=5)
    # Whatever is left (a server of a spec a test patched in, a row that lost its pid).
    for pid, process in list(bundled._CHILDREN.items()):
        if process.poll() is None:
            os.killpg(pid, signal.SIGKILL)
            process.wait(10)
        bundled._CHILDREN.pop(pid, None)


@pytest.fixture
def broken_spec(monkeypatch: pytest.MonkeyPatch) -> BundledSpec:
    """A registry entry whose module does not exist: uvicorn exits at once."""
    app = "envs.does_not_exist.server:app"
    spec = BundledSpec("broken", "Broken", "openenv", app, 4, 8199, bundled._uvicorn(app))
    monkeypatch.setitem(BUNDLED, "broken", spec)
    return spec


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return not Path(f"/proc/{pid}/cmdline").read_bytes()  # a zombie: exited


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --- process lifecycle ------------------------------------------------------------------------


def test_start_supervise_restart_after_kill_and_stop(var_dir: Path) -> None:
    echo = BUNDLED["echo"]

    server = bundled_start(key="echo", capacity=3)

    assert (server.status, server.desired, server.capacity, server.restarts) == (
        "running",
        "running",
        3,
        0,
    )
    assert server.last_error == ""
    assert server.started_at is not None
    assert server.log_path == str(var_dir / "log" / "envs" / "echo.log")
    assert "--- envlab starting at " in Path(server.log_path).read_text()
    assert is_healthy(server.url)
    first_pid, port = server.pid, server.port
    assert first_pid and process_is_ours(first_pid, echo)
    assert b"envs.echo.server:app" in Path(f"/proc/{first_pid}/cmdline").read_bytes()
    # A live pid that is not the server (here: this test process) is not ours.
    assert not process_is_ours(os.getpid(), echo)
    assert bundled_supervise() == []  # alive: nothing to do

    os.kill(first_pid, signal.SIGKILL)
    assert wait_until(lambda: not process_is_ours(first_pid, echo))
    actions = bundled_supervise()

    server.refresh_from_db()
    assert actions == [f"echo: restarted on port {port} (restart 1)"]
    assert (server.status, server.port, server.restarts, server.capacity) == ("running", port, 1, 3)
    assert server.pid and server.pid != first_pid
    assert is_healthy(server.url)
    second_pid = server.pid

    stopped = bundled_stop(key="echo")

    assert (stopped.status, stopped.desired, stopped.pid) == ("stopped", "stopped", None)
    assert pid_gone(second_pid)
    assert not is_healthy(server.url)
    assert bundled_supervise() == []  # stopped on purpose: not restarted
    assert BundledServer.objects.get(key="echo").restarts == 1


def test_a_failed_start_is_recorded_with_the_log_and_retried_later(
    broken_spec: BundledSpec,
) -> None:
    server = bundled_start(key="broken")

    assert (server.status, server.desired, server.pid) == ("failed", "running", None)
    first_line = server.last_error.splitlines()[0]
    assert (
        first_line == f"broken exited with code 1 before answering /health; see {server.log_path}"
    )
    assert server.last_error.splitlines()[-1] == (
        "ModuleNotFoundError: No module named 'envs.does_not_exist'"
    )
    # Within the retry interval the supervisor leaves a failed server alone.
    assert bundled_supervise() == []
    assert BundledServer.objects.get(key="broken").restarts == 0


def test_starting_a_running_server_adopts_it(var_dir: Path) -> None:
    first = bundled_start(key="echo", capacity=2)

    again = bundled_start(key="echo")

    assert (again.pid, again.port, again.status, again.restarts) == (
        first.pid,
        first.port,
        "running",
        0,
    )
    assert Path(first.log_path).read_text().count("--- envlab starting at ") == 1


# --- catalog registration ---------------------------------------------------------------------


def test_register_creates_a_healthy_entry_then_refreshes_it_in_place() -> None:
    owner = User.objects.create_user("owner", password="pw-owner-123")
    server = bundled_start(key="echo", capacity=2)

    (environment,) = bundled_register(key="echo", owner=owner)

    assert (environment.name, environment.kind, environment.status) == (
        "echo",
        "openenv",
        "healthy",
    )
    assert environment.base_url == server.url
    assert [tool["name"] for tool in environment.tools] == ["echo"]
    assert environment.capacity == 2
    assert (environment.owner, environment.shared) == (owner, True)  # every user's to use
    assert environment.metadata["bundled"] == "echo"
    assert environment.metadata["capacity_source"] == "declared"

    Environment.objects.filter(pk=environment.pk).update(
        base_url="http://127.0.0.1:9", status="unhealthy", last_error="old", shared=False
    )
    (refreshed,) = bundled_register(key="echo", owner=None)

    assert refreshed.pk == environment.pk
    assert (refreshed.base_url, refreshed.status, refreshed.last_error) == (
        server.url,
        "healthy",
        "",
    )
    assert refreshed.metadata["bundled"] == "echo"
    assert Environment.objects.get().shared is True


def test_no_user_may_register_a_bundled_name() -> None:
    """Security review N5: taking a bundled server's name first would make a user the owner
    of what everyone takes for the bundled entry; the names are reserved, in any case."""
    squatter = User.objects.create_user("squatter", password="pw-squatter-1")
    server = bundled_start(key="echo", capacity=2)

    for name in ("echo", "Wordle", "ors-tictactoe", "catch-bundled"):
        with pytest.raises(EnvironmentRejected) as refused:
            environment_register(owner=squatter, name=name, base_url=server.url, capacity=2)
        assert refused.value.errors == {"name": [
            f"'{name}' is reserved for the bundled environments (echo, wordle, catch, sudoku, mcpdemo, "
            "ors, their '-bundled' names and names starting with 'ors-', in any case): give another name"
        ]}
    assert Environment.objects.count() == 0


def test_a_user_who_took_the_name_first_does_not_own_the_shared_entry() -> None:
    """Security review N5: a user's own `echo` (a row from before the names were reserved)
    stays theirs and private; the bundled entry every user trains on is another one, of the
    same name (names are unique per owner), owned by the operator who registered it."""
    from webapp.runs.demo import demo_environment

    squatter = User.objects.create_user("squatter", password="pw-squatter-1")
    operator = User.objects.create_user("operator", password="pw-operator-1")
    outsider = User.objects.create_user("outsider", password="pw-outsider-1")
    server = bundled_start(key="echo", capacity=2)
    own = EnvironmentFactory(
        owner=squatter,
        name="echo",
        base_url=server.url,
        shared=True,
        status=Environment.Status.UNKNOWN,
    )

    (bundled_entry,) = bundled_register(key="echo", owner=operator)

    assert (bundled_entry.name, bundled_entry.owner, bundled_entry.shared) == ("echo", operator, True)
    assert bundled_entry.pk != own.pk and bundled_entry.metadata["bundled"] == "echo"
    own.refresh_from_db()
    assert (own.name, own.owner, "bundled" in own.metadata) == ("echo", squatter, False)
    # The demo run trains on the bundled entry, not on whatever another user named echo.
    assert demo_environment(user=outsider) == bundled_entry
    assert demo_environment(user=squatter) == bundled_entry
    (again,) = bundled_register(key="echo", owner=None)  # a refresh keeps to the same entry
    assert again.pk == bundled_entry.pk and Environment.objects.count() == 2


def test_an_operator_with_an_own_entry_of_the_name_gets_the_bundled_one_apart() -> None:
    operator = User.objects.create_user("operator", password="pw-operator-1")
    server = bundled_start(key="echo", capacity=2)
    own = EnvironmentFactory(
        owner=operator,
        name="echo",
        base_url="http://127.0.0.1:9",
        status=Environment.Status.UNKNOWN,
    )

    (bundled_entry,) = bundled_register(key="echo", owner=operator)

    assert (bundled_entry.name, bundled_entry.owner, bundled_entry.shared) == ("echo-bundled", operator, True)
    assert bundled_entry.base_url == server.url
    own.refresh_from_db()
    assert (own.name, own.base_url, own.shared, own.metadata) == ("echo", "http://127.0.0.1:9", False, {})


def test_register_refuses_a_server_that_is_not_running() -> None:
    with pytest.raises(bundled.BundledError, match="the bundled server 'echo' is not running"):
        bundled_register(key="echo", owner=None)
    assert Environment.objects.count() == 0


def test_envlab_setup_starts_each_server_reports_failures_and_stops_them(
    broken_spec: BundledSpec, var_dir: Path
) -> None:
    out, err = StringIO(), StringIO()

    call_command("envlab_setup", "--only", "echo", "--only", "broken", stdout=out, stderr=err)

    echo = BundledServer.objects.get(key="echo")
    broken = BundledServer.objects.get(key="broken")
    demo = User.objects.get(username="demo")
    password = (var_dir / "demo-login").read_text()
    assert demo.check_password(password) and password != "demo"
    assert out.getvalue().splitlines() == [
        f"login: demo / {password}  (kept in {var_dir / 'demo-login'})",
        f"echo: {echo.url} capacity 64 (pid {echo.pid}); catalog: 'echo' healthy",
    ]
    assert err.getvalue().splitlines() == [
        f"broken: FAILED to start: broken exited with code 1 before answering /health; see "
        f"{broken.log_path} (log: {broken.log_path})"
    ]
    assert User.objects.get(username="demo").is_superuser
    assert Environment.objects.get(name="echo").metadata["bundled"] == "echo"

    out = StringIO()
    call_command("envlab_setup", "--stop-bundled", "--only", "echo", stdout=out)

    assert out.getvalue().splitlines() == ["echo: stopped"]
    assert pid_gone(echo.pid)
    assert BundledServer.objects.get(key="echo").desired == "stopped"


# --- the catalog page -------------------------------------------------------------------------


@pytest.fixture
def user_client() -> Client:
    """A user given the permissions to start and stop bundled servers and to change any
    environment (their entries have no owner, or the one who started them)."""
    user = grant(
        User.objects.create_user("someone", password="pw-someone-123"),
        "catalog.change_bundledserver",
        "catalog.change_environment",
    )
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("is_staff", [False, True])
def test_without_the_permission_the_page_offers_no_start_or_stop_and_refuses_both(
    is_staff: bool,
) -> None:
    client = Client()
    client.force_login(User.objects.create_user("plain", password="pw-plain-123", is_staff=is_staff))
    BundledServer.objects.create(key="wordle", port=8102, status="running", desired="running")

    content = client.get(reverse("environment-list")).content.decode()
    start = client.post(reverse("bundled-start", args=["echo"]), {"capacity": "2"})
    stop = client.post(reverse("bundled-stop", args=["wordle"]))

    assert 'class="bundled-start-form"' not in content and 'class="bundled-stop-form"' not in content
    assert content.count('class="muted bundled-no-permission"') == len(BUNDLED)
    reason = (
        '<p id="forbidden-reason">starting and stopping bundled servers needs the permission '
        "catalog.change_bundledserver: every user&#x27;s runs depend on them</p>"
    )
    for response in (start, stop):
        assert response.status_code == 403
        assert reason in response.content.decode()
    assert list(BundledServer.objects.values_list("key", "status", "desired")) == [
        ("wordle", "running", "running")
    ]


def test_catalog_page_lists_every_bundled_server_escaping_errors(user_client: Client) -> None:
    BundledServer.objects.create(
        key="wordle",
        port=8102,
        status="failed",
        desired="running",
        capacity=5,
        restarts=2,
        log_path="/tmp/wordle.log",
        last_error=XSS,
    )

    content = user_client.get(reverse("environment-list")).content.decode()

    assert 'id="bundled-table"' in content
    rows = re.findall(
        r'<tr class="bundled-row" data-key="([a-z]+)" data-status="([a-z ]+)">', content
    )
    assert rows == [
        ("echo", "not started"),
        ("wordle", "failed"),
        ("catch", "not started"),
        ("sudoku", "not started"),
        ("mcpdemo", "not started"),
        ("ors", "not started"),
    ]
    assert '<code class="bundled-url">http://127.0.0.1:8102</code>' in content
    assert '<code class="bundled-log">/tmp/wordle.log</code>' in content
    assert html.escape(XSS) in content and XSS not in content
    assert f'action="{reverse("bundled-stop", args=["wordle"])}"' in content
    assert f'action="{reverse("bundled-start", args=["echo"])}"' in content


def test_start_and_stop_from_the_page(user_client: Client) -> None:
    started = user_client.post(
        reverse("bundled-start", args=["echo"]), {"capacity": "2"}, follow=True
    )

    server = BundledServer.objects.get(key="echo")
    environment = Environment.objects.get(name="echo")
    assert started.redirect_chain == [(reverse("environment-list"), 302)]
    assert (server.status, server.capacity) == ("running", 2)
    assert is_healthy(server.url)
    assert (environment.status, environment.capacity, environment.base_url, environment.shared) == (
        "healthy",
        2,
        server.url,
        True,
    )
    assert (
        html.escape(f"echo runs at {server.url}, capacity 2; catalog: 'echo' (healthy).")
        in started.content.decode()
    )

    stopped = user_client.post(reverse("bundled-stop", args=["echo"]), follow=True)

    server.refresh_from_db()
    environment.refresh_from_db()
    assert stopped.redirect_chain == [(reverse("environment-list"), 302)]
    assert (server.status, server.desired, server.pid) == ("stopped", "stopped", None)
    assert not is_healthy(f"http://127.0.0.1:{server.port}")
    assert environment.status == "unhealthy"
    assert "echo stopped." in stopped.content.decode()


def test_start_refuses_a_bad_capacity_and_an_unknown_server(user_client: Client) -> None:
    bad = user_client.post(reverse("bundled-start", args=["echo"]), {"capacity": "0"}, follow=True)

    assert (
        "echo: capacity: Ensure this value is greater than or equal to 1." in bad.content.decode()
    )
    assert BundledServer.objects.count() == 0
    assert user_client.post(reverse("bundled-start", args=["nope"])).status_code == 404
    assert user_client.get(reverse("bundled-start", args=["echo"])).status_code == 405


def test_start_and_stop_redirect_anonymous_users_to_login(client: Client) -> None:
    for name in ("bundled-start", "bundled-stop"):
        url = reverse(name, args=["echo"])

        response = client.post(url, {"capacity": "2"})

        assert response.status_code == 302
        assert response["Location"] == f"{reverse('login')}?next={url}"
    assert BundledServer.objects.count() == 0


def test_measure_capacity_from_the_detail_page(user_client: Client) -> None:
    bundled_start(key="echo", capacity=2)
    (environment,) = bundled_register(key="echo", owner=None)
    Environment.objects.filter(pk=environment.pk).update(capacity=None)

    page = user_client.get(reverse("environment-detail", args=[environment.pk])).content.decode()
    measured = user_client.post(
        reverse("environment-measure-capacity", args=[environment.pk]), follow=True
    )

    environment.refresh_from_db()
    assert 'id="measure-capacity-button"' in page
    assert environment.capacity == 2
    assert environment.metadata["capacity_source"] == "probed"
    content = measured.content.decode()
    assert html.escape("'echo' capacity: 2 (probed).") in content
    assert (
        '<dd id="environment-capacity">2 <span class="muted capacity-source">(probed)</span></dd>'
        in content
    )


# --- admin ------------------------------------------------------------------------------------


def test_admin_actions_start_and_stop(broken_spec: BundledSpec) -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    broken = BundledServer.objects.create(key="broken", desired="stopped", status="stopped")
    wordle = BundledServer.objects.create(
        key="wordle", desired="running", status="failed", port=8102
    )

    started = client.post(
        "/admin/catalog/bundledserver/",
        {"action": "start_selected", "_selected_action": [broken.pk]},
        follow=True,
    )
    stopped = client.post(
        "/admin/catalog/bundledserver/",
        {"action": "stop_selected", "_selected_action": [wordle.pk]},
        follow=True,
    )

    broken.refresh_from_db()
    wordle.refresh_from_db()
    assert "Broken did not start: broken exited with code 1 before answering /health" in (
        started.content.decode()
    )
    assert (broken.status, broken.desired) == ("failed", "running")
    assert "Stopped wordle." in stopped.content.decode()
    assert (wordle.status, wordle.desired, wordle.pid) == ("stopped", "stopped", None)
    assert client.get("/admin/catalog/bundledserver/add/").status_code == 403


def test_admin_actions_need_the_change_permission() -> None:
    viewer = grant(
        User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True),
        "catalog.view_bundledserver",
    )
    client = Client()
    client.force_login(viewer)
    wordle = BundledServer.objects.create(key="wordle", desired="running", status="failed", port=8102)

    listing = client.get("/admin/catalog/bundledserver/")
    response = client.post(
        "/admin/catalog/bundledserver/",
        {"action": "stop_selected", "_selected_action": [wordle.pk]},
    )

    assert listing.status_code == 200
    assert 'value="stop_selected"' not in listing.content.decode()
    assert 'value="start_selected"' not in listing.content.decode()
    assert response.status_code == 200  # the list again: no such action for this user
    wordle.refresh_from_db()
    assert (wordle.status, wordle.desired) == ("failed", "running")


# --- the beat task ----------------------------------------------------------------------------


def test_beat_task_retries_a_failed_server_after_the_retry_interval(
    broken_spec: BundledSpec, settings: Any
) -> None:
    from django.utils import timezone

    from worker.tasks import supervise_bundled

    long_ago = timezone.now() - timezone.timedelta(seconds=bundled.FAILED_RETRY_SECONDS + 1)
    BundledServer.objects.create(
        key="broken", desired="running", status="failed", port=8199, updated_at=long_ago
    )
    BundledServer.objects.create(key="echo", desired="stopped", status="stopped", port=8101)

    actions = supervise_bundled()

    broken = BundledServer.objects.get(key="broken")
    assert actions == [
        f"broken: restart failed: broken exited with code 1 before answering /health; see {broken.log_path}"
    ]
    assert (broken.status, broken.restarts, broken.port, broken.pid) == ("failed", 1, 8199, None)
    assert BundledServer.objects.get(key="echo").status == "stopped"
    assert settings.CELERY_BEAT_SCHEDULE["supervise-bundled"] == {
        "task": "worker.tasks.supervise_bundled",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    }
