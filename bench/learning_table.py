"""`python -m bench.learning_table` (`make learning-table`): the guide's table, base / SFT /
SFT + GRPO on Catch, measured through the lab's own REST API and a real worker.

Per seed: build the `catch-base` demo model (seeded, for the chosen grid) -> evaluate it ->
an SFT warm-up run on solver episodes (`grpo: null`) -> evaluate its checkpoint 0 -> a GRPO
run from that checkpoint -> evaluate its last checkpoint. Every evaluation plays the same
greedy, seeded episodes (`--eval-seed`). Then it prints the table (catches per row per
seed, mean +- std over seeds, the GRPO gain against the spread between seeds) and writes it
to bench/results/learning_table.json, from which BENCHMARKS.md's section is re-rendered.

By default it runs in a scratch installation of its own, like `make bench`: a SQLite
database, runs and models under `<var>/learning-table/`, its own Redis database, the web
server (uvicorn), one worker (queues train and default) and the bundled catch server (the
app's launcher, webapp.catalog.bundled), all stopped at the end; the command re-executes
itself inside that installation. With `--url` it drives a lab that is already running,
with `--token` (the base models are then built into this checkout's MODELS_DIR, which must
be the lab's: same machine, same settings).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from envs.wordle.lab import LAB as WORDLE

SCRATCH_MARK = "ENVLAB_LEARNING_TABLE_SCRATCH"
DEFAULT_REDIS_DB = 11  # the app uses 0, bench 8, the tests 9 (webapp/settings/test.py)
CATCH_PROMPT = "Catch the ball: use move or stay."  # worker/demo_model/catch.py's prompt
RECIPE_NAME = "catch-unfinished-minus-one"
WORDLE_RECIPE_NAME = "wordle-win-or-greens"
# A ball that has not landed when the episode ends scores -1 like a miss (the env reward
# gives it 0, which beats a miss: a run can learn to stop calling tools).
UNFINISHED_MINUS_ONE = [
    {
        "name": "outcome_or_minus_one",
        "kind": "expression",
        "weight": 1.0,
        "params": {"expression": "reward if reward != 0 else -1"},
    }
]
ENV_REWARD = [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}]
# Wordle: 1 for the word, else a tenth of the most greens one guess got (0 to 0.5), so a
# model that never wins still has something to climb (a tiny model wins almost never).
WIN_OR_GREENS = [
    {"name": "env_reward", "kind": "env_reward", "weight": 1.0},
    {"name": "greens", "kind": "partial_credit", "weight": 1.0,
     "params": {"attribute": "best_greens", "scale": 0.1}},
]


@dataclasses.dataclass(frozen=True)
class Game:
    """What the table needs of a bundled game: its server key, the prompt, the evaluation
    column that counts (per model, of `episodes`), how a base model is made, and the reward."""

    key: str
    prompt: str
    score: str  # the evaluation result's column: "catches" (Catch's own) or "wins"
    score_label: str
    base: str  # the demo-model variant built per seed as the base model
    base_label: str
    # The shaped reward (--reward unfinished-minus-one, the default): a recipe stored by name.
    recipe_name: str
    recipe_description: str
    recipe_terms: list[dict[str, Any]]
    # A second evaluation column kept per model and shown SFT -> SFT+GRPO in a search's
    # table, where the score alone says little (a tiny model finds no Wordle word).
    extra: str = ""


GAMES = {
    "catch": Game("catch", CATCH_PROMPT, "catches", "Catches", "catch-base",
                  "`catch-base` demo model (knows the move tool, not the game)",
                  RECIPE_NAME, "Catch: the env reward, an unfinished episode -1", UNFINISHED_MINUS_ONE),
    # The tests' echo model (the demo architecture, 200 steps: minutes to build where `demo` takes
    # an hour on a loaded 2-core machine) knows the tool-call format and nothing of Wordle.
    "wordle": Game("wordle", WORDLE.prompt or "", "wins", "Words found", "test",
                   "`test` echo model (knows the tool-call format, not Wordle)",
                   WORDLE_RECIPE_NAME, "Wordle: 1 for the word, else 0.1 x best greens", WIN_OR_GREENS, "best_greens"),
}
TERMINAL = ("succeeded", "failed", "cancelled")
# What a GRPO run's metrics say about why it learned or did not (TRL's names): the share of
# groups whose completions all scored the same (no advantage, no gradient), the policy's
# entropy, and its KL to the reference (logged when beta > 0).
DIAGNOSTIC_KEYS = ("reward", "frac_reward_zero_std", "entropy", "kl")
# The target: SFT+GRPO beats SFT by at least 2 standard errors of the mean gain over
# seeds, and by at least this many catches.
TARGET_CATCHES = 3
# The options the command hands on to its run in the scratch installation (--quick apart):
# every Settings field is one (tested).
FORWARDED = ("game", "seeds", "episodes", "eval_seed", "rows", "columns", "base_layers", "warmup_episodes",
             "warmup_epochs", "warmup_learning_rate", "grpo_steps", "grpo_batch", "num_generations",
             "grpo_learning_rate", "temperature", "max_completion_length", "tool_rounds", "reward", "grpo_grid",
             "output", "dir")
# A grid may not search what the table itself varies.
GRID_RESERVED = ("grpo.seed", "model", "environments", "name", "rewards")
# How long each service may take to come up (a loaded 2-core machine takes minutes to import torch).
START_SECONDS = 300.0


@dataclasses.dataclass(frozen=True)
class Settings:
    seeds: list[int]
    episodes: int
    eval_seed: int
    rows: int
    columns: int
    warmup_episodes: int
    warmup_epochs: int
    warmup_learning_rate: float
    grpo_steps: int
    grpo_batch: int
    num_generations: int
    grpo_learning_rate: float
    temperature: float
    max_completion_length: int
    tool_rounds: int
    reward: str
    quick: bool
    # GRPO settings searched per seed ({dotted run-config path: values}), one sweep per seed
    # through the API; empty: the one recipe above (a sweep of one run).
    grpo_grid: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    game: str = "catch"
    # The catch-base model's transformer layers (0: its recipe's, 2): a search over model size.
    base_layers: int = 0

    @property
    def played(self) -> Game:
        return GAMES[self.game]

    def reset(self) -> dict[str, int]:
        """The reset options of every episode (Catch's grid; Wordle takes none)."""
        return {"rows": self.rows, "columns": self.columns} if self.game == "catch" else {}

    def base_recipe(self) -> Any:
        from worker.demo_model.training import CATCH_BASE, RECIPES

        if self.game != "catch":
            return RECIPES[self.played.base]
        recipe = dataclasses.replace(CATCH_BASE, rows=self.rows, columns=self.columns)
        if self.base_layers:
            recipe = dataclasses.replace(recipe, num_layers=self.base_layers)
        if self.quick:  # a smoke check: a model that barely learned the format
            recipe = dataclasses.replace(
                recipe, train_examples=48, max_steps=12, cooldown_steps=4, warmup_steps=2,
                eval_samples=2,
            )
        return recipe


# The SFT warm-up the guide's table uses (the options' defaults); a search from another SFT
# model is recorded under a name that says so (_default_output).
SFT_DEFAULTS = {"warmup_episodes": 300, "warmup_epochs": 3, "warmup_learning_rate": 3e-3}
SFT_NAMED = (("warmup_episodes", "sftepisodes"), ("warmup_epochs", "sftepochs"), ("warmup_learning_rate", "sftlr"))
QUICK = {
    "episodes": 4, "warmup_episodes": 8, "warmup_epochs": 1, "grpo_steps": 2, "grpo_batch": 4,
    "num_generations": 2, "max_completion_length": 96,
}


class Command(BaseCommand):
    help = (
        "Measure the guide's table on Catch (base / SFT warm-up / SFT + GRPO, catches of greedy "
        "seeded episodes) through the REST API with a real worker; print it and record it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--game", default="catch", choices=sorted(GAMES),
                            help="the bundled game (catch: the guide's table; wordle: the second game searched)")
        parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (base build, warm-up, GRPO)")
        parser.add_argument("--episodes", type=int, default=30, help="evaluation episodes per model")
        parser.add_argument("--eval-seed", type=int, default=1000, help="seed of the evaluation episodes")
        parser.add_argument("--rows", type=int, default=4, help="catch grid rows (moves = rows - 1)")
        parser.add_argument("--columns", type=int, default=3, help="catch grid columns")
        parser.add_argument("--base-layers", type=int, default=0,
                            help="transformer layers of the catch-base model (default: its recipe's, 2)")
        parser.add_argument("--warmup-episodes", type=int, default=SFT_DEFAULTS["warmup_episodes"],
                            help="solver episodes of the SFT warm-up")
        parser.add_argument("--warmup-epochs", type=int, default=SFT_DEFAULTS["warmup_epochs"])
        parser.add_argument("--warmup-learning-rate", type=float, default=SFT_DEFAULTS["warmup_learning_rate"])
        parser.add_argument("--grpo-steps", type=int, default=20)
        parser.add_argument("--grpo-batch", type=int, default=16, help="completions per GRPO step")
        parser.add_argument("--num-generations", type=int, default=8)
        parser.add_argument("--grpo-learning-rate", type=float, default=1e-3)
        parser.add_argument("--temperature", type=float, default=1.0)
        parser.add_argument("--max-completion-length", type=int, default=384)
        parser.add_argument("--tool-rounds", type=int, default=5, help="max tool-calling iterations")
        parser.add_argument(
            "--reward", choices=["unfinished-minus-one", "env"], default="unfinished-minus-one",
            help="GRPO reward: the game's shaped reward (default; Catch: an unfinished episode scored -1; Wordle: "
                 "0.1 x best greens when the word is not found), or the plain env reward",
        )
        parser.add_argument(
            "--grpo-grid", default="",
            help='GRPO settings to search, as a sweep per seed from its SFT checkpoint: JSON {dotted run-config '
                 'path: [values]}, e.g. \'{"grpo.learning_rate": [1e-4, 3e-4]}\' (default: the one recipe given)',
        )
        parser.add_argument("--quick", action="store_true", help="a tiny smoke check (minutes, numbers meaningless)")
        parser.add_argument("--output", default="", help="where to write the JSON (default: bench/results/learning_table.json; --quick: <dir>/learning_table.quick.json)")
        parser.add_argument("--dir", default="", help="scratch installation folder (default: <var>/learning-table)")
        parser.add_argument("--redis-url", default="", help=f"Redis of the scratch installation (default: REDIS_URL's server, database {DEFAULT_REDIS_DB})")
        parser.add_argument("--url", default="", help="drive the lab running at this URL instead of a scratch installation")
        parser.add_argument("--token", default=os.environ.get("ENVLAB_TOKEN", ""), help="API token for --url (default: $ENVLAB_TOKEN)")
        parser.add_argument("--environment", type=int, default=0, help="with --url: the catch environment's id (default: the one named 'catch')")

    def handle(self, *args: Any, **options: Any) -> None:
        chosen = _settings(options)
        if options["url"]:
            if not options["token"]:
                raise CommandError("--url needs --token (or ENVLAB_TOKEN): POST /api/auth/token/ gives one")
            api = HttpApi(options["url"], options["token"])
            output = _output_path(options, chosen, scratch=None)
            self._measure(api, chosen, output, environment=options["environment"] or None)
            return
        scratch = Path(options["dir"] or Path(settings.VAR_DIR) / "learning-table").resolve()
        if os.environ.get(SCRATCH_MARK) != str(scratch):
            self._rerun_in_scratch(scratch, options)
            return
        self._in_scratch(scratch, chosen, _output_path(options, chosen, scratch=scratch))

    # --- the scratch installation ------------------------------------------------------

    def _rerun_in_scratch(self, scratch: Path, options: dict[str, Any]) -> None:
        """Run this command again with the scratch installation's settings."""
        scratch.mkdir(parents=True, exist_ok=True)
        db = scratch / "db.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        env = {
            **os.environ,
            SCRATCH_MARK: str(scratch),
            "DJANGO_SETTINGS_MODULE": "webapp.settings.local",
            "ENVLAB_VAR_DIR": str(scratch),
            "DATABASE_URL": f"sqlite:///{db}",
            "REDIS_URL": _redis_url(options["redis_url"]),
            # The scratch models folder keeps built base models between runs of the command.
            "ENVLAB_MODELS_DIR": str(scratch / "models"),
            "ENVLAB_RUNS_DIR": str(scratch / "runs"),
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "PYTHONUNBUFFERED": "1",
            "DEBUG": "0",
        }
        # The worker is the one busy process while it trains (the base build runs before).
        env.setdefault("ENVLAB_TORCH_THREADS", "2")
        env.pop("CELERY_BROKER_URL", None)
        argv = [sys.executable, "-m", "bench.learning_table"]
        for name in FORWARDED:
            value = options[name] if name != "dir" else str(scratch)
            if value not in ("", None):
                argv += [f"--{name.replace('_', '-')}", str(value)]
        if options["quick"]:
            argv.append("--quick")
        child = subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env)
        # A SIGTERM to this command reaches the scratch child, which stops its services.
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signal.SIGTERM))
        try:
            code = child.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
        if code:
            raise CommandError(f"the learning table failed (exit {code}); logs in {scratch / 'log'}")

    def _in_scratch(self, scratch: Path, chosen: Settings, output: Path) -> None:
        started = time.monotonic()
        # Killed (SIGTERM), the table still stops the web server, worker and game server it
        # started (the `finally` below): left running, a worker would take the next table's tasks.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        _reset_stores()
        token, log_dir, port = _scratch_setup(scratch)
        services: list[subprocess.Popen[bytes]] = []
        from webapp.catalog.bundled import bundled_start, bundled_stop

        try:
            services.append(_spawn("web", _web_command(port), log_dir))
            services.append(_spawn("worker", _worker_command("learning-table@%h"), log_dir))
            capacity = max(16, chosen.grpo_batch * 2)
            server = bundled_start(key=chosen.game, capacity=capacity, wait=START_SECONDS)
            if server.status != "running":
                raise CommandError(f"the {chosen.game} server did not start: {server.last_error}")
            self._say(started, f"scratch installation in {scratch}: web :{port}, worker, {chosen.game} at {server.url} "
                               f"(logs in {log_dir})")
            api = HttpApi(f"http://127.0.0.1:{port}", token)
            _wait(lambda: api.ok("/login/"), START_SECONDS, "the web server", services)
            _wait(lambda: bool(api.get("/api/workers/")), START_SECONDS, "the worker's heartbeat", services)
            # 'catch' itself is the bundled entry's name, which registration reserves.
            response = api.post("/api/environments/", {"name": f"{chosen.game}-bench", "base_url": server.url,
                                                        "capacity": capacity})
            self._measure(api, chosen, output, environment=int(response["id"]), started=started,
                          services=services)
        finally:
            _stop_services(services, lambda: bundled_stop(key=chosen.game))

    # --- the recipe -------------------------------------------------------------------

    def _say(self, started: float, message: str) -> None:
        self.stdout.write(f"[{time.monotonic() - started:7.1f}s] {message}")
        self.stdout.flush()

    def _measure(self, api: HttpApi, chosen: Settings, output: Path, *, environment: int | None,
                 started: float | None = None, services: list[Any] | None = None) -> None:
        started = started if started is not None else time.monotonic()
        say = lambda message: self._say(started, message)  # noqa: E731
        game = chosen.played
        if environment is None:
            # The bundled server's entry first: names are unique per owner only.
            listed = api.get("/api/environments/")
            named = [e for e in listed if (e.get("metadata") or {}).get("bundled") == game.key]
            named += [e for e in listed if e.get("name") == game.key and e not in named]
            if not named:
                raise CommandError(f"no environment named {game.key!r} in that lab: give --environment")
            environment = int(named[0]["id"])
        rewards = self._rewards(api, chosen)
        reset = chosen.reset()
        per_seed = []
        for seed in chosen.seeds:
            seed_started = time.monotonic()
            say(f"seed {seed}: building the {game.base} model"
                + (f" ({chosen.rows}x{chosen.columns})" if chosen.game == "catch" else ""))
            base = self._base_model(chosen, seed, say)
            phases: dict[str, Any] = {}
            phases["base"] = self._evaluate(api, chosen, environment, base, reset, say, services, f"seed {seed} base")
            sft = api.post("/api/runs/", {
                "name": f"learning-table-sft-s{seed}",
                "model": base,
                "environments": [{"environment": environment, "name": game.key, "prompt": game.prompt,
                                  "rows": chosen.warmup_episodes, "reset": reset}],
                "sft_warmup": {"kind": "sft", "source": "solver", "episodes": chosen.warmup_episodes,
                           "epochs": chosen.warmup_epochs, "learning_rate": chosen.warmup_learning_rate,
                           "per_device_train_batch_size": 8, "seed": seed},
                "grpo": None,
                "wait_for_worker": True,
            })
            say(f"seed {seed}: SFT warm-up run {sft['id']} queued")
            sft_run = self._wait_run(api, int(sft["id"]), say, services)
            phases["sft"] = {"run": sft_run["id"], "steps": sft_run["step"],
                             **self._evaluate(api, chosen, environment, {"run": sft_run["id"], "checkpoint": 0},
                                              reset, say, services, f"seed {seed} SFT")}
            # The GRPO phase is a sweep: the grid's settings (or the one recipe) from this seed's
            # SFT checkpoint, members queued as the user's active-run quota allows.
            grpo_base = {
                "name": f"learning-table-grpo-s{seed}",
                "model": {"run": sft_run["id"], "checkpoint": 0},
                "environments": [{"environment": environment, "name": game.key, "prompt": game.prompt,
                                  "rows": max(64, chosen.grpo_steps * chosen.grpo_batch // chosen.num_generations),
                                  "reset": reset}],
                "rewards": rewards,
                "grpo": {"num_generations": chosen.num_generations, "max_steps": chosen.grpo_steps,
                         "learning_rate": chosen.grpo_learning_rate,
                         "per_device_train_batch_size": chosen.grpo_batch, "gradient_accumulation_steps": 1,
                         "max_completion_length": chosen.max_completion_length,
                         "max_tool_calling_iterations": chosen.tool_rounds, "beta": 0.0,
                         "temperature": chosen.temperature, "seed": seed, "save_steps": chosen.grpo_steps},
                "wait_for_worker": True,
            }
            sweep = api.post("/api/sweeps/", {"name": f"learning-table-grpo-s{seed}", "base": grpo_base,
                                              "grid": chosen.grpo_grid or {"grpo.seed": [seed]}})
            say(f"seed {seed}: GRPO run(s) of sweep {sweep['id']} queued: {sweep['size']} from run "
                f"{sft_run['id']} checkpoint 0")
            members = self._grpo_members(api, chosen, int(sweep["id"]), int(sweep["size"]), environment, reset,
                                         say, services, seed)
            phases["sweep"] = int(sweep["id"])
            phases["members"] = members
            if not chosen.grpo_grid:
                only = members[0]
                if only["status"] != "succeeded":
                    raise CommandError(f"run {only['run']} {only['status']}: {only.get('error')}")
                phases["grpo"] = only
            phases["seconds"] = round(time.monotonic() - seed_started, 1)
            per_seed.append({"seed": seed, **phases})
            grpo_catches = ", ".join(str(m.get(game.score, m["status"])) for m in members)
            say(f"seed {seed}: base {phases['base'][game.score]}, SFT {phases['sft'][game.score]}, "
                f"SFT+GRPO {grpo_catches} of {chosen.episodes} ({phases['seconds'] / 60:.1f} min)")
            if len(per_seed) < len(chosen.seeds):  # what is done so far, should the rest not finish
                self._record(chosen, per_seed, output, started, say, final=False)
        self._record(chosen, per_seed, output, started, say, final=True)

    def _record(self, chosen: Settings, per_seed: list[dict[str, Any]], output: Path, started: float,
                say: Any, *, final: bool) -> None:
        table = (_grid_table if chosen.grpo_grid else _table)(chosen, per_seed, elapsed=time.monotonic() - started)
        if final:
            self.stdout.write("\n" + _text_table(table) + "\n")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(table, indent=2) + "\n")
        say(f"{'written' if final else f'{len(per_seed)} of {len(chosen.seeds)} seeds written'} to {output}")
        if output.resolve() == _default_output(chosen).resolve():
            _render_benchmarks()
            say("BENCHMARKS.md re-rendered")

    def _rewards(self, api: HttpApi, chosen: Settings) -> Any:
        if chosen.reward == "env":
            return ENV_REWARD
        game = chosen.played
        name = game.recipe_name
        body = {"name": name, "description": game.recipe_description, "terms": game.recipe_terms}
        existing = [r for r in api.get("/api/reward-recipes/") if r.get("name") == name]
        recipe = api.put(f"/api/reward-recipes/{existing[0]['id']}/", body) if existing else api.post(
            "/api/reward-recipes/", body)
        return {"recipe": int(recipe["id"])}

    def _base_model(self, chosen: Settings, seed: int, say: Any) -> str:
        """The seed's base model (its name: `base_model_name`), built unless that build exists."""
        from worker.demo_model import build_demo_model, demo_model_path, is_built, read_manifest

        recipe = chosen.base_recipe()
        name = base_model_name(chosen, seed)
        path = demo_model_path(name, settings.MODELS_DIR)
        if is_built(path):
            manifest = read_manifest(path)
            if manifest.get("recipe") == dataclasses.asdict(recipe) and manifest.get("seed") == seed:
                say(f"  demo:{name} already built with this recipe and seed: reused")
                return f"demo:{name}"
        build_demo_model(path, variant=chosen.played.base, seed=seed, recipe=recipe,
                         progress=lambda message: say(f"  {message}"))
        return f"demo:{name}"

    def _grpo_members(self, api: HttpApi, chosen: Settings, sweep_id: int, size: int, environment: int,
                      reset: dict[str, int], say: Any, services: list[Any] | None, seed: int) -> list[dict[str, Any]]:
        """Wait for the sweep's runs, then evaluate every run that succeeded in one evaluation
        (the same seeded episodes); a run that failed is kept in the table with its error."""
        seen: dict[int, int] = {}

        def finished() -> dict[str, Any] | None:
            sweep = api.get(f"/api/sweeps/{sweep_id}/")
            for member in sweep["members"]:
                step = int(member["step"] or 0)
                if step and step % 5 == 0 and seen.get(member["run"]) != step:
                    seen[member["run"]] = step
                    say(f"  run {member['run']} {member['params']}: step {step}/{member['max_steps']}")
            return sweep if sweep["status"] != "active" else None

        sweep = _wait(finished, 7200 * size, f"sweep {sweep_id}", services)
        members: list[dict[str, Any]] = []
        for member in sweep["members"]:
            run = api.get(f"/api/runs/{member['run']}/")
            keys = "&".join(f"key={key}" for key in DIAGNOSTIC_KEYS)
            series = api.get(f"/api/runs/{run['id']}/metrics/?{keys}&max_points=100000")["series"]
            entry: dict[str, Any] = {
                "params": member["params"], "run": run["id"], "status": run["status"], "steps": run["step"],
                "error": run.get("error") or "", "reward_curve": series.get("reward", []),
                "diagnostics": _diagnostics(series),
            }
            say(f"  run {run['id']} {member['params']} {run['status']} at step {run['step']}"
                + (f": {entry['error'][:200]}" if entry["error"] else ""))
            members.append(entry)
        done = [m for m in members if m["status"] == "succeeded"]
        if done:
            rows = self._evaluate_many(
                api, chosen, environment, [{"run": m["run"], "checkpoint": "last"} for m in done], reset, say,
                services, f"seed {seed} SFT+GRPO",
            )
            for member, row in zip(done, rows, strict=True):
                member.update(row)
        return members

    def _evaluate(self, api: HttpApi, chosen: Settings, environment: int, model: Any, reset: dict[str, int],
                  say: Any, services: list[Any] | None, what: str) -> dict[str, Any]:
        return self._evaluate_many(api, chosen, environment, [model], reset, say, services, what)[0]

    def _evaluate_many(self, api: HttpApi, chosen: Settings, environment: int, models: list[Any],
                       reset: dict[str, int], say: Any, services: list[Any] | None, what: str) -> list[dict[str, Any]]:
        created = api.post("/api/evaluations/", {
            "environment": environment, "models": models, "episodes": chosen.episodes,
            "seed": chosen.eval_seed, "prompt": chosen.played.prompt, "reset": reset,
            "max_completion_length": chosen.max_completion_length,
            "max_tool_calling_iterations": chosen.tool_rounds,
        })
        say(f"{what}: evaluation {created['id']} queued ({chosen.episodes} greedy episodes)")
        evaluation = _wait(lambda: _finished(api.get(f"/api/evaluations/{created['id']}/")), 3600,
                           f"evaluation {created['id']}", services)
        if evaluation["status"] != "succeeded":
            raise CommandError(f"evaluation {created['id']} {evaluation['status']}: {evaluation['error']}")
        found = []
        score = chosen.played.score
        for row in evaluation["results"]:
            say(f"{what}: {score} {row[score]} of {row['episodes']} (mean reward {row['mean_reward']:.3f})"
                + (f" [{row.get('model', '')}]" if len(models) > 1 else ""))
            extra = {chosen.played.extra: row.get(chosen.played.extra)} if chosen.played.extra else {}
            found.append({"evaluation": evaluation["id"], score: int(row[score]), **extra,
                          "mean_reward": row["mean_reward"], "tool_calls": row["tool_calls"],
                          "tool_failures": row["tool_failures"]})
        if chosen.game == "catch":
            for index, entry in enumerate(found):
                entry["by_column"] = _caught_by_column(api, int(evaluation["id"]), index, chosen)
                say(f"{what}: caught of each ball column {_by_column_text(entry)}"
                    + (f" [{evaluation['results'][index].get('model', '')}]" if len(models) > 1 else ""))
        return found

    def _wait_run(self, api: HttpApi, run_id: int, say: Any, services: list[Any] | None) -> dict[str, Any]:
        seen = [-1]

        def finished() -> dict[str, Any] | None:
            run = api.get(f"/api/runs/{run_id}/")
            if run["step"] != seen[0] and run["step"] and run["step"] % 5 == 0:
                seen[0] = run["step"]
                say(f"  run {run_id}: {run.get('phase', '')} step {run['step']}/{run['max_steps']}")
            return run if run["status"] in TERMINAL else None

        run = _wait(finished, 7200, f"run {run_id}", services)
        if run["status"] != "succeeded":
            raise CommandError(f"run {run_id} {run['status']}: {run.get('error')}")
        say(f"  run {run_id} succeeded at step {run['step']}")
        return run


