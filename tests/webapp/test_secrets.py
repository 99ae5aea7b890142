"""C1: no secret leaves the lab. Keys are named only for the Open Reward catalog from an
allow-list, user keys are stored encrypted and used only for their owner, and bundled
servers start without the web process's environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.envs.servers import run_env_server
from tests.factories import EnvironmentFactory
from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import user_secret_set, user_secret_value
from webapp.catalog.credentials import ors_credentials
from webapp.catalog.models import Environment

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "canary-secret-value-0042"


@pytest.fixture
def recorder(tmp_path: Path):
    """A real ORS server (uvicorn) that records every X-API-Key it receives."""
    record = tmp_path / "keys.txt"
    record.touch()
    with run_env_server("tests.support.recording_ors:app", {"ENVLAB_RECORD_FILE": str(record)}) as url:
        yield url, record


def _keyed_ors_environment(owner: Any, url: str, name: str, **metadata: Any) -> Environment:
    """An Open Reward environment `name` served at `url`, whose owner has stored an API key."""
    user_secret_set(user=owner, name="openreward_api_key", value="own-key-of-owner-1234")
    return EnvironmentFactory(
        owner=owner, name=name, kind="ors", base_url=url,
        metadata={"ors_env": "echo", "ors_catalog": "Org/Env", **metadata},
    )


def _bind(environment: Environment, user: Any) -> Any:
    """The adapter the console and the worker build for `user`'s episode of `environment`."""
    from envs.adapters import bind_adapter

    credentials = ors_credentials(environment, user)
    return bind_adapter(environment=environment, env_name=environment.name, credentials=credentials)


def _keys_seen(record: Path) -> set[str]:
    return {line.split(" ", 1)[1].strip() for line in record.read_text().splitlines() if " " in line}


