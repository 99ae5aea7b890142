"""The fast "test" variant of the echo demo model, as the tests that play or train with it use."""

from __future__ import annotations

import os

from django.conf import settings


def built_demo_echo() -> str:
    """Build the test variant into MODELS_DIR unless it is there already (later sessions reuse
    it from var/test-models) and return its model name, ``demo:echo``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from worker.demo_model import build_demo_model, demo_model_path, is_built

    path = demo_model_path("echo", settings.MODELS_DIR)
    if not is_built(path):
        build_demo_model(path, variant="test", seed=0)
    return "demo:echo"
