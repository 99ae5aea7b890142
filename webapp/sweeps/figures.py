"""The sweep page's figure, as a pure function of `sweep_table`'s output: Plotly parallel
coordinates, one axis per differing parameter and a last one for the chosen summary."""

from __future__ import annotations

import json
import math
from typing import Any


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _axis(label: str, values: list[Any]) -> dict[str, Any]:
    """A numeric axis where every value is a number (log10 where they are all positive and span
    more than two decades: learning rates), a categorical one (ticks named) otherwise."""
    numbers = [_number(v) for v in values]
    if all(n is not None for n in numbers):
        floats = [n for n in numbers if n is not None]
        if floats and min(floats) > 0 and max(floats) / min(floats) > 100:
            return {"label": f"log10 {label}", "values": [math.log10(n) for n in floats]}
        return {"label": label, "values": floats}
    shown = [json.dumps(v, sort_keys=True) if not isinstance(v, str) else v for v in values]
    categories = sorted(set(shown))
    axis: dict[str, Any] = {
        "label": label, "values": [categories.index(s) for s in shown],
        "tickvals": list(range(len(categories))), "ticktext": [c[:40] for c in categories],
    }
    if len(categories) == 1:
        axis["range"] = [-1, 1]
    return axis


def sweep_parallel_coordinates(*, table: dict[str, Any], stat: str = "last") -> dict[str, Any]:
    """{"data", "layout"}: one line per member that has the metric (`stat` of its summary:
    last, max or min), its parameters on the axes before the metric's, coloured by the metric."""
    metric = table["metric"]
    rows = [row for row in table["members"] if row["summary"] and _number(row["summary"].get(stat)) is not None]
    if not rows:
        return {
            "data": [],
            "layout": {"title": {"text": f"No member has logged {metric} yet"}, "height": 360},
        }
    scores = [float(row["summary"][stat]) for row in rows]
    dimensions = [_axis(path, [row["params"].get(path) for row in rows]) for path in table["paths"]]
    dimensions.append({"label": f"{metric} ({stat})", "values": scores})
    return {
        "data": [{
            "type": "parcoords",
            "line": {"color": scores, "colorscale": "Viridis", "showscale": True,
                     "colorbar": {"title": {"text": metric}}},
            "dimensions": dimensions,
            "customdata": [row["run"] for row in rows],
        }],
        "layout": {"height": 420, "margin": {"l": 80, "r": 80, "t": 60, "b": 30}},
    }
