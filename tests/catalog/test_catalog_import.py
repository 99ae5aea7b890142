"""Importing an `openenv catalog build` snapshot, listing its entries, registering them.

The snapshot is produced by the real CLI (`python -m openenv.cli catalog build`, offline:
it reads a local Git repository) from a throwaway repository with four environment
manifests. Servers are real: the session's echo server (`echo_url`) and, once, the bundled
echo server started from the page and stopped in a finalizer.
"""

from __future__ import annotations

import copy
import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from tests.envs.servers import free_port, is_healthy
from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import grant
from webapp.catalog import bundled
from webapp.catalog.bundled import bundled_stop
from webapp.catalog.models import BundledServer, CatalogSnapshot, Environment
from webapp.catalog.services import EnvironmentRejected
from webapp.catalog.snapshot import (
    MAX_SNAPSHOT_BYTES,
    CatalogSnapshotRejected,
    catalog_entries,
    catalog_entry_register,
    catalog_snapshot_import,
)

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"
LONG_DESCRIPTION = "Fill the grid. " + "d" * 2500
REPOSITORY_URI = "https://github.com/example/envs.git"
PUBLISHER = "envs.example.org"

MANIFESTS: dict[str, dict[str, str]] = {
    "echo": {
        "openenv.yaml": (
            "spec_version: 1\nname: echo\napp: server.app:app\nport: 8000\n"
            "description: Echoes the message back.\n"
        ),
        "pyproject.toml": (
            '[project]\nname = "echo-env"\nversion = "0.1.0"\nlicense = "BSD-3-Clause"\n'
            'dependencies = ["openenv>=0.10"]\n'
        ),
        "discovery.json": json.dumps(
            {
                "tags": ["tools", "demo"],
                "agent_tools": {
                    "protocol": "mcp",
                    "names": ["echo"],
                    "source": "envs/echo/openenv.yaml",
                },
            }
        ),
    },
    "maze_env": {
        "openenv.yaml": f"spec_version: 1\nname: maze_env\ndescription: 'Find the exit. {XSS}'\n",
        "discovery.json": json.dumps({"artifact_availability": "external", "license": "MIT"}),
    },
    "sudoku_env": {
        "openenv.yaml": f"spec_version: 1\nname: sudoku_env\ndescription: {LONG_DESCRIPTION}\n",
    },
    "wordle": {
        "openenv.yaml": "spec_version: 1\nname: wordle\n",
        "README.md": "---\ndescription: Guess the word in six tries.\nlicense: MIT\ntags: [game]\n---\n",
    },
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="session")
def built_catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`openenv catalog build` run on a throwaway repository: the file and its revision."""
    root = tmp_path_factory.mktemp("catalog")
    repo = root / "repo"
    for folder, files in MANIFESTS.items():
        (repo / "envs" / folder).mkdir(parents=True)
        for filename, text in files.items():
            (repo / "envs" / folder / filename).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "environments")
    output = root / "catalog.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli",
            "catalog",
            "build",
            "--repository",
            str(repo),
            "--repository-uri",
            REPOSITORY_URI,
            "--publisher",
            PUBLISHER,
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    raw = output.read_bytes()
    return {"raw": raw, "data": json.loads(raw), "revision": _git(repo, "rev-parse", "HEAD")}


@pytest.fixture
def raw(built_catalog: dict[str, Any]) -> bytes:
    return built_catalog["raw"]


def identifier_of(built_catalog: dict[str, Any], name: str) -> str:
    (entry,) = [e for e in built_catalog["data"]["entries"] if e["data"]["name"] == name]
    return entry["identifier"]


def with_digest(data: dict[str, Any]) -> bytes:
    """`data` re-sealed with openenv's own digest, as if the CLI had built it."""
    from openenv.discovery import CatalogSnapshot as OpenEnvSnapshot
    from openenv.discovery.serialization import catalog_digest

    snapshot = OpenEnvSnapshot.model_validate(data)
    return json.dumps({**data, "digest": catalog_digest(snapshot)}).encode()


