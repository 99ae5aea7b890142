"""Harbor agent tasks in the catalog: a dataset folder the test makes, read directly and through
a real Harbor server process (openenv's Harbor environment, tests/envs/harbor_stub.py).

Nothing is faked: the server is a uvicorn process running openenv's own Task API and
`capabilities` tool; only `run_rollout` (which needs the `harbor` package and a sandbox)
is never called.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.envs.servers import run_env_server
from webapp.catalog.harbor import MAX_TASKS_PER_DATASET, HarborAnswerInvalid, harbor_dataset_read
from webapp.catalog.models import Environment
from webapp.catalog.services import environment_probe

pytestmark = pytest.mark.django_db

INSTRUCTION = "# Say hello\nWrite <b>hi</b> into /app/hello.txt.\n"


def make_task(root: Path, name: str, toml: str, instruction: str = INSTRUCTION) -> Path:
    task = root / "tasks" / name
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text(instruction)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    return task


def make_dataset(root: Path) -> Path:
    make_task(
        root,
        "hello-world",
        (
            'version = "1.0"\n[metadata]\ndifficulty = "easy"\ncategory = "files"\n'
            'tags = ["bash", "files", "bash"]\n[verifier]\ntimeout_sec = 60.0\n'
        ),
    )
    make_task(
        root,
        "sum-numbers",
        ('version = "1.0"\n[task]\nkeywords = ["math"]\n[metadata]\ndifficulty = "medium"\n'),
        instruction="Add the numbers in /app/in.txt. " + "x" * 2000,
    )
    return root


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("harbor") / "mini-bench")


@pytest.fixture(scope="module")
def harbor_url(dataset: Path) -> Iterator[str]:
    env = {"HARBOR_STUB_DATASET": str(dataset), "MAX_CONCURRENT_ENVS": "3"}
    with run_env_server("tests.envs.harbor_stub:app", env, startup_timeout=60) as url:
        yield url


def register_harbor(api: Any, name: str, base_url: str, **fields: Any) -> Any:
    """POST a Harbor server's registration as `name`; the API's response."""
    body = {"name": name, "kind": "harbor", "base_url": base_url, **fields}
    return api.post("/api/environments/", body, format="json")


def expected_tasks(dataset: Path, *, with_toml: bool = False) -> list[dict[str, Any]]:
    """The tasks as the Task API lists them: no difficulty or tags (those are task.toml's,
    which openenv's Task API does not serve), instructions stripped and clipped. `with_toml`:
    as the folder reader reads them, with task.toml's difficulty, category and tags."""
    tasks = [
        ("hello-world", INSTRUCTION.strip(), ("easy", "files", ["bash", "files"])),
        ("sum-numbers", ("Add the numbers in /app/in.txt. " + "x" * 2000)[:299] + "…", ("medium", "", ["math"])),
    ]
    expected = []
    for index, (name, instruction, toml) in enumerate(tasks):
        difficulty, category, tags = toml if with_toml else ("", "", [])
        expected.append({
            "index": index,
            "name": name,
            "task_id": str(dataset / "tasks" / name),
            "dataset": str(dataset),
            "instruction": instruction,
            "difficulty": difficulty,
            "category": category,
            "tags": tags,
        })
    return expected


# --- the folder reader ---------------------------------------------------------------------


def test_dataset_folder_is_read_in_the_catalog_shape(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "bench")
    assert harbor_dataset_read(root) == {
        "datasets": [{"name": str(root), "num_tasks": 2}],
        "tasks": expected_tasks(root, with_toml=True),
    }


def test_grouped_dataset_links_and_limits(tmp_path: Path) -> None:
    root = tmp_path / "grouped"
    for i in range(MAX_TASKS_PER_DATASET + 5):
        make_task(root / "tasks" / "group-a", f"t{i:02d}", 'version = "1.0"\n')
    outside = make_task(tmp_path / "elsewhere", "secret", 'version = "1.0"\n')
    (root / "tasks" / "group-a" / "zz-link").symlink_to(outside, target_is_directory=True)
    read = harbor_dataset_read(root, name="grouped@1")
    # tasks/group-a/tNN: found below a group folder; the link is not followed, nor counted
    assert read["datasets"] == [{"name": "grouped@1", "num_tasks": MAX_TASKS_PER_DATASET + 5}]
    assert [t["name"] for t in read["tasks"]] == [f"t{i:02d}" for i in range(MAX_TASKS_PER_DATASET)]


def test_broken_folders_are_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"holds no Harbor task \(a folder with a task.toml\)"):
        harbor_dataset_read(tmp_path / "empty")
    make_task(tmp_path / "bad", "broken", "version = = 1\n")
    with pytest.raises(ValueError, match=r"^broken/task.toml does not parse: "):
        harbor_dataset_read(tmp_path / "bad")
    make_task(tmp_path / "badtags", "odd", "[metadata]\ntags = [1, 2]\n")
    with pytest.raises(
        HarborAnswerInvalid, match=r"^task odd 'tags' holds something other than strings$"
    ):
        harbor_dataset_read(tmp_path / "badtags")


