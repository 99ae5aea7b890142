"""Reading a Harbor catalog: an OpenEnv Harbor server's datasets, tasks and harnesses, or a
local Harbor dataset folder in the same task shape.

An OpenEnv Harbor server (openenv.harbor.serving) is an OpenEnv server named `harbor_env`:
the Task API (`GET /harbor_env/splits`, `POST /harbor_env/task_range`) lists datasets and
tasks without starting anything, and the MCP tool `capabilities` says which harnesses and
sandboxes it has. Its answers are untrusted: every field read here is type-checked and
bounded, and an answer of the wrong shape refuses the registration with a message that names
the field (the server has already answered as an environment, so saying what was wrong in
its answer tells nothing about the network).

Nothing here imports openenv or harbor: the catalog runs on the web process.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import quote

from webapp.catalog.probe_http import ProbeError, ProbeSession
from webapp.catalog.probe_result import MAX_TOOLS, ProbeResult, clean_parameters

# openenv's Harbor server registers its Task API under this name (serving.build_app).
HARBOR_ENV_NAME = "harbor_env"
ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

MAX_DATASETS = 20
MAX_TASKS_PER_DATASET = 20  # a window of each dataset is shown, not thousands of tasks
MAX_TASKS_SHOWN = 100  # over all datasets: the entry's metadata stays small
MAX_TASKS_IN_DATASET = 10_000_000
MAX_HARNESSES = 100
MAX_SANDBOXES = 30
MAX_TAGS = 8
INSTRUCTION_CHARS = 300
DATASET_CHARS = 500  # a dataset spec may be a long local path on the server
NAME_CHARS = 200
# How deep grouped datasets (`tasks/<field>/<subfield>/<task>/`) are searched, as openenv does.
_TASK_DIR_DEPTH = 6


class HarborAnswerInvalid(ProbeError, ValueError):
    """An answer (or a task folder) not in the shape of a Harbor catalog; the message names the field."""


def _clip(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {str: "text", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)


def _string(
    entry: dict[str, Any], key: str, where: str, *, limit: int, required: bool = True
) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise HarborAnswerInvalid(f"{where}: '{key}' is missing")
    if not isinstance(value, str):
        raise HarborAnswerInvalid(f"{where}: '{key}' is {_json_type(value)}, not text")
    return _clip(value.strip(), limit)


def _count(value: Any, where: str, *, limit: int) -> int:
    # bool is an int in Python; a JSON true is no count
    if value is None:
        raise HarborAnswerInvalid(f"{where} is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise HarborAnswerInvalid(f"{where} is {_json_type(value)}, not a whole number")
    if not 0 <= value <= limit:
        raise HarborAnswerInvalid(f"{where} is {value}, outside 0 to {limit}")
    return value


def _list(value: Any, where: str, *, limit: int) -> list[Any]:
    if value is None:
        raise HarborAnswerInvalid(f"{where} is missing")
    if not isinstance(value, list):
        raise HarborAnswerInvalid(f"{where} is {_json_type(value)}, not a list")
    if len(value) > limit:
        raise HarborAnswerInvalid(f"{where} has {len(value)} entries; at most {limit} are read")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HarborAnswerInvalid(f"{where} is not a JSON object")
    return value


def _tags(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    items = _list(value, where, limit=64)
    if not all(isinstance(tag, str) for tag in items):
        raise HarborAnswerInvalid(f"{where} holds something other than strings")
    out: list[str] = []
    for tag in items:
        tag = _clip(tag.strip(), 50)
        if tag and tag not in out:
            out.append(tag)
    return out[:MAX_TAGS]


# --- the shapes, shared by the server reader and the folder reader --------------------------


def clean_dataset(raw: Any, where: str) -> dict[str, Any]:
    entry = _object(raw, where)
    dataset: dict[str, Any] = {
        "name": _string(entry, "name", where, limit=DATASET_CHARS),
        "num_tasks": _count(
            entry.get("num_tasks"), f"{where} 'num_tasks'", limit=MAX_TASKS_IN_DATASET
        ),
    }
    if not dataset["name"]:
        raise HarborAnswerInvalid(f"{where}: 'name' is empty")
    error = _string(entry, "error", where, limit=300, required=False)
    if error:
        dataset["error"] = error
    return dataset


def clean_task(raw: Any, where: str) -> dict[str, Any]:
    """One task as the catalog keeps it: openenv's HarborTaskRef fields (index, task_id,
    task_name, dataset, instruction), plus difficulty, category and tags when given."""
    entry = _object(raw, where)
    task: dict[str, Any] = {
        "index": _count(entry.get("index"), f"{where} 'index'", limit=MAX_TASKS_IN_DATASET),
        "name": _string(entry, "task_name", where, limit=NAME_CHARS),
        "task_id": _string(entry, "task_id", where, limit=DATASET_CHARS, required=False),
        "dataset": _string(entry, "dataset", where, limit=DATASET_CHARS, required=False),
        "instruction": _string(
            entry, "instruction", where, limit=INSTRUCTION_CHARS, required=False
        ),
        "difficulty": _string(entry, "difficulty", where, limit=40, required=False),
        "category": _string(entry, "category", where, limit=80, required=False),
        "tags": _tags(entry.get("tags", entry.get("keywords")), f"{where} 'tags'"),
    }
    if not task["name"]:
        raise HarborAnswerInvalid(f"{where}: 'task_name' is empty")
    return task


def clean_capabilities(raw: Any) -> dict[str, Any]:
    """Harnesses and sandboxes of openenv's `capabilities` report (Capabilities.to_dict)."""
    report = _object(raw, "the capabilities report")
    harnesses = []
    for i, item in enumerate(
        _list(report.get("harnesses"), "the capabilities report's 'harnesses'", limit=MAX_HARNESSES)
    ):
        where = f"harness {i}"
        entry = _object(item, where)
        harnesses.append(
            {
                "name": _string(entry, "name", where, limit=100),
                # "validated" | "unstable:<why>" | "untested" | ...: openenv's own trust levels
                "status": _string(entry, "status", where, limit=120, required=False) or "unknown",
                "kind": _string(entry, "kind", where, limit=40, required=False),
                "dialect": _string(entry, "dialect", where, limit=60, required=False),
            }
        )
    sandboxes = []
    raw_sandboxes = report.get("sandboxes", [])
    for i, item in enumerate(
        _list(raw_sandboxes, "the capabilities report's 'sandboxes'", limit=MAX_SANDBOXES)
    ):
        where = f"sandbox {i}"
        entry = _object(item, where)
        available = entry.get("available")
        if not isinstance(available, bool):
            raise HarborAnswerInvalid(f"{where}: 'available' is not true or false")
        sandboxes.append({"name": _string(entry, "name", where, limit=60), "available": available})
    return {"harnesses": harnesses, "sandboxes": sandboxes}