# --- import and listing -----------------------------------------------------------------------


def test_import_stores_the_snapshot_and_lists_each_entry(
    owner: User, built_catalog: dict[str, Any]
) -> None:
    revision = built_catalog["revision"]

    snapshot = catalog_snapshot_import(owner=owner, raw=built_catalog["raw"], name=" example ")

    snapshot.refresh_from_db()
    assert (snapshot.name, snapshot.owner, snapshot.format_version, snapshot.publisher) == (
        "example",
        owner,
        "0.1-draft",
        PUBLISHER,
    )
    assert (snapshot.source_uri, snapshot.source_revision, snapshot.digest) == (
        REPOSITORY_URI,
        revision,
        built_catalog["data"]["digest"],
    )
    entries = catalog_entries(snapshot, user=owner)
    assert [e["display_name"] for e in entries] == ["echo", "maze_env", "sudoku_env", "wordle"]
    assert [e["bundled_key"] for e in entries] == ["echo", None, "sudoku", "wordle"]
    assert [e["registered_environment_id"] for e in entries] == [None, None, None, None]
    source = {
        "provider": "github",
        "repository": "example/envs",
        "uri": REPOSITORY_URI,
        "path": "envs/echo",
        "revision": revision,
    }
    assert entries[0] == {
        "identifier": identifier_of(built_catalog, "echo"),
        "display_name": "echo",
        "name": "echo",
        "description": "Echoes the message back.",
        "tags": ["demo", "tools"],
        "capabilities": ["echo"],
        "license": "BSD-3-Clause",
        "image": "",
        "artifact_availability": "resolvable",
        "artifacts": [
            {"kind": "git", "uri": REPOSITORY_URI, "path": "envs/echo", "revision": revision}
        ],
        "source": source,
        "interfaces": [
            {"role": "orchestration", "protocol": "openenv"},
            {"role": "agent-tools", "protocol": "mcp"},
        ],
        "framework_requirement": "openenv>=0.10",
        "run_hint": f"git artifact: {REPOSITORY_URI} at envs/echo, revision {revision[:12]}",
        "bundled_key": "echo",
        "registered_environment_id": None,
    }
    maze = entries[1]
    assert (maze["description"], maze["license"], maze["artifacts"]) == (
        f"Find the exit. {XSS}",
        "MIT",
        [],
    )
    assert maze["run_hint"] == (
        f"artifact published elsewhere (not in the catalog); source: {REPOSITORY_URI} at "
        f"envs/maze_env, revision {revision[:12]}"
    )
    # Text is stored bounded: the 2515-character description is cut to 2000.
    assert entries[2]["description"] == LONG_DESCRIPTION[:1999] + "…"
    assert (entries[3]["license"], entries[3]["tags"]) == ("MIT", ["game"])


