"""The web app sends Celery tasks by name (it never imports worker code), so a name that no
worker task carries is only found when a message sits in a queue forever. Every name the web
app can send (its task constants, every `send_task(...)` call in the product code, beat's
schedule and the named routes) must be a task of the worker's Celery app."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
# The product code: whatever sends a task by name from here reaches a worker.
PRODUCT_PACKAGES = ("webapp", "worker", "envs")


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """The module's top-level `NAME = "text"` constants."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def sent_task_names() -> dict[str, str]:
    """Each `send_task(...)` call site in the product code ("path:line") and the name it sends.
    A name that is neither a string nor a module constant of the same file cannot be checked
    here: it is reported as unresolved, which fails the test below."""
    calls: dict[str, str] = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            source = path.read_text()
            if "send_task(" not in source:
                continue
            tree = ast.parse(source, filename=str(path))
            constants = _module_strings(tree)
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "send_task"
                ):
                    continue
                site = f"{path.relative_to(ROOT)}:{node.lineno}"
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    calls[site] = first.value
                elif isinstance(first, ast.Name) and first.id in constants:
                    calls[site] = constants[first.id]
                else:
                    calls[site] = f"<unresolved: {ast.unparse(first) if first else 'no name'}>"
    return calls


def worker_task_names() -> set[str]:
    """The tasks a worker process registers: its app, with its task modules imported (the app
    autodiscovers them at import; the import is repeated so that the check does not depend on
    that)."""
    import worker.tasks  # noqa: F401
    from worker.celery_app import app

    return set(app.tasks.keys())


def test_the_scan_finds_every_send_task_call_site():
    from webapp.evaluations.services import EVALUATE_TASK
    from webapp.jobs.services import JOB_TASK
    from webapp.runs.services import TRAIN_TASK
    from webapp.runs.telemetry.notify import NOTIFY_TASK

    sent = sent_task_names()

    # The four senders of the web app, each found by the scan with the constant it names: a
    # scan that missed them (or a call site moved out of reach) would check nothing.
    assert sorted(sent.values()) == sorted({TRAIN_TASK, JOB_TASK, EVALUATE_TASK, NOTIFY_TASK})
    assert {site.split(":")[0] for site in sent} == {
        "webapp/runs/services.py", "webapp/jobs/services.py", "webapp/evaluations/services.py",
        "webapp/runs/telemetry/notify.py",
    }  # fmt: skip


def test_every_task_name_the_web_app_sends_is_a_worker_task():
    from webapp.evaluations.services import EVALUATE_TASK
    from webapp.jobs.services import JOB_TASK
    from webapp.runs.services import TRAIN_TASK

    sent = {f"constant {name}": value for name, value in
            (("TRAIN_TASK", TRAIN_TASK), ("JOB_TASK", JOB_TASK), ("EVALUATE_TASK", EVALUATE_TASK))}  # fmt: skip
    sent.update({f"send_task at {site}": name for site, name in sent_task_names().items()})
    sent.update({f"beat entry {entry!r}": spec["task"]
                 for entry, spec in settings.CELERY_BEAT_SCHEDULE.items()})  # fmt: skip
    # A route keyed by a misspelled name routes nothing; patterns ("worker.tasks.*") are not names.
    sent.update({f"route {name!r}": name for name in settings.CELERY_TASK_ROUTES if "*" not in name})

    registered = worker_task_names()

    assert {where: name for where, name in sent.items() if name not in registered} == {}
    # Not a vacuous check: beat's entries and the named routes were among the names checked.
    assert {spec["task"] for spec in settings.CELERY_BEAT_SCHEDULE.values()} >= {
        "worker.tasks.sweep_stale_runs", "worker.tasks.supervise_bundled",
    }  # fmt: skip
    assert {name for where, name in sent.items() if where.startswith("route")} == {
        TRAIN_TASK, EVALUATE_TASK,
    }  # fmt: skip
