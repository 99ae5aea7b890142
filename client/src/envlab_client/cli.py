"""`envlab`: the lab from a shell. `envlab login` once, then `envlab runs launch config.json
--watch`, `envlab runs metrics 12 --key reward > reward.csv`, ... Every command that shows
an object takes `--json` for the API's own answer. An error the API answers is printed as
the API worded it, and the command exits 1 (2 for wrong usage)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import typer

from envlab_client.client import TERMINAL_RUN_STATUSES, Client, EnvlabError, Evaluation
from envlab_client.config import load_login, save_login

app = typer.Typer(help="Drive an envlab lab: environments, runs, evaluations, recipes.", no_args_is_help=True)
envs_app = typer.Typer(help="Registered environments.", no_args_is_help=True)
runs_app = typer.Typer(help="Training runs.", no_args_is_help=True)
evals_app = typer.Typer(help="Evaluations.", no_args_is_help=True)
recipes_app = typer.Typer(help="Reward recipes.", no_args_is_help=True)
jobs_app = typer.Typer(help="Background jobs (dry runs, learnability, re-scores).", no_args_is_help=True)
app.add_typer(envs_app, name="envs")
app.add_typer(runs_app, name="runs")
app.add_typer(evals_app, name="evals")
app.add_typer(recipes_app, name="recipes")
app.add_typer(jobs_app, name="jobs")

JsonOption = typer.Option(False, "--json", help="Print the API's answer as JSON.")

T = TypeVar("T")


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def client() -> Client:
    try:
        url, token = load_login()
    except EnvlabError as exc:
        fail(str(exc))
    return Client(url, token)


def answer(call: Callable[[Client], T]) -> T:
    """What `call` gets from the logged-in lab; an error the API answers ends the command."""
    try:
        return call(client())
    except EnvlabError as exc:
        fail(str(exc))


def show(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def table(rows: Sequence[Mapping[str, Any]], columns: list[str]) -> None:
    """Tab-separated, with a header: reads in a terminal, cuts with `cut -f`."""
    typer.echo("\t".join(columns))
    for row in rows:
        typer.echo("\t".join("" if row.get(c) is None else str(row.get(c)) for c in columns))


def listing(rows: Sequence[Mapping[str, Any]], columns: list[str], as_json: bool) -> None:
    """A list command's answer: the API's JSON with --json, else a table of `columns`."""
    if as_json:
        show(rows)
    else:
        table(rows, columns)


def _output(path: Path | None) -> contextlib.AbstractContextManager[BinaryIO]:
    """The file to write, or standard output (left open)."""
    return path.open("wb") if path is not None else contextlib.nullcontext(sys.stdout.buffer)


# --- login ----------------------------------------------------------------------------------


@app.command()
def login(
    url: str = typer.Option(..., prompt="Lab URL", help="The lab's address, e.g. http://127.0.0.1:8000"),
    token: str | None = typer.Option(None, help="An API token (the account page makes them); else a password."),
    username: str | None = typer.Option(None, help="Sign in with a username and password for a new token."),
    password: str | None = typer.Option(None, help="The password (asked for when not given)."),
) -> None:
    """Store the lab's URL and a token in your config directory (mode 0600)."""
    try:
        if token is None:
            username = username or typer.prompt("Username")
            password = password or typer.prompt("Password", hide_input=True)
            token = Client.login(url, username, password).token
        assert token is not None
        # A token that does not work is refused here, not at the first real command.
        Client(url, token).request("GET", "auth/tokens/")
    except EnvlabError as exc:
        fail(str(exc))
    path = save_login(url, token)
    typer.echo(f"logged in to {url.rstrip('/')}; token stored in {path}")


# --- environments ---------------------------------------------------------------------------


@envs_app.command("list")
def envs_list(as_json: bool = JsonOption) -> None:
    """Every environment you can see."""
    listing(answer(lambda api: api.environments()), ["id", "name", "kind", "status", "base_url", "capacity", "shared"], as_json)


@envs_app.command("register")
def envs_register(
    name: str,
    base_url: str | None = typer.Option(None, "--url", help="An OpenEnv or Open Reward Standard server."),
    image: str | None = typer.Option(None, help="A container image (where the lab has Docker)."),
    ors_catalog: str | None = typer.Option(None, help="An Open Reward catalog environment, Org/Env."),
    capacity: int | None = typer.Option(None, help="Concurrent sessions the server takes."),
    measure_capacity: bool = typer.Option(False, help="Measure the capacity instead."),
    as_json: bool = JsonOption,
) -> None:
    """Register an environment (one of --url, --image, --ors-catalog)."""
    source = {"base_url": base_url, "image": image, "ors_catalog": ors_catalog}
    given = {k: v for k, v in source.items() if v}
    if len(given) != 1:
        fail("give one of --url, --image, --ors-catalog", 2)
    options: dict[str, Any] = dict(given)
    if capacity is not None:
        options["capacity"] = capacity
    if measure_capacity:
        options["measure_capacity"] = True
    environment = answer(lambda api: api.register_environment(name, **options))
    if as_json:
        show(environment)
    else:
        typer.echo(f"environment {environment['id']} {environment['name']} ({environment.get('kind')}): "
                   f"{environment.get('status')}")