def _bad_files(built: dict[str, Any]) -> list[tuple[str, bytes, str]]:
    data = built["data"]
    edited = copy.deepcopy(data)
    edited["entries"][0]["description"] = "Edited after the build."
    bad_revision = copy.deepcopy(data)
    bad_revision["entries"][0]["data"]["source"]["revision"] = "main"
    incomplete = copy.deepcopy(data)
    incomplete["entries"] = incomplete["entries"][1:]
    incomplete["complete"] = False
    incomplete["issues"] = [
        {
            "path": "envs/echo",
            "code": "missing_metadata",
            "message": "Manifest is absent",
            "severity": "error",
        }
    ]
    return [
        (
            "not JSON",
            b"{not json",
            "not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)",
        ),
        (
            "not UTF-8",
            b'{"a": "\xff"}',
            "not UTF-8 text (byte 7); a catalog snapshot is a JSON file",
        ),
        (
            "duplicate keys",
            b'{"a": 1, "a": 2}',
            "not valid JSON (JSON contains duplicate object keys)",
        ),
        (
            "a JSON list",
            b"[]",
            "not a catalog snapshot: expected a JSON object with 'publisher', 'source', 'inventory', "
            "'entries', 'complete' and 'digest', as `openenv catalog build` writes",
        ),
        (
            "another format",
            json.dumps({**data, "schema_version": "0.2"}).encode(),
            "catalog format '0.2' is not supported; this installation reads '0.1-draft' (openenv 0.10)",
        ),
        (
            "a profile violation",
            json.dumps(bad_revision).encode(),
            "does not match openenv's catalog profile 0.1-draft: entries.0.data.source.revision: "
            "String should match pattern '^(?:[0-9a-f]{40}|[0-9a-f]{64})$'",
        ),
        (
            "edited after the build",
            json.dumps(edited).encode(),
            "the content does not match its digest: the file was changed after `openenv catalog "
            "build` wrote it",
        ),
        (
            "an incomplete build",
            with_digest(incomplete),
            "the snapshot is incomplete (the build failed for envs/echo: Manifest is absent); fix "
            "those environments and run `openenv catalog build` again",
        ),
        (
            "too many entries",
            json.dumps({"publisher": PUBLISHER, "entries": [{}] * 1001}).encode(),
            "1001 entries; a snapshot may list at most 1000",
        ),
        (
            "too big",
            b" " * (MAX_SNAPSHOT_BYTES + 1),
            "the file is larger than 5 MB; a catalog snapshot is metadata only, so a file this big "
            "is not one",
        ),
        (
            "empty",
            b"",
            "the file is empty; give the JSON file `openenv catalog build --output` wrote",
        ),
    ]


def test_bad_files_are_refused_naming_the_problem_and_write_nothing(
    owner: User, built_catalog: dict[str, Any]
) -> None:
    for label, raw, message in _bad_files(built_catalog):
        with pytest.raises(CatalogSnapshotRejected) as refused:
            catalog_snapshot_import(owner=owner, raw=raw, name="bad")

        assert refused.value.errors == {"file": [message]}, label
    assert CatalogSnapshot.objects.count() == 0


def test_a_missing_name_is_refused(owner: User, raw: bytes) -> None:
    with pytest.raises(CatalogSnapshotRejected) as refused:
        catalog_snapshot_import(owner=owner, raw=raw, name="  ")

    assert refused.value.errors == {"name": ["give a name of 1 to 100 characters"]}
    assert CatalogSnapshot.objects.count() == 0


# --- registration -----------------------------------------------------------------------------


def test_register_an_entry_with_the_url_of_a_running_server(
    owner: User, outsider: User, built_catalog: dict[str, Any], echo_url: str
) -> None:
    snapshot = catalog_snapshot_import(owner=owner, raw=built_catalog["raw"], name="example")
    identifier = identifier_of(built_catalog, "echo")

    environment = catalog_entry_register(
        owner=owner, snapshot=snapshot, identifier=identifier, base_url=echo_url + "/", name="my-echo"
    )

    environment.refresh_from_db()
    assert (environment.name, environment.base_url, environment.kind, environment.status) == (
        "my-echo",
        echo_url,
        "openenv",
        "healthy",
    )
    assert environment.owner == owner
    assert [tool["name"] for tool in environment.tools] == ["echo"]
    assert environment.metadata["catalog_entry"] == identifier
    assert environment.metadata["catalog_snapshot"] == snapshot.pk
    assert "bundled" not in environment.metadata
    assert [e["registered_environment_id"] for e in catalog_entries(snapshot, user=owner)] == [
        environment.pk,
        None,
        None,
        None,
    ]
    # Another user is not told of the owner's private registration (it named its id).
    assert [e["registered_environment_id"] for e in catalog_entries(snapshot, user=outsider)] == [None] * 4


