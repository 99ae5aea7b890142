"""How an owner files their runs: the name, tags, group and notes they edit, and deleting a
finished run with everything it recorded (its rows and its folder under RUNS_DIR)."""

from __future__ import annotations

import logging
import re
import shutil
from typing import Any

from django.db import transaction

from webapp.core.errors import InvalidInput
from webapp.runs.checkpoints import run_dir
from webapp.runs.models import GROUP_MAX_LENGTH, TAG_MAX_LENGTH, Run, RunTag
from webapp.runs.services import RunStateError

logger = logging.getLogger(__name__)

NAME_MAX_LENGTH = 120
NOTES_MAX_LENGTH = 10_000
MAX_TAGS = 20
TAG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$")
EDITABLE = ("name", "tags", "group", "notes")


class RunLabelsRejected(InvalidInput):
    """An edit of a run's name, tags, group or notes that is refused; nothing was written."""


def _control_characters(text: str) -> bool:
    return any(ord(ch) < 32 and ch not in "\n\r\t" for ch in text)


def _single_line(field: str, value: Any, limit: int, *, blank: bool) -> tuple[str, list[str]]:
    if not isinstance(value, str):
        return "", [f"{field} must be a string"]
    text = value.strip()
    if not text and not blank:
        return "", [f"{field} cannot be blank"]
    if len(text) > limit:
        return "", [f"at most {limit} characters (this one has {len(text)})"]
    if _control_characters(text) or "\n" in text or "\r" in text or "\t" in text:
        return "", ["one line of text, without control characters"]
    return text, []


def run_tags_clean(value: Any) -> tuple[list[str], list[str]]:
    """The tags as stored (each once, in the order given) and what is wrong with them."""
    if not isinstance(value, list):
        return [], ["a list of tags, e.g. [\"baseline\", \"lr-sweep\"]"]
    tags: list[str] = []
    for index, tag in enumerate(value):
        if not isinstance(tag, str) or not TAG_RE.match(tag) or len(tag) > TAG_MAX_LENGTH:
            shown = tag if isinstance(tag, str) else type(tag).__name__
            return [], [
                f"tag {index} ({shown[:60]!r}) is not a slug: lowercase letters, digits, '-' and '_', "
                f"starting and ending with a letter or digit, at most {TAG_MAX_LENGTH} characters"
            ]
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        return [], [f"at most {MAX_TAGS} tags on a run (this asks for {len(tags)})"]
    return tags, []


def run_labels_check(*, data: Any) -> dict[str, Any]:
    """The validated edit: the subset of name, tags, group and notes that `data` gives.
    Raises RunLabelsRejected naming every field to fix."""
    if not isinstance(data, dict):
        raise RunLabelsRejected({"non_field_errors": [
            'the body must be a JSON object with any of "name", "tags", "group", "notes"'
        ]})
    errors: dict[str, list[str]] = {}
    unknown = sorted(str(key) for key in data if key not in EDITABLE)
    if unknown:
        errors["non_field_errors"] = [
            f"only {', '.join(EDITABLE)} can be edited; not {', '.join(unknown)}"
        ]
    clean: dict[str, Any] = {}
    checks = {
        "name": lambda v: _single_line("name", v, NAME_MAX_LENGTH, blank=False),
        "group": lambda v: _single_line("group", v, GROUP_MAX_LENGTH, blank=True),
        "tags": run_tags_clean,
    }
    for field in EDITABLE:
        if field not in data:
            continue
        value = data[field]
        if field == "notes":
            if not isinstance(value, str):
                errors[field] = ["notes must be a string"]
            elif len(value) > NOTES_MAX_LENGTH:
                errors[field] = [f"at most {NOTES_MAX_LENGTH} characters (these have {len(value)})"]
            elif "\x00" in value:
                errors[field] = ["text cannot hold NUL characters (\\u0000)"]
            else:
                clean[field] = value
            continue
        cleaned, problems = checks[field](value)
        if problems:
            errors[field] = problems
        else:
            clean[field] = cleaned
    if errors:
        raise RunLabelsRejected(errors)
    return clean


@transaction.atomic
def run_labels_update(*, run: Run, data: Any) -> Run:
    """Set the name, tags (replaced whole), group and notes that `data` gives; any run state.
    All or nothing: one refused field writes none of them."""
    changes = run_labels_check(data=data)
    run = Run.objects.select_for_update().get(pk=run.pk)
    fields = [field for field in ("name", "group", "notes") if field in changes]
    for field in fields:
        setattr(run, field, changes[field])
    if fields:
        run.save(update_fields=fields)
    if "tags" in changes:
        RunTag.objects.filter(run=run).exclude(slug__in=changes["tags"]).delete()
        have = set(RunTag.objects.filter(run=run).values_list("slug", flat=True))
        RunTag.objects.bulk_create([RunTag(run=run, slug=tag) for tag in changes["tags"] if tag not in have])
    return run


def run_delete(*, run: Run) -> None:
    """Remove a finished run: its rows (metrics, rollouts, events, tags...) and then its folder
    (checkpoints, the warm-up's model, logs). Refused (RunStateError, nothing removed) while it
    is queued or running, and while queued or running work trains or plays from one of its
    checkpoints: the folder is what they read."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status in Run.ACTIVE:
            raise RunStateError(f"a {run.status} run cannot be deleted: cancel it, or wait until it ends")
        users = list(
            Run.objects.filter(status__in=Run.ACTIVE, model__startswith=f"run:{run.pk}@")
            .order_by("pk").values_list("pk", flat=True)
        )
        if users:
            raise RunStateError(
                f"run {users[0]} trains from a checkpoint of this run: delete it when that run has ended"
            )
        # Through the reverse relation: runs sits below evaluations and does not import it.
        evaluations = run.checkpoint_evaluations
        evaluating = (
            evaluations.filter(status__in=evaluations.model.ACTIVE).order_by("pk").values_list("pk", flat=True).first()
        )
        if evaluating is not None:
            raise RunStateError(
                f"evaluation {evaluating} plays this run's checkpoints: delete it when that evaluation has ended"
            )
        run_id = run.pk
        run.delete()
    # After the commit: a delete that rolled back must not have taken the files with it.
    folder = run_dir(run_id)
    try:
        shutil.rmtree(folder)
    except FileNotFoundError:
        pass
    except OSError:
        logger.exception("run %s: its rows are deleted, but its folder %s could not be removed", run_id, folder)