# --- helpers --------------------------------------------------------------------------


class HttpApi:
    """The lab's REST API over HTTP with a token (requests, never through a proxy)."""

    def __init__(self, url: str, token: str) -> None:
        import requests

        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers["Authorization"] = f"Token {token}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        response = self.session.request(method, self.url + path, json=body, timeout=60)
        if response.status_code >= 400:
            raise CommandError(f"{method} {path}: HTTP {response.status_code}: {response.text[:2000]}")
        return response.json()

    def get(self, path: str) -> Any:
        return self._call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self._call("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self._call("PUT", path, body)

    def ok(self, path: str) -> bool:
        import requests

        try:
            return self.session.get(self.url + path, timeout=2).status_code == 200
        except requests.RequestException:
            return False


def base_model_name(chosen: Settings, seed: int) -> str:
    """catch-base-<rows>x<columns>[-l<layers>][-quick]-s<seed> (Catch) or <game>-base-<variant>[-quick]-s<seed>."""
    quick = "-quick" if chosen.quick else ""
    if chosen.game != "catch":
        return f"{chosen.game}-base-{chosen.played.base}{quick}-s{seed}"
    layers = f"-l{chosen.base_layers}" if chosen.base_layers else ""
    return f"catch-base-{chosen.rows}x{chosen.columns}{layers}{quick}-s{seed}"


def _settings(options: dict[str, Any]) -> Settings:
    try:
        seeds = [int(s) for s in str(options["seeds"]).split(",") if s.strip()]
    except ValueError:
        raise CommandError("--seeds takes comma-separated integers, e.g. 0,1,2") from None
    if not seeds or len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**31 for s in seeds):
        raise CommandError("--seeds: one or more distinct seeds from 0")
    values = {key: options[key] for key in (
        "episodes", "eval_seed", "rows", "columns", "warmup_episodes", "warmup_epochs",
        "warmup_learning_rate", "grpo_steps", "grpo_batch", "num_generations", "grpo_learning_rate",
        "temperature", "max_completion_length", "tool_rounds", "reward")}
    if options["quick"]:
        # Only what was left at its default shrinks: a flag given explicitly wins.
        parser_defaults = {"episodes": 30, "warmup_episodes": 300, "warmup_epochs": 3, "grpo_steps": 20,
                           "grpo_batch": 16, "num_generations": 8, "max_completion_length": 384}
        for key, small in QUICK.items():
            if values[key] == parser_defaults[key]:
                values[key] = small
    chosen = Settings(seeds=seeds, quick=bool(options["quick"]), grpo_grid=_grid(options.get("grpo_grid") or ""),
                      game=options.get("game", "catch"), base_layers=int(options.get("base_layers") or 0),
                      **values)
    checks = [
        (1 <= chosen.episodes <= 200, "--episodes is 1 to 200"),
        (3 <= chosen.rows <= 20, "--rows is 3 to 20"),
        (0 <= chosen.base_layers <= 8, "--base-layers is 1 to 8 (0: the recipe's)"),
        (not chosen.base_layers or chosen.game == "catch", "--base-layers sizes the catch-base model: Catch only"),
        (2 <= chosen.columns <= 9, "--columns is 2 to 9"),
        (1 <= chosen.warmup_episodes <= 4096, "--warmup-episodes is 1 to 4096"),
        (1 <= chosen.warmup_epochs <= 100, "--warmup-epochs is 1 to 100"),
        (1 <= chosen.grpo_steps <= 10_000, "--grpo-steps is 1 to 10000"),
        (chosen.num_generations >= 2 and chosen.grpo_batch % chosen.num_generations == 0,
         "--num-generations (2 or more) must divide --grpo-batch"),
        (0 <= chosen.eval_seed < 2**31, "--eval-seed is 0 or more"),
    ]
    for ok, message in checks:
        if not ok:
            raise CommandError(message)
    return chosen