def test_registration_refusals_name_the_field_and_write_nothing(
    owner: User, built_catalog: dict[str, Any]
) -> None:
    snapshot = catalog_snapshot_import(owner=owner, raw=built_catalog["raw"], name="example")
    echo, maze = identifier_of(built_catalog, "echo"), identifier_of(built_catalog, "maze_env")
    EnvironmentFactory(owner=owner, name="taken", status=Environment.Status.UNKNOWN)
    down = f"http://127.0.0.1:{free_port()}"
    cases = [
        (
            {"identifier": "urn:air:nope"},
            {"identifier": ["no entry 'urn:air:nope' in catalog 'example'"]},
        ),
        ({"identifier": echo}, {"base_url": ["give the URL of a server that runs this entry"]}),
        (
            {"identifier": echo, "base_url": down, "start_bundled": True},
            {
                "base_url": [
                    "give the URL of a running server or start the bundled server, not both"
                ]
            },
        ),
        (
            {"identifier": maze, "start_bundled": True},
            {
                "start_bundled": [
                    "'maze_env' is not one of the bundled servers (echo, wordle, catch, sudoku, "
                    "mcpdemo); give the URL of a server that runs it"
                ]
            },
        ),
        (
            {"identifier": echo, "start_bundled": True},
            {
                "start_bundled": [
                    "starting and stopping bundled servers needs the permission "
                    "catalog.change_bundledserver: every user's runs depend on them; give the URL "
                    "of a server that runs this entry"
                ]
            },
        ),
        (
            {"identifier": echo, "base_url": down, "name": "taken"},
            {"name": ["you already have an environment named 'taken'"]},
        ),
        (
            # The entry's own name, 'echo', is the bundled server's: reserved, refused before anything starts.
            {"identifier": echo, "base_url": down, "name": ""},
            {"name": [
                "'echo' is reserved for the bundled environments (echo, wordle, catch, sudoku, mcpdemo, "
                "ors, their '-bundled' names and names starting with 'ors-', in any case): give another name"
            ]},
        ),
        (
            {"identifier": echo, "base_url": down},
            {"base_url": [
                f"the server at {down} could not be read as an environment server "
                "(no answer, refused, timed out, redirected, too large or not JSON)"
            ]},
        ),
    ]
    for arguments, errors in cases:
        with pytest.raises(EnvironmentRejected) as refused:
            # A name of the user's unless the case gives one (the echo entry's own is reserved).
            catalog_entry_register(owner=owner, snapshot=snapshot, **{"name": "my-echo", **arguments})

        assert refused.value.errors == errors, arguments
    assert list(Environment.objects.values_list("name", flat=True)) == ["taken"]
    assert BundledServer.objects.count() == 0


# --- API --------------------------------------------------------------------------------------


def test_api_import_by_file_and_by_json_then_read_back(
    api: Any,
    outsider_api: Any,
    staff_api: Any,
    operator_api: Any,
    built_catalog: dict[str, Any],
    owner: User,
) -> None:
    upload = SimpleUploadedFile("example-catalog.json", built_catalog["raw"], "application/json")

    by_file = api.post("/api/catalog-snapshots/", {"file": upload}, format="multipart")
    by_json = api.post(
        "/api/catalog-snapshots/",
        {"name": "as json", "snapshot": built_catalog["data"]},
        format="json",
    )

    assert by_file.status_code == 201, by_file.json()
    assert by_json.status_code == 201, by_json.json()
    first, second = by_file.json(), by_json.json()
    assert (first["name"], first["owner"], first["format_version"]) == (
        "example-catalog",
        "owner",
        "0.1-draft",
    )
    assert second["name"] == "as json"
    assert first["entries"] == second["entries"]
    assert [e["identifier"] for e in first["entries"]] == [
        e["identifier"] for e in built_catalog["data"]["entries"]
    ]
    assert first["entries"][0]["bundled_key"] == "echo"
    assert list(CatalogSnapshot.objects.order_by("pk").values_list("name", "owner__username")) == [
        ("example-catalog", "owner"),
        ("as json", "owner"),
    ]
    detail = api.get(f"/api/catalog-snapshots/{first['id']}/")
    assert detail.status_code == 200 and detail.json() == first
    assert [s["id"] for s in api.get("/api/catalog-snapshots/").json()] == [
        second["id"],
        first["id"],
    ]
    # Another user neither sees nor registers from it, staff status alone neither; users
    # with catalog.view_catalogsnapshot see it.
    assert outsider_api.get(f"/api/catalog-snapshots/{first['id']}/").status_code == 404
    assert outsider_api.get("/api/catalog-snapshots/").json() == []
    assert staff_api.get(f"/api/catalog-snapshots/{first['id']}/").status_code == 404
    assert staff_api.get("/api/catalog-snapshots/").json() == []
    assert operator_api.get(f"/api/catalog-snapshots/{first['id']}/").status_code == 200
    refused = outsider_api.post(
        f"/api/catalog-snapshots/{first['id']}/register/",
        {"identifier": first["entries"][0]["identifier"], "base_url": "http://127.0.0.1:9"},
        format="json",
    )
    assert refused.status_code == 404
    assert Environment.objects.count() == 0


