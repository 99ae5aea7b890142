"""A user's run-page chart layout: its shape, the read, the write.

One layout per user, applied to every run page they open:

    {
      "metrics": ["grad_norm", "frac_reward_zero_std"],   # charts added, in page order
      "settings": {                                       # per chart, all optional
        "reward": {"smoothing": 0.6, "log_y": false, "x": "step"},
        "metric:grad_norm": {"smoothing": 0.0, "log_y": true, "x": "wall_time"}
      }
    }

A chart is named by its fixed id (webapp.runs.telemetry.charts.CHARTS) or by "metric:<key>" for an
added one. The layout comes from the browser: every part is bounded and checked, and a
rejected layout changes no row.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.contrib.auth.models import User

from webapp.accounts.models import RunChartLayout
from webapp.runs.models import MetricPoint
from webapp.runs.telemetry.charts import CHARTS

MAX_METRIC_CHARTS = 24
# A key longer than the stored ones names no metric.
MAX_KEY_LENGTH: int = MetricPoint._meta.get_field("key").max_length or 120
MAX_LAYOUT_BYTES = 16_384
MAX_SMOOTHING = 0.99
X_AXES = ("step", "wall_time")
METRIC_REF = "metric:"
SETTING_DEFAULTS: dict[str, Any] = {"smoothing": 0.0, "log_y": False, "x": "step"}
EMPTY_LAYOUT: dict[str, Any] = {"metrics": [], "settings": {}}


class RunLayoutRejected(Exception):
    """`errors` maps the part of the layout to fix ("metrics.2", "settings.reward.x") to
    what is wrong with it."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, ms in errors.items() for m in ms))
        self.errors = errors


def _fixed_chart_ids() -> tuple[str, ...]:
    return tuple(spec.id for spec in CHARTS)


def _metric_key_error(key: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return "must be a non-empty string (a metric key the run logged)"
    if len(key) > MAX_KEY_LENGTH:
        return f"must be at most {MAX_KEY_LENGTH} characters"
    if key.startswith("_"):
        return "keys starting with '_' are the lab's own bookkeeping, not charts"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        return "must not contain control characters"
    return None


def _clean_setting(ref: str, value: Any, errors: dict[str, list[str]]) -> dict[str, Any]:
    where = f"settings.{ref}"
    if not isinstance(value, dict):
        errors[where] = ["must be an object with smoothing, log_y and x"]
        return {}
    unknown = sorted(set(value) - set(SETTING_DEFAULTS))
    if unknown:
        errors[where] = [f"unknown field(s) {', '.join(unknown)}; allowed: smoothing, log_y, x"]
    cleaned = dict(SETTING_DEFAULTS)
    smoothing = value.get("smoothing", cleaned["smoothing"])
    if (
        isinstance(smoothing, bool)
        or not isinstance(smoothing, int | float)
        or not math.isfinite(smoothing)
        or not 0 <= smoothing <= MAX_SMOOTHING
    ):
        errors[f"{where}.smoothing"] = [f"must be a number from 0 to {MAX_SMOOTHING}"]
    else:
        cleaned["smoothing"] = float(smoothing)
    log_y = value.get("log_y", cleaned["log_y"])
    if not isinstance(log_y, bool):
        errors[f"{where}.log_y"] = ["must be true or false"]
    else:
        cleaned["log_y"] = log_y
    x = value.get("x", cleaned["x"])
    if x not in X_AXES:
        errors[f"{where}.x"] = [f"must be one of {', '.join(X_AXES)}"]
    else:
        cleaned["x"] = x
    return cleaned


def run_layout_clean(data: Any) -> dict[str, Any]:
    """The layout with every setting filled in, or RunLayoutRejected naming each fault."""
    errors: dict[str, list[str]] = {}
    if not isinstance(data, dict):
        raise RunLayoutRejected({"layout": ["must be an object with 'metrics' and 'settings'"]})
    try:
        size = len(json.dumps(data, allow_nan=False).encode("utf-8"))
    except (TypeError, ValueError):
        raise RunLayoutRejected({"layout": ["must be plain JSON with finite numbers"]}) from None
    if size > MAX_LAYOUT_BYTES:
        raise RunLayoutRejected({"layout": [f"is {size} bytes; at most {MAX_LAYOUT_BYTES}"]})
    unknown = sorted(set(data) - {"metrics", "settings"})
    if unknown:
        errors["layout"] = [f"unknown field(s) {', '.join(unknown)}; allowed: metrics, settings"]

    metrics = data.get("metrics", [])
    cleaned_metrics: list[str] = []
    if not isinstance(metrics, list):
        errors["metrics"] = ["must be a list of metric keys"]
    elif len(metrics) > MAX_METRIC_CHARTS:
        errors["metrics"] = [f"at most {MAX_METRIC_CHARTS} added charts; remove some"]
    else:
        for index, key in enumerate(metrics):
            problem = _metric_key_error(key)
            if problem is None and key in cleaned_metrics:
                problem = f"'{key}' is listed twice"
            if problem:
                errors[f"metrics.{index}"] = [problem]
            else:
                cleaned_metrics.append(key)

    settings = data.get("settings", {})
    cleaned_settings: dict[str, dict[str, Any]] = {}
    if not isinstance(settings, dict):
        errors["settings"] = ["must be an object: chart -> {smoothing, log_y, x}"]
    else:
        fixed = _fixed_chart_ids()
        for ref, value in settings.items():
            is_added = ref.startswith(METRIC_REF) and ref[len(METRIC_REF) :] in cleaned_metrics
            if ref not in fixed and not is_added:
                errors[f"settings.{ref[:MAX_KEY_LENGTH]}"] = [
                    f"no such chart: use one of {', '.join(fixed)}, or '{METRIC_REF}<key>' "
                    "for a key listed in metrics"
                ]
                continue
            cleaned_settings[ref] = _clean_setting(ref, value, errors)
    if errors:
        raise RunLayoutRejected(errors)
    return {"metrics": cleaned_metrics, "settings": cleaned_settings}


def run_layout_for(*, user: User) -> dict[str, Any]:
    """The user's layout, or the empty one. Settings of charts the page no longer has are
    dropped rather than failing the page."""
    row = RunChartLayout.objects.filter(user=user).first()
    if row is None or not isinstance(row.layout, dict):
        return json.loads(json.dumps(EMPTY_LAYOUT))
    stored = dict(row.layout)
    metrics = found if isinstance(found := stored.get("metrics"), list) else []
    settings = found if isinstance(found := stored.get("settings"), dict) else {}
    known = set(_fixed_chart_ids()) | {
        f"{METRIC_REF}{key}" for key in metrics if isinstance(key, str)
    }
    stored["settings"] = {ref: value for ref, value in settings.items() if ref in known}
    try:
        return run_layout_clean(stored)
    except RunLayoutRejected:
        return json.loads(json.dumps(EMPTY_LAYOUT))


def run_layout_save(*, user: User, data: Any) -> dict[str, Any]:
    """Checks and stores the layout (all of it: a PUT, not a merge) and returns it cleaned."""
    layout = run_layout_clean(data)
    RunChartLayout.objects.update_or_create(user=user, defaults={"layout": layout})
    return layout
