"""Image registrations: who may run a container, from which registry, and that its
container is recorded, stopped when the registration is refused, and stoppable later.

The permission and registry refusals run for real. There is no Docker engine on this
machine, so the Docker side (openenv's LocalDockerProvider, the `docker` CLI) is replaced
by `FakeProvider` and `FakeDocker` below; the registered "container" is a real echo
server, which the probe reads over HTTP as it would a container's.
"""

from __future__ import annotations

import subprocess
from typing import Any, ClassVar

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.envs.servers import free_port
from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import grant
from webapp.catalog import services
from webapp.catalog.models import Environment

pytestmark = pytest.mark.django_db

IMAGE = "ghcr.io/example/echo-env:1"
CONTAINER_ID = "c0ffee" * 10 + "abcd"
PERMISSION = (
    "registering a container image needs the permission catalog.run_container (it runs on "
    "this host's Docker engine): ask an administrator, or register the URL of a running server"
)


class FakeProvider:
    """Stands in for openenv's LocalDockerProvider (no Docker engine on this machine): it
    "starts" a container by handing out the URL of a server that already runs, and keeps the
    id in `_container_id` as the real provider does."""

    instances: ClassVar[list[FakeProvider]] = []
    url = ""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped = 0
        self._container_id: str | None = None
        FakeProvider.instances.append(self)

    def start_container(self, image: str, **kwargs: Any) -> str:
        self.started.append(image)
        self._container_id = CONTAINER_ID
        return FakeProvider.url

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        return None

    def stop_container(self) -> None:
        self.stopped += 1
        self._container_id = None


class FakeDocker:
    """Stands in for the `docker` CLI (no Docker engine on this machine); records each argv."""

    def __init__(self, stop_stderr: str = "", stop_code: int = 0) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.stop_stderr, self.stop_code = stop_stderr, stop_code

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        code, stderr = (self.stop_code, self.stop_stderr) if args[0] == "stop" else (0, "")
        return subprocess.CompletedProcess(["docker", *args], code, stdout="", stderr=stderr)


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch, settings: Any) -> type[FakeProvider]:
    settings.ENVLAB_IMAGE_REGISTRIES = ["ghcr.io/example"]
    FakeProvider.instances = []
    monkeypatch.setattr(services, "docker_available", lambda: True)
    monkeypatch.setattr(services, "_docker_provider", FakeProvider)
    return FakeProvider


@pytest.fixture
def runner(owner: User) -> User:
    """A user allowed to run containers (not staff: the permission is what counts)."""
    return grant(owner, "catalog.run_container")


def _register(api: Any, image: str = IMAGE) -> Any:
    return api.post("/api/environments/", {"name": "boxed", "image": image}, format="json")


# --- refused before anything starts -----------------------------------------------------------


@pytest.mark.parametrize("persona", ["api", "staff_api"])
def test_without_the_permission_no_image_is_started(
    request: Any, docker: Any, persona: str
) -> None:
    response = _register(request.getfixturevalue(persona))

    assert (response.status_code, response.json()) == (400, {"image": [PERMISSION]})
    assert [p.started for p in docker.instances] == []
    assert Environment.objects.count() == 0


def test_an_empty_registry_list_refuses_every_image(
    api: Any, runner: User, docker: Any, settings: Any
) -> None:
    settings.ENVLAB_IMAGE_REGISTRIES = []

    response = _register(api)

    assert (response.status_code, response.json()) == (
        400,
        {
            "image": [
                "no container registry is allowed on this installation: an administrator lists the "
                "allowed ones in the setting ENVLAB_IMAGE_REGISTRIES (prefixes like ghcr.io/meta-pytorch/)"
            ]
        },
    )
    assert docker.instances == [] and Environment.objects.count() == 0


@pytest.mark.parametrize(
    "image", ["docker.io/library/python:3.11", "ghcr.io/example-evil/echo:1", "ghcr.io/examples:1"]
)
def test_images_from_other_registries_are_refused(
    api: Any, runner: User, docker: Any, image: str
) -> None:
    response = _register(api, image=image)

    assert (response.status_code, response.json()) == (
        400,
        {
            "image": [
                f"'{image}' is not from an allowed registry; ENVLAB_IMAGE_REGISTRIES allows "
                "ghcr.io/example (write the image's full name, registry included)"
            ]
        },
    )
    assert docker.instances == [] and Environment.objects.count() == 0


# --- started, recorded, stopped ---------------------------------------------------------------