def test_api_refusals_are_400s_naming_the_field(
    api: Any, client: Client, built_catalog: dict[str, Any]
) -> None:
    not_json = SimpleUploadedFile("broken.json", b"{not json", "application/json")
    # Refused from its declared length, before the body is parsed.
    huge = SimpleUploadedFile("huge.json", b" " * (MAX_SNAPSHOT_BYTES + 2 * 1024 * 1024))
    edited = copy.deepcopy(built_catalog["data"])
    edited["entries"][0]["description"] = "Edited after the build."

    responses = [
        api.post("/api/catalog-snapshots/", {"file": not_json}, format="multipart"),
        api.post("/api/catalog-snapshots/", {"name": "x", "snapshot": edited}, format="json"),
        api.post("/api/catalog-snapshots/", {"name": "x"}, format="json"),
        api.post("/api/catalog-snapshots/", {"file": huge}, format="multipart"),
        client.post(
            "/api/catalog-snapshots/",
            {"name": "x", "snapshot": {}},
            content_type="application/json",
        ),
    ]

    assert [r.status_code for r in responses] == [400, 400, 400, 400, 401]
    assert responses[0].json() == {
        "file": [
            "not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)"
        ]
    }
    assert responses[1].json() == {
        "snapshot": [
            "the content does not match its digest: the file was changed after `openenv catalog "
            "build` wrote it"
        ]
    }
    assert responses[2].json() == {
        "file": [
            "give the catalog file as the multipart field 'file', or its content as 'snapshot' in "
            "a JSON body (one of the two)"
        ]
    }
    assert responses[3].json() == {
        "file": [
            "the file is larger than 5 MB; a catalog snapshot is metadata only, so a file this "
            "big is not one"
        ]
    }
    assert CatalogSnapshot.objects.count() == 0


def test_api_register_an_entry(api: Any, built_catalog: dict[str, Any], echo_url: str) -> None:
    created = api.post(
        "/api/catalog-snapshots/",
        {"name": "example", "snapshot": built_catalog["data"]},
        format="json",
    ).json()
    identifier = identifier_of(built_catalog, "wordle")

    missing_url = api.post(
        f"/api/catalog-snapshots/{created['id']}/register/",
        {"identifier": identifier},
        format="json",
    )
    registered = api.post(
        f"/api/catalog-snapshots/{created['id']}/register/",
        {"identifier": identifier, "base_url": echo_url, "name": "echo-as-wordle"},
        format="json",
    )

    assert missing_url.status_code == 400
    assert missing_url.json() == {
        # The entry's own name is the bundled server's, which is reserved (webapp.catalog.names).
        "name": [
            "'wordle' is reserved for the bundled environments (echo, wordle, catch, sudoku, mcpdemo, "
            "ors, their '-bundled' names and names starting with 'ors-', in any case): give another name"
        ],
        "base_url": ["give the URL of a server that runs this entry"],
    }
    assert registered.status_code == 201, registered.json()
    body = registered.json()
    assert (body["name"], body["base_url"], body["status"], body["kind"]) == (
        "echo-as-wordle",
        echo_url,
        "healthy",
        "openenv",
    )
    assert (body["metadata"]["catalog_entry"], body["metadata"]["catalog_snapshot"]) == (
        identifier,
        created["id"],
    )
    listed = api.get(f"/api/catalog-snapshots/{created['id']}/").json()["entries"]
    assert [e["registered_environment_id"] for e in listed] == [None, None, None, body["id"]]
    assert Environment.objects.count() == 1