@envs_app.command("probe")
def envs_probe(environment_id: int, as_json: bool = JsonOption) -> None:
    """Check an environment's health, tools and capacity again."""
    environment = answer(lambda api: api.probe_environment(environment_id))
    if as_json:
        show(environment)
    else:
        error = environment.get("last_error")
        typer.echo(f"environment {environment['id']} {environment['name']}: {environment.get('status')}"
                   + (f" ({error})" if error else ""))


# --- runs -----------------------------------------------------------------------------------


def step_line(step: int, max_steps: int | None, values: dict[str, Any]) -> str:
    shown = [f"step {step}/{max_steps}" if max_steps else f"step {step}"]
    for key in ("reward", "reward_std", "loss"):
        value = values.get(key)
        if isinstance(value, int | float):
            shown.append(f"{key} {value:.4f}")
    return "  ".join(shown)


def watch(api: Client, run_id: int, max_steps: int | None) -> str:
    """Print one line per training step as the run's socket announces it; the final status.
    Steps logged before the socket opened (or while it was away) are read over REST."""
    from envlab_client.live import watch_run

    printed: set[int] = set()

    def catch_up(through: int) -> None:
        missing = [s for s in range(1, through + 1) if s not in printed]
        if not missing:
            return
        series = api.metrics(run_id, keys=["reward", "reward_std", "loss"], max_points=100_000)
        by_step: dict[int, dict[str, float]] = {}
        for key, points in series.items():
            for step, value in points:
                by_step.setdefault(int(step), {})[key] = value
        for step in missing:
            if step in by_step:
                typer.echo(step_line(step, max_steps, by_step[step]))
                printed.add(step)

    status = "unknown"
    for note in watch_run(api, run_id):
        kind = note.get("type")
        if kind == "metrics":
            step = int(note.get("step") or 0)
            catch_up(step - 1)
            if step not in printed and step > 0:
                typer.echo(step_line(step, max_steps, note.get("values") or {}))
                printed.add(step)
        elif kind in ("snapshot", "status", "facts", "final"):
            status = str(note.get("status") or status)
            if status in TERMINAL_RUN_STATUSES:
                catch_up(int(note.get("step") or 0))
            elif kind == "snapshot" and note.get("step"):
                catch_up(int(note["step"]))
    return status


@runs_app.command("launch")
def runs_launch(
    config: Path = typer.Argument(..., exists=True, dir_okay=False, help="A run config (JSON)."),
    watch_it: bool = typer.Option(False, "--watch", help="Follow the run step by step until it ends."),
    as_json: bool = JsonOption,
) -> None:
    """Launch a run; with --watch, exit 0 when it succeeds and 1 when it fails or stops."""
    try:
        body = json.loads(config.read_text())
    except ValueError as exc:
        fail(f"{config} is not JSON: {exc}", 2)
    api = client()
    try:
        run = api.launch(body)
    except EnvlabError as exc:
        fail(str(exc))
    if as_json:
        show(run)
    else:
        typer.echo(f"run {run['id']} {run['name']}: {run['status']}")
    for warning in run.get("warnings") or []:
        typer.echo(f"warning: {warning}", err=True)
    if not watch_it:
        return
    try:
        status = watch(api, run["id"], run.get("max_steps"))
        final = api.run(run["id"])
    except EnvlabError as exc:
        fail(str(exc))
    error = final.get("error")
    typer.echo(f"run {final['id']} {status} at step {final.get('step')}/{final.get('max_steps')}"
               + (f": {error}" if error and status != "succeeded" else ""))
    raise typer.Exit(0 if status == "succeeded" else 1)


@runs_app.command("watch")
def runs_watch(run_id: int) -> None:
    """Follow a run until it ends (exit 0 when it succeeded, 1 otherwise)."""
    api = client()
    try:
        run = api.run(run_id)
        status = watch(api, run_id, run.get("max_steps"))
    except EnvlabError as exc:
        fail(str(exc))
    typer.echo(f"run {run_id} {status}")
    raise typer.Exit(0 if status == "succeeded" else 1)


@runs_app.command("list")
def runs_list(as_json: bool = JsonOption) -> None:
    """Your runs, newest first."""
    listing(answer(lambda api: api.runs()), ["id", "name", "status", "step", "max_steps", "model", "created_at"], as_json)


@runs_app.command("show")
def runs_show(run_id: int) -> None:
    """One run, as the API answers it (JSON)."""
    show(answer(lambda api: api.run(run_id)))


@runs_app.command("cancel")
def runs_cancel(run_id: int) -> None:
    run = answer(lambda api: api.cancel(run_id))
    typer.echo(f"run {run['id']}: {run['status']}" + (" (cancel requested)" if run.get("cancel_requested") else ""))


