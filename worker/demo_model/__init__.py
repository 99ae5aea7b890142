"""Offline demo-model builder: a tiny Qwen3 model that calls an echo tool, built with no network.

`build_demo_model` trains a byte-level BPE tokenizer and a two-layer Qwen3 causal LM on
synthetic echo-tool conversations rendered with TRL's Qwen3-Instruct-2507 chat template
(read verbatim from the installed trl), so TRL's GRPOTrainer recognises the template and
parses the model's tool calls. Importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .paths import DEMO_PREFIX, MANIFEST_NAME, demo_model_path, is_built, read_manifest

if TYPE_CHECKING:
    from .build import build_demo_model
    from .conversations import echo

__all__ = [
    "DEMO_PREFIX",
    "MANIFEST_NAME",
    "build_demo_model",
    "demo_model_path",
    "echo",
    "is_built",
    "read_manifest",
]


def __getattr__(name: str) -> Any:
    # torch and transformers load only when a build is asked for, so a web process or a
    # Celery parent can import the path helpers without them (and without torch's fork hazard).
    if name == "build_demo_model":
        from .build import build_demo_model

        return build_demo_model
    if name == "echo":
        from .conversations import echo

        return echo
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