# --- pages ------------------------------------------------------------------------------------


def _rows(content: str) -> list[tuple[str, str]]:
    return re.findall(
        r'<tr class="entry-row" data-identifier="([^"]+)" data-bundled-key="([a-z]*)">', content
    )


def _upload(client: Client, raw: bytes, name: str = "") -> Any:
    return client.post(
        reverse("catalog-snapshot-import"),
        {"file": SimpleUploadedFile("catalog.json", raw, "application/json"), "name": name},
    )


@pytest.mark.django_db(transaction=True)
def test_page_flow_upload_list_register_with_url(
    owner_client: Client, owner: User, built_catalog: dict[str, Any], echo_url: str
) -> None:
    grant(owner, "catalog.change_bundledserver")  # offered the "start bundled" forms too
    catalog_page = owner_client.get(reverse("environment-list")).content.decode()
    assert 'id="catalog-import-form"' in catalog_page
    assert (
        f'action="{reverse("catalog-snapshot-import")}" enctype="multipart/form-data"'
        in catalog_page
    )

    uploaded = _upload(owner_client, built_catalog["raw"])

    snapshot = CatalogSnapshot.objects.get()
    detail_url = reverse("catalog-snapshot-detail", args=[snapshot.pk])
    assert (uploaded.status_code, uploaded["Location"]) == (302, detail_url)
    assert snapshot.name == "catalog"
    page = owner_client.get(detail_url).content.decode()
    assert "Imported catalog &#x27;catalog&#x27; with 4 entries." in page
    assert _rows(page) == [
        (html.escape(identifier_of(built_catalog, "echo")), "echo"),
        (html.escape(identifier_of(built_catalog, "maze_env")), ""),
        (html.escape(identifier_of(built_catalog, "sudoku_env")), "sudoku"),
        (html.escape(identifier_of(built_catalog, "wordle")), "wordle"),
    ]
    assert page.count('class="entry-url-form"') == 4
    assert page.count('class="entry-bundled-form"') == 3
    assert page.count("csrfmiddlewaretoken") == 8  # seven entry forms and the logout form
    # Text from the file is escaped, never markup.
    assert html.escape(f"Find the exit. {XSS}") in page and XSS not in page

    register_url = reverse("catalog-entry-register", args=[snapshot.pk])
    identifier = identifier_of(built_catalog, "echo")
    down = f"http://127.0.0.1:{free_port()}"
    refused = owner_client.post(register_url, {"identifier": identifier, "base_url": down, "name": "my-echo"})

    assert refused.status_code == 200
    content = refused.content.decode()
    assert re.findall(
        r'<ul class="errors entry-errors" role="alert"><li>(.*?)</li></ul>', content
    ) == [
        html.escape(
            f"base_url: the server at {down} could not be read as an environment server "
            "(no answer, refused, timed out, redirected, too large or not JSON)"
        )
    ]
    assert f'value="{down}"' in content
    assert Environment.objects.count() == 0

    registered = owner_client.post(
        register_url, {"identifier": identifier, "base_url": echo_url, "name": "my-echo"}, follow=True
    )

    environment = Environment.objects.get()
    assert registered.redirect_chain == [(detail_url, 302)]
    assert (environment.name, environment.base_url, environment.status) == (
        "my-echo",
        echo_url,
        "healthy",
    )
    assert environment.metadata["catalog_entry"] == identifier
    assert environment.metadata["catalog_snapshot"] == snapshot.pk
    content = registered.content.decode()
    assert html.escape(f"Registered environment 'my-echo' at {echo_url}.") in content
    assert (
        f'<a class="entry-registered" href="{reverse("environment-detail", args=[environment.pk])}">'
        f"environment #{environment.pk}</a>"
    ) in content


