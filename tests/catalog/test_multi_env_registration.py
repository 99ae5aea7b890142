"""Registering a multi-environment ORS server by URL: one catalog entry per environment.

The server is the bundled one (`python -m envs.ors.server`, a real uvicorn process) that hosts
`echo` and `guessnumber`. Registration goes through the API and through the page form; a
refusal is asserted with its exact message and with the catalog unchanged.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.catalog.test_containers import CONTAINER_ID, FakeDocker, FakeProvider
from tests.envs.servers import free_port, run_server_command
from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import grant
from webapp.catalog import probe, services
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

ECHO_TOOLS = [{
    "name": "echo",
    "description": "Say a message; it is echoed back. Repeating the task's phrase exactly scores 1.0.",
    "parameters": {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "The text to say; it is echoed back."}},
        "required": ["message"],
    },
}]


@pytest.fixture(scope="module")
def ors_url() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "envs.ors.server", "--host", "127.0.0.1", "--port", str(port)]
    with run_server_command(command, url, {"OPENREWARD_DISABLE_UPDATE_CHECK": "1"}, startup_timeout=60):
        yield url


def _name_taken(owner: Any, name: str) -> Environment:
    """An environment that only holds `name`: never probed, at a port nothing answers on."""
    return EnvironmentFactory(
        owner=owner, name=name, base_url="http://127.0.0.1:9", status=Environment.Status.UNKNOWN
    )


def _catalog() -> list[tuple[Any, ...]]:
    """Every row as (name, owner, kind, base_url, status, ors_env, shared), by name."""
    return [
        (e.name, e.owner.username if e.owner else None, e.kind, e.base_url, e.status,
         (e.metadata or {}).get("ors_env"), e.shared)
        for e in Environment.objects.select_related("owner").order_by("name")
    ]


# --- the API ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["", "ors"])
def test_a_url_with_two_environments_registers_both_and_lists_them(api, ors_url, kind):
    response = api.post(
        "/api/environments/", {"name": "lab", "base_url": ors_url, "kind": kind}, format="json"
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    echo, guess = Environment.objects.get(name="lab-echo"), Environment.objects.get(name="lab-guessnumber")
    # The first entry's usual fields, as for a single registration, then every entry made.
    assert (body["id"], body["name"], body["kind"], body["base_url"], body["status"]) == (
        echo.pk, "lab-echo", "ors", ors_url, "healthy"
    )
    assert [(e["id"], e["name"], e["metadata"]["ors_env"]) for e in body["registered"]] == [
        (echo.pk, "lab-echo", "echo"),
        (guess.pk, "lab-guessnumber", "guessnumber"),
    ]
    assert body["registered"][0] == {k: v for k, v in body.items() if k != "registered"}
    assert body["tools"] == ECHO_TOOLS
    assert [t["name"] for t in body["registered"][1]["tools"]] == ["guess"]
    assert body["metadata"] == {
        "name": "echo", "ors_env": "echo", "splits": {"train": 32, "test": 8},
        "environments": ["echo", "guessnumber"],
    }
    assert body["registered"][1]["metadata"]["splits"] == {"train": 48, "test": 12}
    assert _catalog() == [
        ("lab-echo", "owner", "ors", ors_url, "healthy", "echo", False),
        ("lab-guessnumber", "owner", "ors", ors_url, "healthy", "guessnumber", False),
    ]


def test_ors_env_still_picks_one_under_the_given_name(api, ors_url):
    response = api.post(
        "/api/environments/",
        {"name": "guess", "base_url": ors_url, "ors_env": "guessnumber", "shared": True},
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["metadata"]["ors_env"]) == ("guess", "guessnumber")
    assert [e["name"] for e in body["registered"]] == ["guess"]
    assert _catalog() == [("guess", "owner", "ors", ors_url, "healthy", "guessnumber", True)]


def test_shared_and_capacity_apply_to_every_entry(api, ors_url):
    response = api.post(
        "/api/environments/",
        {"name": "lab", "base_url": ors_url, "shared": True, "capacity": 8},
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert [(e["name"], e["shared"], e["capacity"], e["metadata"]["capacity_source"])
            for e in response.json()["registered"]] == [
        ("lab-echo", True, 8, "declared"),
        ("lab-guessnumber", True, 8, "declared"),
    ]


def test_one_name_taken_refuses_the_whole_set_and_changes_nothing(api, owner, ors_url):
    _name_taken(owner, "lab-guessnumber")
    before = _catalog()

    response = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"name": [
        "the server hosts 2 environments, to be named lab-echo, lab-guessnumber; you already have "
        "lab-guessnumber, so none was registered: give another name, or register one environment "
        "with ors_env"
    ]}
    assert _catalog() == before == [
        ("lab-guessnumber", "owner", "openenv", "http://127.0.0.1:9", "unknown", None, False)
    ]


def test_another_users_names_do_not_stand_in_the_way(api, outsider, ors_url):
    """Names are unique per owner (security review K5): an outsider's private entry of one of
    the names neither refuses the set nor is mentioned."""
    _name_taken(outsider, "lab-guessnumber")

    response = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")

    assert response.status_code == 201, response.json()
    assert [(e["name"], e["owner"]) for e in response.json()["registered"]] == [
        ("lab-echo", "owner"), ("lab-guessnumber", "owner")
    ]
    assert sorted((e[0], e[1]) for e in _catalog()) == [
        ("lab-echo", "owner"), ("lab-guessnumber", "outsider"), ("lab-guessnumber", "owner")
    ]


def test_a_bundled_name_among_the_entries_refuses_the_set(api, ors_url):
    response = api.post("/api/environments/", {"name": "ors", "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json()["name"][0].startswith("'ors' is reserved for the bundled environments")
    assert _catalog() == []


def test_the_given_name_itself_must_be_free_too(api, owner, ors_url):
    _name_taken(owner, "lab")

    response = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"name": ["you already have an environment named 'lab'"]}
    assert [e[0] for e in _catalog()] == ["lab"]


def test_a_name_taken_by_a_concurrent_request_rolls_the_set_back(api, ors_url, monkeypatch):
    # The race itself cannot be timed in a test: another request creating 'lab-guessnumber'
    # between the name check and the insert is simulated by doing just that inside the check.
    real_check = services._names_taken

    def check_then_lose_the_race(**kwargs: Any) -> dict[str, list[str]]:
        answer = real_check(**kwargs)
        if not Environment.objects.filter(name="lab-guessnumber").exists():
            _name_taken(kwargs["owner"], "lab-guessnumber")
        return answer

    monkeypatch.setattr(services, "_names_taken", check_then_lose_the_race)

    response = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json()["name"][0].startswith("the server hosts 2 environments")
    # 'lab-echo' was inserted first, then rolled back with the rest of the set.
    assert [e[0] for e in _catalog()] == ["lab-guessnumber"]


def test_more_environments_than_the_limit_are_refused_whole(api, ors_url, monkeypatch):
    monkeypatch.setattr(probe, "MAX_ORS_ENVIRONMENTS", 1)

    response = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"base_url": [
        "the server hosts 2 environments; at most 1 are registered at once: choose one (ors_env)"
    ]}
    assert _catalog() == []


def test_a_derived_name_over_100_characters_is_refused(api, ors_url):
    name = "n" * 90  # 'n'*90 + '-echo' fits, + '-guessnumber' does not

    response = api.post("/api/environments/", {"name": name, "base_url": ors_url}, format="json")

    assert response.status_code == 400
    assert response.json() == {"name": [
        f"the entries of this server are named '<name>-<environment>', and '{name}-guessnumber' "
        "would be over 100 characters: give a shorter name"
    ]}
    assert _catalog() == []


def test_the_single_entry_service_still_asks_for_a_choice(owner, ors_url):
    """Bundled servers, catalog files and envlab_setup register one entry at a time."""
    with pytest.raises(services.EnvironmentRejected) as refused:
        services.environment_register(owner=owner, name="lab", base_url=ors_url)

    assert refused.value.errors == {"base_url": [
        "the server hosts several environments (echo, guessnumber): choose one (ors_env)"
    ]}
    assert _catalog() == []


# --- a run on one of them -------------------------------------------------------------------------


def test_a_run_launches_on_one_entry_of_the_set(
    api, ors_url, settings, tmp_path, django_capture_on_commit_callbacks
):
    import redis

    settings.MODELS_DIR = tmp_path  # a folder that looks like a saved model: the check is for presence
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "config.json").write_text("{}")
    registered = api.post("/api/environments/", {"name": "lab", "base_url": ors_url}, format="json")
    guess_id = registered.json()["registered"][1]["id"]
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("train")
    config = {
        "name": "guess",
        "model": "demo:echo",
        "environments": [{"environment": guess_id, "name": "guess", "num_tasks": 8}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 4, "max_steps": 2, "per_device_train_batch_size": 4},
    }

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/runs/", config, format="json")

    assert response.status_code == 201, response.json()
    run = Run.objects.get()
    messages = [json.loads(m) for m in broker.lrange("train", 0, -1)]
    broker.delete("train")  # no worker here: leave nothing for a later test's worker
    assert (run.status, response.json()["id"]) == ("queued", run.pk)
    assert [e.name for e in run.environments.all()] == ["lab-guessnumber"]
    assert [m["headers"]["argsrepr"] for m in messages] == [f"({run.pk},)"]


# --- the page form --------------------------------------------------------------------------------


def _form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "", "kind": "", "base_url": "", "image": "", "ors_catalog": "", "ors_env": "",
        "api_key_env": "", "capacity": "", **fields,
    }


def _registered_rows(content: str) -> list[tuple[str, str, str]]:
    return re.findall(
        r'<tr class="registered-row" data-environment-id="(\d+)">\s*<td><a href="[^"]+">([^<]+)</a></td>'
        r'\s*<td><code class="registered-ors-env">([^<]+)</code></td>',
        content,
    )


def test_the_form_registers_every_environment_and_shows_what_was_found(owner_client, ors_url):
    response = owner_client.post(reverse("environment-list"), _form(name="lab", base_url=ors_url))

    echo, guess = Environment.objects.get(name="lab-echo"), Environment.objects.get(name="lab-guessnumber")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('environment-list')}?registered={echo.pk},{guess.pk}"
    content = owner_client.get(response["Location"]).content.decode()
    assert (
        f"The server at {ors_url} hosts 2 environments; registered &#x27;lab-echo&#x27;, "
        "&#x27;lab-guessnumber&#x27;." in content
    )
    assert _registered_rows(content) == [
        (str(echo.pk), "lab-echo", "echo"),
        (str(guess.pk), "lab-guessnumber", "guessnumber"),
    ]
    assert '<span class="registered-split">train (48)</span>' in content
    assert _catalog() == [
        ("lab-echo", "owner", "ors", ors_url, "healthy", "echo", False),
        ("lab-guessnumber", "owner", "ors", ors_url, "healthy", "guessnumber", False),
    ]


def test_the_form_with_ors_env_registers_one_and_opens_it(owner_client, ors_url):
    response = owner_client.post(
        reverse("environment-list"), _form(name="echo-only", base_url=ors_url, ors_env="echo")
    )

    environment = Environment.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("environment-detail", args=[environment.pk])
    assert (environment.name, environment.metadata["ors_env"]) == ("echo-only", "echo")


def test_the_form_shows_a_name_clash_next_to_the_name_and_stores_nothing(owner_client, owner, ors_url):
    _name_taken(owner, "lab-echo")
    before = _catalog()

    response = owner_client.post(reverse("environment-list"), _form(name="lab", base_url=ors_url))

    content = response.content.decode()
    assert response.status_code == 200
    name_field = content.split('<div class="field" id="field-name">', 1)[1].split("</div>", 1)[0]
    assert (
        '<p class="field-error">the server hosts 2 environments, to be named lab-echo, '
        "lab-guessnumber; you already have lab-echo, so none was registered: give another name, "
        "or register one environment with ors_env</p>"
    ) in name_field
    assert 'id="registered-set"' not in content
    assert _catalog() == before


def test_the_just_registered_list_shows_only_what_the_viewer_may_see(
    api, owner_client, outsider: Any, ors_url
):
    ids = [e["id"] for e in api.post(
        "/api/environments/", {"name": "lab", "base_url": ors_url}, format="json"
    ).json()["registered"]]
    outsider_client = Client()
    outsider_client.force_login(outsider)
    query = f"{reverse('environment-list')}?registered={ids[1]},x,{ids[0]},{ids[1]},-3"

    mine = owner_client.get(query).content.decode()
    theirs = outsider_client.get(query).content.decode()

    assert [row[1] for row in _registered_rows(mine)] == ["lab-guessnumber", "lab-echo"]
    assert 'id="registered-set"' not in theirs and "lab-echo" not in theirs


# --- a container whose server hosts several environments ------------------------------------------


def test_stopping_the_container_marks_every_entry_it_served(api, owner, ors_url, settings, monkeypatch):
    # No Docker engine here: openenv's provider and the docker CLI are stand-ins
    # (tests.catalog.test_containers) that "start" the real ORS server already running.
    settings.ENVLAB_IMAGE_REGISTRIES = ["ghcr.io/example"]
    grant(owner, "catalog.run_container")
    FakeProvider.instances, FakeProvider.url = [], ors_url
    cli = FakeDocker()
    monkeypatch.setattr(services, "docker_available", lambda: True)
    monkeypatch.setattr(services, "_docker_provider", FakeProvider)
    monkeypatch.setattr(services, "_docker", cli)
    registered = api.post(
        "/api/environments/", {"name": "boxed", "image": "ghcr.io/example/ors:1"}, format="json"
    ).json()["registered"]
    assert [(e["name"], e["metadata"]["image"]) for e in registered] == [
        ("boxed-echo", "ghcr.io/example/ors:1"), ("boxed-guessnumber", "ghcr.io/example/ors:1"),
    ]

    response = api.post(f"/api/environments/{registered[0]['id']}/stop-container/")

    assert response.status_code == 200
    assert cli.calls == [("stop", CONTAINER_ID), ("rm", "--force", CONTAINER_ID)]
    assert [(e.name, e.container_id, e.status, e.last_error) for e in Environment.objects.all()] == [
        ("boxed-echo", "", "unhealthy", f"its container {CONTAINER_ID[:12]} was stopped"),
        ("boxed-guessnumber", "", "unhealthy", f"its container {CONTAINER_ID[:12]} was stopped"),
    ]
    assert [(p.started, p.stopped) for p in FakeProvider.instances] == [(["ghcr.io/example/ors:1"], 0)]