def _grid(given: str) -> dict[str, list[Any]]:
    """--grpo-grid: a JSON object of dotted run-config paths to non-empty value lists (the
    sweep API checks each member's config; this checks the shape and what the table owns)."""
    if not given.strip():
        return {}
    try:
        grid = json.loads(given)
    except ValueError as exc:
        raise CommandError(f"--grpo-grid is not JSON: {exc}") from None
    if not isinstance(grid, dict) or not grid:
        raise CommandError('--grpo-grid is a JSON object: {"grpo.learning_rate": [0.0001, 0.0003]}')
    for path, values in grid.items():
        if not isinstance(values, list) or not values:
            raise CommandError(f"--grpo-grid: {path} needs a non-empty list of values")
        if any(path == r or path.startswith(r + ".") for r in GRID_RESERVED):
            raise CommandError(f"--grpo-grid: {path} is set by the table itself (seeds, models, environment, reward)")
    return grid


def _diagnostics(series: dict[str, list[list[float]]]) -> dict[str, float | None]:
    """Means over the run's steps of what says why GRPO learned or did not (DIAGNOSTIC_KEYS)."""
    found: dict[str, float | None] = {}
    for key in DIAGNOSTIC_KEYS[1:]:
        values = [float(v) for _, v in series.get(key, []) if v is not None]
        found[key] = round(statistics.mean(values), 4) if values else None
    return found