def test_page_upload_of_a_bad_file_shows_the_error_and_writes_nothing(owner_client: Client) -> None:
    response = _upload(owner_client, b"[]", name="bad")

    assert response.status_code == 200
    field = re.search(
        r'<div class="field" id="field-file">(.*?)</div>', response.content.decode(), re.S
    )
    assert field and re.findall(r'<p class="field-error">(.*?)</p>', field.group(1)) == [
        html.escape(
            "not a catalog snapshot: expected a JSON object with 'publisher', 'source', 'inventory', "
            "'entries', 'complete' and 'digest', as `openenv catalog build` writes"
        )
    ]
    assert CatalogSnapshot.objects.count() == 0


def test_pages_need_a_login_the_owner_and_csrf(
    client: Client, owner: User, outsider: User, raw: bytes
) -> None:
    snapshot = catalog_snapshot_import(owner=owner, raw=raw, name="mine")
    urls = [
        reverse("catalog-snapshot-import"),
        reverse("catalog-snapshot-detail", args=[snapshot.pk]),
    ]
    for url in urls:
        response = client.get(url)
        assert (response.status_code, response["Location"]) == (
            302,
            f"{reverse('login')}?next={url}",
        )
    register_url = reverse("catalog-entry-register", args=[snapshot.pk])
    assert (
        client.post(register_url, {"identifier": "x", "base_url": "http://127.0.0.1:9"})["Location"]
        == f"{reverse('login')}?next={register_url}"
    )

    client.force_login(outsider)
    assert client.get(urls[1]).status_code == 404
    assert "mine" not in client.get(urls[0]).content.decode()

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(urls[0], {"file": SimpleUploadedFile("c.json", raw)}).status_code == 403
    assert CatalogSnapshot.objects.count() == 1
    assert Environment.objects.count() == 0


@pytest.fixture
def stop_bundled_echo(settings: Any, tmp_path: Path) -> Iterator[None]:
    """Logs under the test's folder; the bundled echo server is stopped whatever happens."""
    settings.VAR_DIR = tmp_path
    yield
    bundled_stop(key="echo", grace=5)
    for pid, process in list(bundled._CHILDREN.items()):
        if process.poll() is None:
            process.kill()
            process.wait(10)
        bundled._CHILDREN.pop(pid, None)


@pytest.mark.django_db(transaction=True)
def test_page_starts_the_bundled_server_and_registers_it(
    owner_client: Client, owner: User, built_catalog: dict[str, Any], stop_bundled_echo: None
) -> None:
    grant(owner, "catalog.change_bundledserver")
    snapshot = catalog_snapshot_import(owner=owner, raw=built_catalog["raw"], name="example")
    identifier = identifier_of(built_catalog, "echo")
    detail_url = reverse("catalog-snapshot-detail", args=[snapshot.pk])

    response = owner_client.post(
        reverse("catalog-entry-register", args=[snapshot.pk]),
        {"identifier": identifier, "start_bundled": "on", "name": "echo-from-catalog"},
        follow=True,
    )

    server = BundledServer.objects.get(key="echo")
    environment = Environment.objects.get()
    assert response.redirect_chain == [(detail_url, 302)]
    assert server.status == "running" and is_healthy(server.url)
    assert (environment.name, environment.base_url, environment.status, environment.capacity) == (
        "echo-from-catalog",
        server.url,
        "healthy",
        server.capacity,
    )
    assert (
        environment.metadata["catalog_entry"],
        environment.metadata["catalog_snapshot"],
        environment.metadata["bundled"],
    ) == (identifier, snapshot.pk, "echo")
    assert html.escape(f"Registered environment 'echo-from-catalog' at {server.url}.") in (
        response.content.decode()
    )
