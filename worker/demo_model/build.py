"""Build a demo model end to end and publish it atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from .paths import MANIFEST_NAME
from .tokenizer import TEMPLATE_RESOURCE, chat_template_sha256, train_tokenizer
from .training import (
    RECIPES,
    CatchRecipe,
    Recipe,
    encode_examples,
    loosen_copying,
    new_model,
    save_and_reload,
    supervised_warmup,
)

MANIFEST_FORMAT = 1
MAX_THREADS = 2


def build_demo_model(
    output_dir: Path,
    *,
    variant: str = "demo",
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    recipe: Recipe | None = None,
) -> Path:
    """Build a tiny Qwen3 tool-calling model offline and save it to `output_dir`.

    The folder holds the model, the tokenizer (with TRL's Qwen3-Instruct-2507 chat
    template) and `envlab_demo.json`. It is assembled in a sibling temporary folder and
    renamed into place, so `output_dir` is never half-written; an existing build there is
    replaced. `recipe` replaces the variant's recipe (of the same class: say a catch-base for
    another grid, `dataclasses.replace(RECIPES["catch-base"], rows=5)`). Returns `output_dir`.
    """
    if variant not in RECIPES:
        raise ValueError(f"unknown variant {variant!r}: use one of {sorted(RECIPES)}")
    report = progress or (lambda message: None)
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.building-", dir=output_dir.parent))
    try:
        with _limited_threads(MAX_THREADS), torch.random.fork_rng(devices=[]):
            details = _build_into(
                staging, variant=variant, seed=seed, report=report, recipe=recipe
            )
        manifest = {
            "format": MANIFEST_FORMAT,
            "variant": variant,
            "seed": seed,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "build_seconds": round(time.monotonic() - started, 1),
            "versions": {name: metadata.version(name) for name in _VERSIONED},
            "chat_template": "/".join(TEMPLATE_RESOURCE),
            "chat_template_sha256": chat_template_sha256(),
            **details,
        }
        # Written last: its presence is what `is_built` checks.
        (staging / MANIFEST_NAME).write_text(
            json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
        )
        _publish(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report(f"saved {variant} model to {output_dir} in {manifest['build_seconds']:.0f}s")
    return output_dir


_VERSIONED = ("torch", "transformers", "trl", "tokenizers")


def _build_into(
    staging: Path,
    *,
    variant: str,
    seed: int,
    report: Callable[[str], None],
    recipe: Recipe | None = None,
) -> dict[str, Any]:

    from .conversations import TRAINING_WORDINGS, UNSEEN_WORDINGS
    from .evaluation import measure_tool_calls


    if recipe is not None and type(recipe) is not type(RECIPES[variant]):
        raise ValueError(f"a {variant!r} build takes a {type(RECIPES[variant]).__name__}")
    recipe = recipe or RECIPES[variant]
    torch.manual_seed(seed)
    if isinstance(recipe, CatchRecipe):
        from .catch import build_catch_into

        return build_catch_into(staging, recipe=recipe, seed=seed, report=report)
    report("training the tokenizer")
    tokenizer = train_tokenizer(vocab_size=recipe.vocab_size, seed=seed)
    model = new_model(recipe, tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    report(
        f"model: Qwen3, {recipe.num_layers} layers, {parameters:,} parameters, vocab {len(tokenizer)}"
    )
    report(f"rendering {recipe.train_examples} echo conversations")
    examples = encode_examples(tokenizer, count=recipe.train_examples, rng=random.Random(seed + 1))
    sft = supervised_warmup(
        model, examples, recipe, pad_id=tokenizer.pad_token_id, seed=seed, progress=report
    )
    loosened = None
    if recipe.loosen_steps:
        report(
            f"loosening: {recipe.loosen_steps} steps on copies exact "
            f"{recipe.exact_fraction:.0%} of the time"
        )
        imperfect = encode_examples(
            tokenizer,
            count=recipe.train_examples,
            rng=random.Random(seed + 2),
            exact_fraction=recipe.exact_fraction,
        )
        loosened = loosen_copying(
            model, imperfect, recipe, pad_id=tokenizer.pad_token_id, seed=seed, progress=report
        )
    # Measure what was saved, as a trainer will load it.
    saved_model, saved_tokenizer = save_and_reload(model, tokenizer, staging)
    report(f"measuring tool calls on {recipe.eval_samples} fresh requests")
    rates = {
        label: measure_tool_calls(
            saved_model,
            saved_tokenizer,
            samples=recipe.eval_samples,
            temperature=temperature,
            seed=seed,
            wordings=wordings,
        ).as_dict()
        for label, temperature, wordings in (
            # The demo run's own request; the unseen ones were never in training.
            ("greedy", None, TRAINING_WORDINGS[:1]),
            ("temperature_1", 1.0, TRAINING_WORDINGS[:1]),
            ("unseen_wordings_temperature_1", 1.0, UNSEEN_WORDINGS),
        )
    }
    for label, rate in rates.items():
        report(
            f"{label}: tool call {rate['tool_call_rate']:.0%}, "
            f"correct phrase {rate['correct_phrase_rate']:.0%}"
        )
    return {
        "recipe": dataclasses.asdict(recipe),
        "parameters": parameters,
        "vocab_size": len(tokenizer),
        "sft": {"examples": recipe.train_examples, "batch_size": recipe.batch_size, **sft},
        "loosen": (
            {"exact_fraction": recipe.exact_fraction, **loosened} if loosened is not None else None
        ),
        "tool_calls": rates,
    }


def _publish(staging: Path, output_dir: Path) -> None:
    """Rename `staging` to `output_dir`. A previous build is first renamed aside and
    removed after, so readers see the old model or the new one, never a mixture."""
    # mkdtemp makes the folder private (0700) and some writers leave files 0600; the web
    # process and workers may run as other users and must be able to read the model.
    staging.chmod(0o755)
    for path in staging.iterdir():
        path.chmod(0o644)
    if not output_dir.exists():
        os.replace(staging, output_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.old-", dir=output_dir.parent))
    os.replace(output_dir, retired / output_dir.name)
    os.replace(staging, output_dir)
    shutil.rmtree(retired, ignore_errors=True)


@contextmanager
def _limited_threads(limit: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(max(1, min(limit, previous)))
    try:
        yield
    finally:
        torch.set_num_threads(previous)