def test_api_key_env_with_a_base_url_is_refused_and_nothing_is_written(api, recorder, monkeypatch):
    url, record = recorder
    monkeypatch.setenv("ENVLAB_CANARY", CANARY)
    response = api.post(
        "/api/environments/",
        {"name": "mine", "base_url": url, "ors_env": "echo", "api_key_env": "ENVLAB_CANARY"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {"api_key_env": [
        "api_key_env is accepted only with ors_catalog (the Open Reward catalog); a server given "
        "by base_url or image gets no key from this installation"
    ]}
    assert Environment.objects.count() == 0
    assert CANARY not in record.read_text()


def test_api_key_env_off_the_allow_list_gets_one_message_whether_or_not_it_is_set(api, monkeypatch):
    monkeypatch.setenv("ENVLAB_CANARY", CANARY)
    monkeypatch.delenv("ENVLAB_NOT_SET_ANYWHERE", raising=False)
    answers = [
        api.post("/api/environments/", {"name": "x", "ors_catalog": "Org/Env", "api_key_env": name}, format="json")
        for name in ("ENVLAB_CANARY", "ENVLAB_NOT_SET_ANYWHERE", "SECRET_KEY")
    ]
    assert [a.status_code for a in answers] == [400, 400, 400]
    expected = {"api_key_env": ["api_key_env must be one of the names this installation allows: OPENREWARD_API_KEY"]}
    assert [a.json() for a in answers] == [expected, expected, expected]
    assert Environment.objects.count() == 0


def test_ors_catalog_without_any_key_is_refused(api):
    response = api.post("/api/environments/", {"name": "x", "ors_catalog": "Org/Env"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"api_key_env": [
        "an Open Reward catalog environment needs an API key: store yours on your account page, "
        "or name a variable this installation allows (api_key_env)"
    ]}
    assert Environment.objects.count() == 0


def test_a_stored_row_naming_a_variable_for_a_typed_url_sends_no_key(owner, recorder, monkeypatch):
    """Rows written before the fix (api_key_env beside a base_url) leak nothing either: the
    adapter the console and the worker build sends no key to a server a user typed."""
    url, record = recorder
    monkeypatch.setenv("OPENREWARD_API_KEY", CANARY)
    environment = _keyed_ors_environment(owner, url, "legacy", api_key_env="OPENREWARD_API_KEY")
    adapter = _bind(environment, owner)
    assert adapter.tool_names == ("echo",)
    seen = _keys_seen(record)
    assert seen == {"-"}  # requests arrived, none with a key


def test_the_catalog_host_gets_the_owners_own_key_and_nobody_elses(owner, outsider, recorder, settings):
    url, record = recorder
    settings.ENVLAB_OPENREWARD_API_URL = url  # the recorder stands in for the Open Reward host
    environment = _keyed_ors_environment(owner, url, "catalog")
    _bind(environment, owner)
    # The SDK's calls carry the key; a plain listing of environments carries none ("-").
    assert _keys_seen(record) == {"own-key-of-owner-1234", "-"}
    record.write_text("")
    _bind(environment, outsider)
    assert _keys_seen(record) == {"-"}  # the outsider has no key: none is sent, not the owner's


def test_secrets_are_encrypted_at_rest_and_shown_only_as_last_four(api, owner, outsider_api):
    value = "sk-or-abcdefghijklmnop-WXYZ"
    response = api.put("/api/account/secrets/openreward_api_key/", {"value": value}, format="json")
    assert response.status_code == 200
    assert response.json() == {
        "name": "openreward_api_key", "label": "Open Reward API key", "is_set": True, "last4": "WXYZ",
    }
    row = UserSecret.objects.get(user=owner)
    assert value not in row.ciphertext and row.last4 == "WXYZ"
    assert user_secret_value(user=owner, name="openreward_api_key") == value
    listed = api.get("/api/account/secrets/")
    assert value not in listed.content.decode()
    assert listed.json() == [
        {"name": "openreward_api_key", "label": "Open Reward API key", "is_set": True, "last4": "WXYZ"},
        {"name": "hf_token", "label": "Hugging Face token", "is_set": False, "last4": ""},
        {"name": "notify_url", "label": "Notification URL", "is_set": False, "last4": ""},
        {"name": "wandb_api_key", "label": "Weights & Biases API key", "is_set": False, "last4": ""},
    ]
    # Another user sees only their own (unset) keys, and cannot read the owner's.
    assert outsider_api.get("/api/account/secrets/openreward_api_key/").json()["is_set"] is False
    assert api.delete("/api/account/secrets/openreward_api_key/").status_code == 204
    assert UserSecret.objects.count() == 0


def test_a_bad_secret_is_refused_and_nothing_is_stored(api):
    for body, status in (({"value": "has space inside"}, 400), ({"value": "x" * 600}, 400)):
        assert api.put("/api/account/secrets/openreward_api_key/", body, format="json").status_code == status
    assert api.put("/api/account/secrets/aws_key/", {"value": "abc"}, format="json").status_code == 404
    assert UserSecret.objects.count() == 0


def test_account_page_shows_set_and_last_four_never_the_value(client, owner):
    client.force_login(owner)
    value = "hf_secretsecretsecret9876"
    response = client.post("/account/", {"action": "set", "name": "hf_token", "value": value})
    assert response.status_code == 302
    page = client.get("/account/").content.decode()
    assert "set (…9876)" in page
    assert value not in page


def test_secrets_are_not_in_the_admin(client, django_user_model):
    admin_user = django_user_model.objects.create_superuser("root", password="root-pw-long-enough")
    user_secret_set(user=admin_user, name="hf_token", value="hf_adminvalue1111")
    client.force_login(admin_user)
    assert client.get("/admin/accounts/usersecret/").status_code == 404
    assert "hf_adminvalue1111" not in client.get("/admin/").content.decode()


def test_bundled_servers_do_not_inherit_the_web_processs_secrets(monkeypatch):
    """L6: a real bundled server process; its environment is read from /proc."""
    from webapp.catalog.bundled import bundled_start, bundled_stop

    monkeypatch.setenv("ENVLAB_CANARY", CANARY)
    monkeypatch.setenv("DATABASE_URL", os.environ.get("DATABASE_URL", "sqlite:///x"))
    server = bundled_start(key="echo", wait=30)
    try:
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0].decode() for item in environ if item}
        assert CANARY.encode() not in b"\0".join(environ)
        assert {"SECRET_KEY", "DATABASE_URL", "ENVLAB_CANARY", "REDIS_URL"} & names == set()
        assert {"MAX_CONCURRENT_ENVS", "PYTHONPATH", "PATH"} <= names
    finally:
        bundled_stop(key="echo")