def _caught_by_column(api: HttpApi, evaluation: int, model_index: int, chosen: Settings) -> dict[str, list[int]]:
    """Catch: {ball column: [caught, episodes]} of one model's evaluation episodes. The paddle
    starts in the middle column, so this shows which side a model cannot play (the ball's
    column is the seed's: the server's own `new_game`)."""
    from envs.catch.server import new_game

    counts: dict[int, list[int]] = {}
    page = 1
    while True:
        listed = api.get(f"/api/evaluations/{evaluation}/episodes/?model={model_index}&page={page}&page_size=100")
        for episode in listed["results"]:
            column = new_game(int(episode["seed"]), chosen.rows, chosen.columns).ball_column
            caught = counts.setdefault(column, [0, 0])
            caught[0] += int(bool(episode["won"]))
            caught[1] += 1
        if not listed.get("next"):
            break
        page += 1
    return {str(column): counts[column] for column in sorted(counts)}


def _by_column_text(entry: dict[str, Any]) -> str:
    """'c0 14/14, c1 0/8, c2 8/8' (ball column: caught of episodes), '-' where not measured."""
    by_column = entry.get("by_column")
    if not by_column:
        return "-"
    return ", ".join(f"c{column} {caught}/{total}" for column, (caught, total) in by_column.items())