# --- an OpenEnv Harbor server ---------------------------------------------------------------


def _env_name(probe: ProbeSession) -> str:
    names = probe.json("GET", "/list_environments")
    names = _list(names, "/list_environments", limit=MAX_DATASETS)
    valid = [n for n in names if isinstance(n, str) and ENV_NAME_RE.fullmatch(n)]
    if HARBOR_ENV_NAME in valid:
        return HARBOR_ENV_NAME
    if len(valid) == 1 and len(names) == 1:
        return valid[0]
    raise HarborAnswerInvalid(
        f"/list_environments does not name '{HARBOR_ENV_NAME}' (nor one environment): not an OpenEnv Harbor server"
    )


def _tool_result(answer: Any, tool: str) -> Any:
    """The JSON an MCP `tools/call` answer carries: the tool returns JSON text, which the
    server wraps as a string, as text content, or as structured content."""
    answer = _object(answer, f"the answer to tools/call {tool}")
    if answer.get("error") is not None:
        error = answer["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise HarborAnswerInvalid(f"the server's '{tool}' tool failed: {_clip(str(message), 300)}")
    result = answer.get("result")
    if isinstance(result, dict):
        content = result.get("content")
        structured = result.get("structured_content") or result.get("structuredContent")
        if isinstance(content, list) and content and isinstance(content[0], dict):
            result = content[0].get("text")
        elif isinstance(structured, dict) and isinstance(structured.get("result"), str):
            result = structured["result"]
        elif isinstance(result.get("data"), str):
            result = result["data"]
    if isinstance(result, str):
        try:
            return json.loads(result)
        except ValueError:
            raise HarborAnswerInvalid(f"the server's '{tool}' tool did not return JSON") from None
    return result


def harbor_server_read(probe: ProbeSession) -> dict[str, Any]:
    """Datasets, a window of each one's tasks, harnesses and sandboxes of an OpenEnv Harbor
    server, checked; HarborAnswerInvalid (a ProbeError) when an answer is not that shape."""
    env = _env_name(probe)
    prefix = f"/{quote(env, safe='')}"
    datasets = [
        clean_dataset(item, f"dataset {i} of {prefix}/splits")
        for i, item in enumerate(
            _list(probe.json("GET", f"{prefix}/splits"), f"{prefix}/splits", limit=MAX_DATASETS)
        )
    ]
    if not datasets:
        raise HarborAnswerInvalid(
            f"{prefix}/splits lists no dataset: the server was started with none"
        )
    tasks: list[dict[str, Any]] = []
    for dataset in datasets:
        size = min(MAX_TASKS_PER_DATASET, MAX_TASKS_SHOWN - len(tasks))
        if dataset.get("error") or not dataset["num_tasks"] or size <= 0:
            continue
        answer = _object(
            probe.json(
                "POST", f"{prefix}/task_range", {"split": dataset["name"], "start": 0, "stop": size}
            ),
            f"{prefix}/task_range",
        )
        window = _list(answer.get("tasks"), f"the 'tasks' of {prefix}/task_range", limit=size)
        tasks += [
            clean_task(item, f"task {i} of '{dataset['name']}'") for i, item in enumerate(window)
        ]
    capabilities = clean_capabilities(
        _tool_result(
            probe.json(
                "POST",
                "/mcp",
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "capabilities", "arguments": {}},
                },
            ),
            "capabilities",
        )
    )
    return {"env_name": env, "datasets": datasets, "tasks": tasks, **capabilities}


