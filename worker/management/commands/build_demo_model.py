"""Build an offline demo model (no network): `python manage.py build_demo_model echo`."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Build a tiny offline demo model (demo:<name>) with a locally trained tokenizer."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", nargs="?", default="echo")
        parser.add_argument("--variant", choices=["demo", "test", "catch-base"], default="demo")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--if-missing", action="store_true",
            help="do nothing when it is already built with the current recipe of this variant",
        )

    def handle(self, *args: Any, name: str, variant: str, seed: int, if_missing: bool, **options: Any) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from worker.demo_model import build_demo_model, demo_model_path, is_built

        try:
            path = demo_model_path(name, settings.MODELS_DIR)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if if_missing and is_built(path):
            stale = _stale_reason(path, variant)
            if not stale:
                self.stdout.write(f"demo:{name} is already built at {path}")
                return
            self.stdout.write(f"demo:{name} at {path} {stale}: rebuilding it")
        self.stdout.write(f"Building demo:{name} ({variant}) at {path} ...")
        build_demo_model(path, variant=variant, seed=seed, progress=lambda msg: self.stdout.write(f"  {msg}"))
        self.stdout.write(self.style.SUCCESS(f"demo:{name} ready at {path}"))


def _stale_reason(path: Any, variant: str) -> str:
    """Why a built model is not what this checkout builds ("" when it is): a build from an
    older recipe (say, a demo that copied perfectly and so taught GRPO nothing) is replaced."""
    import dataclasses

    from worker.demo_model import read_manifest
    from worker.demo_model.training import RECIPES

    try:
        built = read_manifest(path).get("recipe")
    except (OSError, ValueError):
        return "has an unreadable manifest"
    return "" if built == dataclasses.asdict(RECIPES[variant]) else f"was built with another recipe than the {variant!r} one"