def _setting_label(params: dict[str, Any]) -> str:
    return ", ".join(f"{path.removeprefix('grpo.')}={value}" for path, value in sorted(params.items())) or "-"


def _grid_table(chosen: Settings, per_seed: list[dict[str, Any]], *, elapsed: float) -> dict[str, Any]:
    """The search's table: a row per member (setting x seed, failures included), a mean row
    per setting, and the verdict on the best setting against the target."""
    import platform

    described = _described(chosen)
    key = chosen.played.score
    phases = {}
    for phase in ("base", "sft"):
        mean, std = _mean_std([float(entry[phase][key]) for entry in per_seed])
        phases[phase] = {"mean": round(mean, 2), "std": round(std, 2)}
    extra = chosen.played.extra
    columns = ["GRPO setting", "seed", "base", "SFT", "SFT+GRPO", "GRPO - SFT", "GRPO reward, first -> last 5 steps",
               "zero-std groups", "entropy", "run", *([f"{extra}, base / SFT / SFT+GRPO"] if extra else [])]
    # Catch: which ball columns each model catches (the paddle starts in the middle one).
    by_column = chosen.game == "catch"
    columns += ["caught of each ball column (c0 = left), SFT -> SFT+GRPO"] if by_column else []
    by_setting: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for entry in per_seed:
        for member in entry.get("members", []):
            # A sweep names only the paths its members differ in: a grid path of one value
            # is named here, so a one-setting search still says what it ran.
            fixed = {path: values[0] for path, values in chosen.grpo_grid.items() if len(values) == 1}
            by_setting.setdefault(_setting_label({**fixed, **member["params"]}), []).append((entry, member))
    rows: list[list[Any]] = []
    settings_summary: list[dict[str, Any]] = []
    for label, pairs in by_setting.items():
        gains = []
        for entry, member in pairs:
            first, last = _reward_ends(member.get("reward_curve") or [])
            curve = "" if first is None else f"{first:.2f} -> {last:.2f}"
            diagnostics = member.get("diagnostics") or {}
            zero, entropy = diagnostics.get("frac_reward_zero_std"), diagnostics.get("entropy")
            if key in member:
                gain = member[key] - entry["sft"][key]
                gains.append(gain)
                result: list[Any] = [member[key], gain]
            else:
                result = [f"{member['status']}: {member.get('error', '')[:80]}", ""]
            rows.append([label, entry["seed"], entry["base"][key], entry["sft"][key], *result, curve,
                         "" if zero is None else f"{zero:.2f}", "" if entropy is None else f"{entropy:.3f}",
                         member["run"], *([_extra_cell(extra, entry, member)] if extra else []),
                         *([f"{_by_column_text(entry['sft'])} -> {_by_column_text(member)}"] if by_column else [])])
        mean, std = _mean_std([float(g) for g in gains]) if gains else (0.0, 0.0)
        se = std / len(gains) ** 0.5 if len(gains) > 1 else None
        met = (se is not None and len(gains) == len(pairs) and len(gains) >= 3
               and mean >= TARGET_CATCHES and mean >= 2 * se)
        settings_summary.append({"setting": label, "params": pairs[0][1]["params"], "seeds": len(pairs),
                                 "succeeded": len(gains), "gain_mean": round(mean, 2), "gain_std": round(std, 2),
                                 "gain_se": None if se is None else round(se, 2), "target_met": met})
        rows.append([label, "mean +- std", "", "", "", f"{mean:+.1f} +- {std:.1f}"
                     + ("" if se is None else f" (SE {se:.1f})"), "", "", "", "", *([""] if extra else []),
                     *([""] if by_column else [])])
    best = max(settings_summary, key=lambda item: item["gain_mean"]) if settings_summary else None
    base, sft = phases["base"]["mean"], phases["sft"]["mean"]
    done = "" if len(per_seed) == len(chosen.seeds) else f"PARTIAL: {len(per_seed)} of {len(chosen.seeds)} seeds done. "
    if best is None:
        outcome = "no GRPO run finished"
    else:
        outcome = (f"best setting {best['setting']}: mean gain {best['gain_mean']:+.1f} {key} over "
                   f"{best['succeeded']} of {best['seeds']} seeds"
                   + ("" if best["gain_se"] is None else f", 2 standard errors {2 * best['gain_se']:.1f}")
                   + f"; target (gain >= {TARGET_CATCHES} {key} and >= 2 standard errors, 3 seeds or more): "
                   + ("MET" if best["target_met"] else "NOT met"))
    verdict = (f"{done}{'quick smoke check, numbers meaningless. ' if chosen.quick else ''}"
               f"Mean {key} of {chosen.episodes}: base {base:.1f}, SFT {sft:.1f}; base < SFT: "
               f"{'yes' if sft > base else 'no'}. {len(settings_summary)} GRPO setting(s) x {len(chosen.seeds)} "
               f"seed(s): {outcome}. {elapsed / 60:.1f} minutes in all on {os.cpu_count()} CPUs"
               f"{' (' + os.environ['ENVLAB_BENCH_NOTE'] + ')' if os.environ.get('ENVLAB_BENCH_NOTE') else ''}.")
    return {
        **described,
        "grpo": described["grpo"] + "; searched, each value in place of the setting above: " + json.dumps(chosen.grpo_grid),
        "how": described["how"] + "; the GRPO runs of each seed are one sweep (POST /api/sweeps/) over the grid",
        "columns": columns,
        "rows": rows,
        "verdict": verdict,
        "seeds": chosen.seeds,
        "summary": {**phases,
                    "settings": settings_summary, "best": best},
        "per_seed": per_seed,
        "settings": dataclasses.asdict(chosen),
        "elapsed_seconds": round(elapsed, 1),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()},
    }


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _extra_cell(extra: str, entry: dict[str, Any], member: dict[str, Any]) -> str:
    values = [entry["base"].get(extra), entry["sft"].get(extra), member.get(extra)]
    return " / ".join("-" if v is None else f"{float(v):.2f}" for v in values)