def _mcp_tools(probe: ProbeSession) -> list[dict[str, Any]]:
    try:
        answer = probe.json(
            "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        )
    except ProbeError:
        if probe.expired:
            raise
        answer = None
    result = answer.get("result") if isinstance(answer, dict) else None
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list) or not any(
        isinstance(t, dict) and t.get("name") == "run_rollout" for t in tools[:MAX_TOOLS]
    ):
        raise ProbeError(
            "the server offers no MCP tool 'run_rollout': not an OpenEnv Harbor server"
        )
    return [
        {
            "name": _clip(t["name"], 100),
            "description": _clip(t["description"], 2000)
            if isinstance(t.get("description"), str)
            else "",
            "parameters": clean_parameters(t.get("inputSchema", t.get("input_schema"))),
        }
        for t in tools[:MAX_TOOLS]
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]


def harbor_probe(probe: ProbeSession) -> ProbeResult:
    """An OpenEnv Harbor server: healthy, offering `run_rollout` over MCP, and its catalog
    readable; nothing is started on it (a Task API read boots no sandbox)."""
    health = probe.read_health()
    tools = _mcp_tools(probe)
    try:
        catalog = harbor_server_read(probe)
    except HarborAnswerInvalid as exc:
        raise ProbeError(f"the server's Harbor catalog cannot be read: {exc}") from None
    healthy = str(health.get("status")).lower() in ("healthy", "ok")
    return ProbeResult(
        healthy=healthy,
        kind="harbor",
        tools=tools,
        metadata={
            "name": catalog["env_name"],
            "style": "harbor",
            "harbor_env": catalog["env_name"],
            # The detail page's splits table: a Harbor split is a dataset.
            "splits": {d["name"]: d["num_tasks"] for d in catalog["datasets"]},
            "harbor": {k: catalog[k] for k in ("datasets", "tasks", "harnesses", "sandboxes")},
        },
        # The status text is the server's: not repeated, it could be anything.
        error="" if healthy else "/health does not report the server healthy",
    )


# --- a local Harbor dataset folder ----------------------------------------------------------


def _task_dirs(root: Path) -> list[Path]:
    """Task folders (each holds a task.toml) under `root/tasks` or `root`, by name; grouped
    datasets (`tasks/<group>/<task>/`) are searched a few levels deep. Links are not followed:
    they can lead outside the dataset."""
    base = root / "tasks" if (root / "tasks").is_dir() else root
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.is_symlink() or not path.is_dir():
                continue
            if (path / "task.toml").is_file() and not (path / "task.toml").is_symlink():
                found.append(path)
            elif depth < _TASK_DIR_DEPTH:
                walk(path, depth + 1)

    walk(base, 1)
    return found


def _read_small(path: Path, limit: int) -> str:
    if not path.is_file() or path.is_symlink():
        return ""
    with path.open("rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")


def harbor_dataset_read(root: Path | str, *, name: str = "") -> dict[str, Any]:
    """A Harbor dataset folder read into the catalog's shape (as `harbor_server_read`, without
    harnesses): each task's `task.toml` (`[metadata]` difficulty, category, tags; `[task]`
    keywords) and the start of its `instruction.md`. ValueError when it holds no task or a
    `task.toml` that does not parse."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder")
    dirs = _task_dirs(root)
    if not dirs:
        raise ValueError(f"{root} holds no Harbor task (a folder with a task.toml)")
    spec = _clip(name or str(root), DATASET_CHARS)
    tasks = []
    for index, task_dir in enumerate(dirs[:MAX_TASKS_PER_DATASET]):
        try:
            doc = tomllib.loads(_read_small(task_dir / "task.toml", 256 * 1024))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{task_dir.name}/task.toml does not parse: {exc}") from None
        meta = found if isinstance(found := doc.get("metadata"), dict) else {}
        section = found if isinstance(found := doc.get("task"), dict) else {}
        tags = meta.get("tags") if meta.get("tags") is not None else section.get("keywords")
        raw = {
            "index": index,
            "task_name": task_dir.name,
            "task_id": str(task_dir),
            "dataset": spec,
            "instruction": _read_small(task_dir / "instruction.md", INSTRUCTION_CHARS * 4),
            "difficulty": meta.get("difficulty")
            if isinstance(meta.get("difficulty"), str)
            else None,
            "category": meta.get("category") if isinstance(meta.get("category"), str) else None,
            "tags": tags if isinstance(tags, list | str) else None,
        }
        tasks.append(clean_task(raw, f"task {task_dir.name}"))
    return {"datasets": [{"name": spec, "num_tasks": len(dirs)}], "tasks": tasks}
