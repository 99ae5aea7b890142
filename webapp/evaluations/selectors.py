"""Reads for evaluations: who sees what, the results table (computed from the stored
episodes, by one function), the episodes page by page, and the checkpoint chart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from envs.registry import SpecTable
from envs.registry import evaluation_columns as evaluation_columns_of
from webapp.core.users import owned_or_all, owner_or_permitted
from webapp.evaluations.models import Evaluation, EvaluationEpisode

VIEW_ALL = "evaluations.view_evaluation"
CHANGE_ALL = "evaluations.change_evaluation"


def evaluations_visible_to(*, user: User | AnonymousUser) -> QuerySet[Evaluation]:
    """An evaluation is its owner's; users with evaluations.view_evaluation (or change) see
    all. Anyone else gets a 404, as if it did not exist."""
    return owned_or_all(Evaluation.objects.select_related("owner"), user=user, view=VIEW_ALL, change=CHANGE_ALL)


def evaluation_can_change(*, user: User | AnonymousUser, evaluation: Evaluation) -> bool:
    return owner_or_permitted(user=user, owner_id=evaluation.owner_id, change=CHANGE_ALL)


# Per environment: (column, what it means). Common columns come first in every table.
COMMON_COLUMNS: list[tuple[str, str]] = [
    ("model", "the model or reference policy"),
    ("episodes", "episodes played"),
    ("mean_reward", "mean episode reward"),
    ("wins", "episodes won"),
    ("tool_calls", "tool calls made, all episodes"),
    ("tool_failures", "tool calls that failed, all episodes"),
]
# Each bundled environment's own columns and how they are computed: its lab spec's `columns`.
ENVIRONMENT_COLUMNS: Mapping[str, list[tuple[str, str]]] = SpecTable(
    lambda spec: [(column.name, column.description) for column in spec.columns] or None
)


def evaluation_columns(*, key: str) -> list[str]:
    return [name for name, _ in COMMON_COLUMNS + ENVIRONMENT_COLUMNS.get(key, [])]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def results_from_episodes(
    episodes: Iterable[Mapping[str, Any]], *, key: str, labels: list[str]
) -> list[dict[str, Any]]:
    """The table, one row per model in `labels` order, from episode records (`model_index`,
    `reward`, `won`, `tool_calls`, `tool_failures`, `attributes`). The one place the
    numbers are computed: the API, the page and the CSV all read it."""
    by_model: dict[int, list[Mapping[str, Any]]] = {index: [] for index in range(len(labels))}
    for episode in episodes:
        by_model.setdefault(int(episode["model_index"]), []).append(episode)
    rows = []
    for index, label in enumerate(labels):
        played = by_model.get(index, [])
        attributes = [dict(e.get("attributes") or {}) for e in played]
        row: dict[str, Any] = {
            "model": label,
            "episodes": len(played),
            "mean_reward": _mean([float(e["reward"]) for e in played]),
            "wins": sum(1 for e in played if e["won"]),
            "tool_calls": sum(int(e["tool_calls"]) for e in played),
            "tool_failures": sum(int(e["tool_failures"]) for e in played),
        }
        for column in evaluation_columns_of(key):
            row[column.name] = column.value(played, attributes)
        rows.append(row)
    return rows


def evaluation_labels(*, evaluation: Evaluation) -> list[str]:
    return [str(entry["label"]) for entry in evaluation.model_specs]


def evaluation_results(*, evaluation: Evaluation) -> list[dict[str, Any]]:
    fields = ("model_index", "reward", "won", "tool_calls", "tool_failures", "attributes")
    episodes = EvaluationEpisode.objects.filter(evaluation=evaluation).values(*fields)
    return results_from_episodes(
        episodes, key=evaluation.environment_key, labels=evaluation_labels(evaluation=evaluation)
    )


def evaluation_progress(*, evaluation: Evaluation) -> dict[str, Any]:
    total = evaluation.total
    return {
        "done": evaluation.done,
        "total": total,
        "fraction": round(evaluation.done / total, 4) if total else 0.0,
    }


def evaluation_episodes(
    *, evaluation: Evaluation, model_index: int | None = None
) -> QuerySet[EvaluationEpisode]:
    episodes = EvaluationEpisode.objects.filter(evaluation=evaluation)
    if model_index is not None:
        episodes = episodes.filter(model_index=model_index)
    return episodes.order_by("model_index", "index")


def evaluation_checkpoint_series(*, evaluation: Evaluation) -> dict[str, Any] | None:
    """Mean reward against training step for the checkpoints of one run, and the best one
    (highest mean reward; the earliest step on a tie). None unless every model is a
    checkpoint of the same run."""
    entries = evaluation.model_specs
    runs = {entry.get("run") for entry in entries}
    if not entries or len(runs) != 1 or None in runs:
        return None
    rows = evaluation_results(evaluation=evaluation)
    points = sorted(
        (int(entry["step"]), row["mean_reward"], row["model"])
        for entry, row in zip(entries, rows, strict=True)
        if row["mean_reward"] is not None
    )
    best = max(points, key=lambda p: (p[1], -p[0])) if points else None
    return {
        "run": next(iter(runs)),
        "steps": [p[0] for p in points],
        "mean_reward": [p[1] for p in points],
        "best": {"step": best[0], "mean_reward": best[1], "model": best[2]} if best else None,
    }


def checkpoint_figure(series: dict[str, Any]) -> dict[str, Any]:
    """The Plotly figure of `evaluation_checkpoint_series`: a line over steps, the best
    checkpoint marked."""
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "mean reward",
            "x": series["steps"],
            "y": series["mean_reward"],
        }
    ]
    best = series.get("best")
    if best:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"best: step {best['step']}",
                "x": [best["step"]],
                "y": [best["mean_reward"]],
                "marker": {"size": 14, "symbol": "star"},
            }
        )
    return {
        "data": data,
        "layout": {
            "title": {"text": f"Mean reward by checkpoint (run {series['run']})"},
            "xaxis": {"title": {"text": "training step"}},
            "yaxis": {"title": {"text": "mean reward"}},
            "margin": {"t": 40, "r": 10},
        },
    }