def test_the_container_id_is_recorded(api: Any, runner: User, docker: Any, echo_url: str) -> None:
    docker.url = echo_url

    response = _register(api)

    assert response.status_code == 201, response.json()
    environment = Environment.objects.get()
    assert (environment.container_id, environment.metadata["image"], environment.owner) == (
        CONTAINER_ID,
        IMAGE,
        runner,
    )
    assert [(p.started, p.stopped) for p in docker.instances] == [([IMAGE], 0)]


def test_a_refused_registration_stops_its_container(api: Any, runner: User, docker: Any) -> None:
    docker.url = f"http://127.0.0.1:{free_port()}"  # the "container" never answers

    response = _register(api)

    assert response.status_code == 400
    assert list(response.json()) == ["base_url"]
    assert [(p.started, p.stopped) for p in docker.instances] == [([IMAGE], 1)]
    assert Environment.objects.count() == 0


def test_a_container_without_an_id_is_stopped_and_refused(
    api: Any, runner: User, docker: Any, echo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker.url = echo_url
    monkeypatch.setattr(FakeProvider, "start_container", lambda self, image, **kw: docker.url)

    response = _register(api)

    assert (response.status_code, response.json()) == (
        400,
        {
            "image": [
                f"{IMAGE} started, but Docker reported no container id to record; it was stopped again"
            ]
        },
    )
    assert [p.stopped for p in docker.instances] == [1]
    assert Environment.objects.count() == 0


@pytest.fixture
def boxed(owner: User, echo_url: str) -> Environment:
    return EnvironmentFactory(
        owner=owner,
        name="boxed",
        base_url=echo_url,
        status="healthy",
        container_id=CONTAINER_ID,
        metadata={"image": IMAGE},
    )


def test_owner_stops_the_container_later(
    api: Any, outsider_api: Any, staff_api: Any, boxed: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = FakeDocker()
    monkeypatch.setattr(services, "docker_available", lambda: True)
    monkeypatch.setattr(services, "_docker", cli)
    url = f"/api/environments/{boxed.pk}/stop-container/"

    assert outsider_api.post(url).status_code == 404
    assert staff_api.post(url).status_code == 404
    assert cli.calls == []
    response = api.post(url)

    assert response.status_code == 200
    assert (response.json()["status"], response.json()["last_error"]) == (
        "unhealthy",
        f"its container {CONTAINER_ID[:12]} was stopped",
    )
    assert cli.calls == [("stop", CONTAINER_ID), ("rm", "--force", CONTAINER_ID)]
    boxed.refresh_from_db()
    assert (boxed.container_id, boxed.status) == ("", "unhealthy")


def test_a_failing_docker_stop_keeps_the_id(
    api: Any, boxed: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "docker_available", lambda: True)
    monkeypatch.setattr(
        services, "_docker", FakeDocker(stop_stderr="permission denied", stop_code=1)
    )

    response = api.post(f"/api/environments/{boxed.pk}/stop-container/")

    assert (response.status_code, response.json()) == (
        400,
        {"container": [f"docker stop {CONTAINER_ID[:12]} failed: permission denied"]},
    )
    boxed.refresh_from_db()
    assert (boxed.container_id, boxed.status) == (CONTAINER_ID, "healthy")


def test_stopping_without_a_docker_engine_says_so(
    api: Any, boxed: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # the real check: no docker CLI here

    response = api.post(f"/api/environments/{boxed.pk}/stop-container/")

    assert (response.status_code, response.json()) == (
        400,
        {"container": ["no Docker engine on this machine to stop the container with"]},
    )
    boxed.refresh_from_db()
    assert boxed.container_id == CONTAINER_ID


def test_page_and_admin_stop_the_container(
    owner: User, boxed: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli = FakeDocker()
    monkeypatch.setattr(services, "docker_available", lambda: True)
    monkeypatch.setattr(services, "_docker", cli)
    client = Client()
    client.force_login(owner)

    page = client.get(reverse("environment-detail", args=[boxed.pk])).content.decode()
    stopped = client.post(reverse("environment-container-stop", args=[boxed.pk]), follow=True)

    assert 'id="container-stop-form"' in page
    assert "The container of &#x27;boxed&#x27; was stopped." in stopped.content.decode()
    assert 'id="container-stop-form"' not in stopped.content.decode()

    Environment.objects.filter(pk=boxed.pk).update(container_id=CONTAINER_ID)
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    response = admin.post(
        "/admin/catalog/environment/",
        {"action": "stop_containers", "_selected_action": [boxed.pk]},
        follow=True,
    )

    assert "Stopped the containers of boxed." in response.content.decode()
    assert cli.calls == [("stop", CONTAINER_ID), ("rm", "--force", CONTAINER_ID)] * 2
    boxed.refresh_from_db()
    assert boxed.container_id == ""