def _default_output(chosen: Settings | None = None) -> Path:
    results = Path(settings.BASE_DIR) / "bench" / "results"
    game = "" if chosen is None or chosen.game == "catch" else f"_{chosen.game}"
    if chosen is None or not chosen.grpo_grid:
        return results / f"learning_table{game}.json"
    # A search is named by what it searched (and by its game and SFT warm-up where they are
    # not the guide's): another grid or another SFT model is another record, not an overwrite.
    searched = "-".join(path.removeprefix("grpo.").replace("_", "") for path in sorted(chosen.grpo_grid))
    warmup = "".join(f"-{short}{getattr(chosen, name):g}" for name, short in SFT_NAMED
                     if getattr(chosen, name) != SFT_DEFAULTS[name])
    warmup += f"-baselayers{chosen.base_layers}" if chosen.base_layers else ""
    name = re.sub(r"[^a-z0-9.-]", "", (searched + warmup).lower())[:80]
    return results / f"learning_table_search{game}_{name}.json"


def _output_path(options: dict[str, Any], chosen: Settings, *, scratch: Path | None) -> Path:
    if options["output"]:
        return Path(options["output"]).resolve()
    if chosen.quick:
        return (scratch or Path(settings.VAR_DIR)) / "learning_table.quick.json"
    return _default_output(chosen)


