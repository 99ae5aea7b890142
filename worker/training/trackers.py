"""Other trackers a run reports to (`report_to` in the run config), beside envlab's own capture.

transformers' callbacks read their settings from the environment when training starts, so the
run's process gets, for each tracker the run names, where it keeps its files: trackio the lab's
one trackio folder (ENVLAB_TRACKIO_DIR, project "envlab", a run per envlab run, read with
`trackio show` there; set when the worker starts, worker/celery_app.py, since TRL imports trackio), wandb offline in the run's folder, mlflow and tensorboard folders in the
run's folder. A variable the worker was started with wins (an operator's WANDB_MODE=online with
WANDB_API_KEY, an MLFLOW_TRACKING_URI). Credentials come from the worker's environment or, where
it has none, from the run owner's stored secrets (`wandb_api_key`, account page), never from a
run config; a key one run was given is taken away before the next run in the same process.
W&B stays offline unless the operator's WANDB_MODE says otherwise, key or no key. A tracker
whose package is not installed on the worker fails the run at its start with what to install.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

# The worker's own environment, before any run set something.
_OPERATOR = frozenset(os.environ)
PACKAGES = {"trackio": "trackio", "wandb": "wandb", "mlflow": "mlflow", "tensorboard": "tensorboard"}


# Credential variables a run may be given from its owner's secrets: {variable: secret name}.
USER_CREDENTIALS = {"WANDB_API_KEY": "wandb_api_key"}


def tracker_environment(
    report_to: list[str], *, output_dir: Path, trackio_dir: Path, credentials: dict[str, str] | None = None
) -> dict[str, str]:
    """The variables the run's trackers read, where the operator set none. `credentials`: the
    owner's stored keys by variable (USER_CREDENTIALS), for the trackers the run names."""
    wanted: dict[str, str] = {}
    if "wandb" in report_to and (credentials or {}).get("WANDB_API_KEY"):
        wanted["WANDB_API_KEY"] = (credentials or {})["WANDB_API_KEY"]
    if "trackio" in report_to:
        wanted["TRACKIO_DIR"] = str(trackio_dir)
    if "wandb" in report_to:
        wanted.update(WANDB_MODE="offline", WANDB_DIR=str(output_dir), WANDB_PROJECT="envlab")
    if "mlflow" in report_to:
        wanted["MLFLOW_TRACKING_URI"] = (output_dir / "mlruns").as_uri()
    if "tensorboard" in report_to:
        wanted["TENSORBOARD_LOGGING_DIR"] = str(output_dir / "tensorboard")
    return {key: value for key, value in wanted.items() if key not in _OPERATOR}


def missing_packages(report_to: list[str]) -> list[str]:
    return [PACKAGES[name] for name in report_to if importlib.util.find_spec(PACKAGES[name]) is None]


def prepare_trackers(
    config: Any, *, output_dir: Path, trackio_dir: Path, credentials: dict[str, str] | None = None
) -> None:
    """Set the run's tracker variables in this process (one run at a time per worker process),
    or raise when a tracker cannot run here. A credential an earlier run was given goes first."""
    for variable in USER_CREDENTIALS:
        if variable not in _OPERATOR:
            os.environ.pop(variable, None)
    if not config.report_to:
        return
    missing = missing_packages(list(config.report_to))
    if missing:
        raise RuntimeError(
            f"report_to names {', '.join(missing)}, which this worker does not have: install it on the worker "
            f"(pip install {' '.join(missing)}) or leave it out of report_to"
        )
    os.environ.update(tracker_environment(
        list(config.report_to), output_dir=output_dir, trackio_dir=trackio_dir, credentials=credentials
    ))
