"""`python -m worker.demo_model OUTPUT_DIR [--variant test|demo] [--seed N]`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .paths import read_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker.demo_model",
        description="Build the offline demo model (tiny Qwen3 that calls an echo tool).",
    )
    parser.add_argument("output_dir", type=Path, help="folder to write (replaced if it exists)")
    parser.add_argument("--variant", choices=("test", "demo", "catch-base"), default="demo")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    # No model hub here: everything is built locally.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from .build import build_demo_model

    def progress(message: str) -> None:
        print(message, flush=True)

    path = build_demo_model(
        args.output_dir, variant=args.variant, seed=args.seed, progress=progress
    )
    rates = read_manifest(path)["tool_calls"]
    print(
        "tool calls: "
        + ", ".join(
            f"{label} {rate['tool_call_rate']:.0%}"
            + (
                f" (correct {rate['correct_phrase_rate']:.0%})"
                if "correct_phrase_rate" in rate
                else f" (moves {rate.get('moves')})"
            )
            for label, rate in rates.items()
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