def _redis_url(given: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    if given:
        return given
    parts = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    return urlunsplit((parts.scheme or "redis", parts.netloc or "127.0.0.1:6379", f"/{DEFAULT_REDIS_DB}", "", ""))


def _reset_stores() -> None:
    """Migrate the scratch database and empty its Redis database."""
    import redis
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(settings.REDIS_URL).flushdb()


def _scratch_setup(scratch: Path) -> tuple[str, Path, int]:
    """An API token, the folder for the services' logs and a free port for the web server."""
    token = _scratch_token()
    log_dir = scratch / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    return token, log_dir, _free_port()


def _web_command(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "webapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"]


def _worker_command(node: str) -> list[str]:
    """A Celery worker on the train and default queues, one task at a time."""
    return [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-Q", "train,default", "-n", node,
            "--concurrency", "1", "--prefetch-multiplier", "1", "--loglevel", "INFO", "--without-gossip",
            "--without-mingle"]


def _scratch_token() -> str:
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    user, _ = get_user_model().objects.get_or_create(username="learning-table")
    _, token = AuthToken.objects.create(user=user)
    return str(token)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn(name: str, args: list[str], log_dir: Path) -> subprocess.Popen[bytes]:
    log = open(log_dir / f"{name}.log", "ab")  # lives as long as the process
    return subprocess.Popen(args, cwd=settings.BASE_DIR, env=dict(os.environ), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _stop_services(services: list[subprocess.Popen[bytes]], stop_server: Any) -> None:
    """Stop what the table started, last first, then the game server. A second SIGTERM (a kill
    that reaches both the command and its scratch child, which the command also forwards one to)
    is ignored until that is done: it used to cut the cleanup short and orphan the web and game
    servers."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        for process in reversed(services):
            _stop(process)
        stop_server()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


def _finished(evaluation: dict[str, Any]) -> dict[str, Any] | None:
    return evaluation if evaluation["status"] in TERMINAL else None


def _wait(predicate: Any, timeout: float, what: str, services: list[Any] | None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        for process in services or []:
            if process.poll() is not None:
                raise CommandError(f"{' '.join(process.args[:4])} exited with {process.returncode} "
                                   f"while waiting for {what}; see its log")
        if time.monotonic() > deadline:
            raise CommandError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(1.0)


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _reward_ends(curve: list[list[float]], width: int = 5) -> tuple[float | None, float | None]:
    values = [float(v) for _, v in curve]
    if not values:
        return None, None
    width = max(1, min(width, len(values) // 2 or 1))
    return statistics.mean(values[:width]), statistics.mean(values[-width:])


def _table(chosen: Settings, per_seed: list[dict[str, Any]], *, elapsed: float) -> dict[str, Any]:
    """The JSON of bench/results/learning_table.json: the keys BENCHMARKS.md's renderer reads
    (date, environment, episodes, how, sft, grpo, columns, rows, verdict), then the details."""
    import platform

    columns = ["seed", "base", "SFT", "SFT+GRPO", "GRPO - SFT", "GRPO reward, first -> last 5 steps", "minutes"]
    rows: list[list[Any]] = []
    for entry in per_seed:
        first, last = _reward_ends(entry["grpo"]["reward_curve"])
        key = chosen.played.score
        rows.append([entry["seed"], entry["base"][key], entry["sft"][key], entry["grpo"][key],
                     entry["grpo"][key] - entry["sft"][key],
                     "" if first is None else f"{first:.2f} -> {last:.2f}", round(entry["seconds"] / 60, 1)])
    summary: dict[str, Any] = {}
    for index, key in ((1, "base"), (2, "sft"), (3, "grpo"), (4, "gain")):
        mean, std = _mean_std([float(r[index]) for r in rows])
        summary[key] = {"mean": round(mean, 2), "std": round(std, 2)}
    if len(rows) > 1:
        rows.append(["mean +- std", *(f"{summary[k]['mean']:.1f} +- {summary[k]['std']:.1f}"
                                      for k in ("base", "sft", "grpo", "gain")), "", ""])
    gain, spread = summary["gain"]["mean"], summary["gain"]["std"]
    base, sft = summary["base"]["mean"], summary["sft"]["mean"]
    n = len(per_seed)
    if n < 2:
        noise = "one seed: no estimate of seed noise (run --seeds 0,1,2)"
        beyond = False
    else:
        # Beyond seed noise: the mean gain at least twice its standard error over seeds, and positive.
        beyond = gain > 0 and gain >= 2 * spread / n**0.5
        noise = (f"mean GRPO gain {gain:+.1f} {chosen.played.score}, std {spread:.1f} over {n} seeds: "
                 f"{'beyond' if beyond else 'NOT beyond'} seed noise (2 standard errors)")
    done = "" if n == len(chosen.seeds) else f"PARTIAL: {n} of {len(chosen.seeds)} seeds done. "
    verdict = (f"{done}{'quick smoke check, numbers meaningless. ' if chosen.quick else ''}"
               f"Mean {chosen.played.score} of {chosen.episodes}: base {base:.1f}, SFT {sft:.1f}, SFT+GRPO {summary['grpo']['mean']:.1f}; "
               f"base < SFT: {'yes' if sft > base else 'no'}, SFT < SFT+GRPO: {'yes' if gain > 0 else 'no'}. {noise}. "
               f"{elapsed / 60:.1f} minutes in all on {os.cpu_count()} CPUs"
               f"{' (' + os.environ['ENVLAB_BENCH_NOTE'] + ')' if os.environ.get('ENVLAB_BENCH_NOTE') else ''}.")
    return {
        **_described(chosen),
        "columns": columns,
        "rows": rows,
        "verdict": verdict,
        "seeds": chosen.seeds,
        "summary": {**summary, "beyond_seed_noise": beyond},
        "per_seed": per_seed,
        "settings": dataclasses.asdict(chosen),
        "elapsed_seconds": round(elapsed, 1),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()},
    }


def _described(chosen: Settings) -> dict[str, str]:
    """What every table says of how it was made (the keys BENCHMARKS.md's renderer reads)."""
    game = chosen.played
    if chosen.reward == "env":
        reward = ("the plain env reward (+1 caught, -1 missed, 0 unfinished)" if chosen.game == "catch"
                  else "the plain env reward (1 for the word, else 0)")
    elif chosen.game == "catch":
        reward = "the env reward with an unfinished episode scored -1 (expression `reward if reward != 0 else -1`)"
    else:
        reward = "1 for the word, else 0.1 x the most greens of one guess (env_reward + partial_credit best_greens)"
    environment = (f"catch, {chosen.rows} rows x {chosen.columns} columns ({chosen.rows - 1} moves), bundled server"
                   if chosen.game == "catch" else f"{chosen.game}, bundled server")
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "game": chosen.game,
        "score": game.score_label,
        "environment": environment,
        "episodes": f"{chosen.episodes} greedy episodes, evaluation seed {chosen.eval_seed} (the same episodes for every model)",
        "how": (f"`python -m bench.learning_table{'' if chosen.game == 'catch' else ' --game ' + chosen.game}` "
                f"(make learning-table): base {game.base_label}"
                f"{f' with {chosen.base_layers} layers' if chosen.base_layers else ''} built per seed, "
                "the lab's SFT warm-up run (`grpo: null`), GRPO run from its checkpoint 0, and evaluations, "
                "all through the REST API and one Celery worker"),
        "sft": (f"{chosen.warmup_episodes} solver episodes, {chosen.warmup_epochs} epochs, "
                f"lr {chosen.warmup_learning_rate:g}, batch 8"),
        "grpo": (f"{chosen.grpo_steps} steps, batch {chosen.grpo_batch}, {chosen.num_generations} generations, "
                 f"lr {chosen.grpo_learning_rate:g}, beta 0, temperature {chosen.temperature:g}, "
                 f"max_completion_length {chosen.max_completion_length}, {chosen.tool_rounds} tool rounds; reward: {reward}"),
    }


def _text_table(table: dict[str, Any]) -> str:
    cells = [table["columns"], *[[str(c) for c in row] for row in table["rows"]]]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(table["columns"]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:], "", table["verdict"]])


def _render_benchmarks() -> None:
    """BENCHMARKS.md again, from every bench/results/*.json (bench/__main__.py's renderer)."""
    from bench.__main__ import render_recorded

    render_recorded()


def main(argv: list[str] | None = None) -> None:
    """The command line: a Django management command run outside manage.py, because product
    code (worker/, webapp/) never imports bench."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.local")
    import django

    django.setup()
    Command().run_from_argv(["python -m bench.learning_table", "learning_table", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
