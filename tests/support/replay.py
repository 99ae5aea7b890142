"""What the replay pages (a run's rollout, an evaluation episode, side by side) load."""

from __future__ import annotations

from typing import Any

from tests.factories import EnvironmentFactory, RunFactory
from webapp.runs.models import Run


def replay_scripts(game: str, page: str) -> list[str]:
    """The ``<script src>`` list of a replay page, in load order: base.html's helpers (which
    registry.js hands the renderers), the renderer registry, the transcript, the renderer of
    ``game`` (``replay/<game>.js``), the episode and its controls, then the page's own script
    (``replay/<page>.js``)."""
    return [
        "/static/js/dom.js",
        "/static/js/http.js",
        "/static/js/replay/registry.js",
        "/static/js/replay/transcript.js",
        f"/static/js/replay/{game}.js",
        "/static/js/replay/episode.js",
        "/static/js/replay/controls.js",
        f"/static/js/replay/{page}.js",
    ]


def run_on_catch(owner: Any, environment_name: str, max_steps: int) -> Run:
    """A run of ``owner``'s on a bundled catch environment named ``environment_name`` (at an
    address nothing answers: the replay needs only its adapter); no rollouts yet."""
    environment = EnvironmentFactory(
        name=environment_name, owner=owner, metadata={"style": "bundled", "adapter": "catch"},
    )
    return RunFactory(
        owner=owner,
        name="catcher",
        max_steps=max_steps,
        config={"environments": [{"environment": environment.pk, "name": "catch"}]},
    )