@runs_app.command("resume")
def runs_resume(
    run_id: int, checkpoint: int | None = typer.Option(None, help="Restart from this checkpoint step.")
) -> None:
    run = answer(lambda api: api.resume(run_id, checkpoint))
    typer.echo(f"run {run['id']}: {run['status']}")


@runs_app.command("metrics")
def runs_metrics(
    run_id: int,
    key: list[str] = typer.Option(None, "--key", "-k", help="A metric key (repeat it); every key when absent."),
    fmt: str = typer.Option("csv", "--format", help="csv or parquet."),
    output: Path | None = typer.Option(None, "--output", "-o", help="A file (standard output when absent)."),
) -> None:
    """Every point of the run's metrics (step, key, value), raw."""
    if fmt not in ("csv", "parquet"):
        fail("--format is csv or parquet", 2)
    if fmt == "parquet" and output is None and sys.stdout.isatty():
        fail("Parquet is binary: give -o FILE", 2)
    try:
        with _output(output) as destination:
            client().export_metrics(run_id, destination, keys=key or None, format=fmt)
    except EnvlabError as exc:
        if output is not None:
            output.unlink(missing_ok=True)
        fail(str(exc))


@runs_app.command("keys")
def runs_keys(run_id: int) -> None:
    """The metric keys a run logged."""
    try:
        for key in client().metric_keys(run_id):
            typer.echo(key)
    except EnvlabError as exc:
        fail(str(exc))


@runs_app.command("rollouts")
def runs_rollouts(
    run_id: int,
    fmt: str = typer.Option("jsonl", "--format", help="jsonl or parquet."),
    output: Path = typer.Option(..., "--output", "-o", help="The file to write."),
) -> None:
    """Every rollout of a run (transcripts, per-term rewards, tool calls) into a file."""
    if fmt not in ("jsonl", "parquet"):
        fail("--format is jsonl or parquet", 2)
    try:
        with output.open("wb") as destination:
            written = client().export_rollouts(run_id, destination, format=fmt)
    except EnvlabError as exc:
        output.unlink(missing_ok=True)
        fail(str(exc))
    typer.echo(f"{output}: {written} bytes", err=True)


# --- evaluations ----------------------------------------------------------------------------


@evals_app.command("run")
def evals_run(
    environment: int = typer.Option(..., "--env", help="The environment's id."),
    model: list[str] = typer.Option(..., "--model", "-m", help="A model (repeat): hub id, demo:<name>, "
                                    "run:<id>@<step|last>, solver, random."),
    episodes: int = typer.Option(10, help="Episodes per model."),
    seed: int = typer.Option(0),
    wait: bool = typer.Option(False, "--wait", help="Wait for the results and print them."),
    as_json: bool = JsonOption,
) -> None:
    """Evaluate models on the same seeded episodes."""
    models: list[Any] = [_model_spec(m) for m in model]

    def evaluated(api: Client) -> Evaluation:
        evaluation = api.evaluate(environment, models, episodes=episodes, seed=seed)
        if wait:
            while evaluation["status"] not in ("succeeded", "failed", "cancelled"):
                time.sleep(2)
                evaluation = api.evaluation(evaluation["id"])
        return evaluation

    evaluation = answer(evaluated)
    if as_json:
        show(evaluation)
    else:
        typer.echo(f"evaluation {evaluation['id']}: {evaluation['status']}")
        if evaluation.get("results"):
            table(evaluation["results"], list(evaluation["results"][0]))
    if wait and evaluation["status"] != "succeeded":
        raise typer.Exit(1)


def _model_spec(text: str) -> Any:
    """`run:<id>@<step|last>` is a run's checkpoint; anything else is passed as it is."""
    if text.startswith("run:") and "@" in text:
        run, _, step = text[4:].partition("@")
        try:
            return {"run": int(run), "checkpoint": step if step == "last" else int(step)}
        except ValueError:
            fail(f"{text}: write a checkpoint as run:<id>@<step> or run:<id>@last", 2)
    return text


@evals_app.command("list")
def evals_list(as_json: bool = JsonOption) -> None:
    listing(answer(lambda api: api.evaluations()), ["id", "status", "environment_name", "episodes", "created_at"], as_json)


@evals_app.command("show")
def evals_show(evaluation_id: int) -> None:
    show(answer(lambda api: api.evaluation(evaluation_id)))


# --- recipes and jobs -----------------------------------------------------------------------


@recipes_app.command("list")
def recipes_list(as_json: bool = JsonOption) -> None:
    listing(answer(lambda api: api.recipes()), ["id", "name", "latest_version", "updated_at"], as_json)


@recipes_app.command("show")
def recipes_show(recipe_id: int, version: int | None = typer.Option(None)) -> None:
    show(answer(lambda api: api.recipe(recipe_id, version)))


@jobs_app.command("show")
def jobs_show(job_id: int) -> None:
    show(answer(lambda api: api.job(job_id)))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