# --- registration through a real Harbor server ---------------------------------------------


def test_registering_a_harbor_server_stores_its_catalog(
    api: Any, owner: Any, dataset: Path, harbor_url: str
) -> None:
    from openenv.harbor.capabilities import capabilities

    response = register_harbor(api, "mini-bench", harbor_url, measure_capacity=True)
    assert response.status_code == 201, response.json()
    body = response.json()
    report = capabilities(datasets=[str(dataset)], llm={}).to_dict()
    harbor = {
        "datasets": [{"name": str(dataset), "num_tasks": 2}],
        "tasks": expected_tasks(dataset),
        "harnesses": [
            {"name": h["name"], "status": h["status"], "kind": h["kind"], "dialect": h["dialect"]}
            for h in report["harnesses"]
        ],
        "sandboxes": [
            {"name": s["name"], "available": s["available"]} for s in report["sandboxes"]
        ],
    }
    assert len(harbor["harnesses"]) > 10
    assert body["kind"] == "harbor" and body["status"] == "healthy"
    # MAX_CONCURRENT_ENVS=3 on the server, measured over /ws
    assert body["capacity"] == 3
    assert body["metadata"] == {
        "name": "harbor_env",
        "style": "harbor",
        "harbor_env": "harbor_env",
        "splits": {str(dataset): 2},
        "harbor": harbor,
        "capacity_source": "probed",
    }
    assert [t["name"] for t in body["tools"]] == ["run_rollout", "capabilities", "list_tasks"]
    stored = Environment.objects.get()
    assert (stored.name, stored.kind, stored.capacity, stored.owner) == (
        "mini-bench",
        "harbor",
        3,
        owner,
    )
    assert stored.metadata == body["metadata"]

    client = Client()
    client.force_login(owner)
    page = client.get(f"/environments/{stored.pk}/").content.decode()
    rows = re.findall(r'<tr class="harbor-task"><td>(\d+)</td><td><code>(.*?)</code></td>', page)
    assert rows == [("0", "hello-world"), ("1", "sum-numbers")]
    assert html.escape(INSTRUCTION.strip()) in page and "<b>hi</b>" not in page
    assert page.count('<tr class="harbor-harness">') == len(harbor["harnesses"])
    assert page.count('<li class="harbor-sandbox">') == len(harbor["sandboxes"])
    assert 'id="measure-capacity-form"' in page and 'id="console-link"' not in page
    assert re.findall(
        r'<tr class="split-row"><td><code>(.*?)</code></td><td>(.*?)</td></tr>', page
    ) == [(str(dataset), "2")]

    # A re-probe reads the catalog again and keeps what registration set.
    assert environment_probe(environment=stored).metadata == body["metadata"]


def test_an_openenv_server_is_not_taken_for_a_harbor_one(api: Any, echo_url: str) -> None:
    response = register_harbor(api, "my-echo", echo_url)
    assert response.status_code == 400
    assert response.json() == {
        "base_url": ["the server offers no MCP tool 'run_rollout': not an OpenEnv Harbor server"]
    }
    assert Environment.objects.count() == 0


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("splits_types", "dataset 0 of /harbor_env/splits: 'name' is a number, not text"),
        (
            "huge_window",
            "the 'tasks' of /harbor_env/task_range has 500 entries; at most 20 are read",
        ),
        ("no_task_name", "task 0 of '{dataset}': 'task_name' is missing"),
        ("no_harnesses", "the capabilities report's 'harnesses' is missing"),
    ],
)
def test_bad_answers_are_refused_and_store_nothing(
    api: Any, dataset: Path, fault: str, reason: str
) -> None:
    env = {"HARBOR_STUB_DATASET": str(dataset), "HARBOR_STUB_BREAK": fault}
    with run_env_server("tests.envs.harbor_stub:app", env, startup_timeout=60) as url:
        response = register_harbor(api, "broken", url)
    assert response.status_code == 400
    assert response.json() == {
        "base_url": [
            f"the server's Harbor catalog cannot be read: {reason.format(dataset=dataset)}"
        ]
    }
    assert Environment.objects.count() == 0


def test_a_harbor_server_is_detected_without_a_kind(
    api: Any, dataset: Path, harbor_url: str
) -> None:
    response = api.post(
        "/api/environments/", {"name": "detected", "base_url": harbor_url}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["kind"] == "harbor"
    assert body["metadata"]["splits"] == {str(dataset): 2}
    assert body["metadata"]["harbor"]["tasks"] == expected_tasks(dataset)
    assert Environment.objects.get().kind == "harbor"
