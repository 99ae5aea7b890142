"""OpenEnv environment servers bundled with envlab."""

from __future__ import annotations

import os
import sys

WEB_UI_FLAG = "ENABLE_WEB_INTERFACE"  # openenv's switch for its Gradio page at /web (off by default)


def skip_openenv_web_ui() -> bool:
    """Keep openenv from importing Gradio where its web page is off (True when it will not).

    `import openenv.core` imports the Gradio web interface (about 4 of its 6 seconds of imports
    here), which every environment server, worker, training process and web process would pay
    at start, though only a server with ENABLE_WEB_INTERFACE set ever serves it. openenv
    imports that module inside `except ModuleNotFoundError` and reaches Gradio only when the
    flag is on, so marking Gradio absent (Python raises ModuleNotFoundError for a None in
    sys.modules) leaves openenv whole but for the page nobody asked for. Nothing in the lab
    imports Gradio; with the flag on, this does nothing."""
    if os.environ.get(WEB_UI_FLAG, "false").strip().lower() in ("true", "1", "yes"):
        return False
    if "gradio" in sys.modules:
        return sys.modules["gradio"] is None
    sys.modules["gradio"] = None  # type: ignore[assignment]  # None is the import system's "absent" marker
    return True


skip_openenv_web_ui()
