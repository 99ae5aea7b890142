"""`Client(url, token)`: the lab's REST API as typed Python methods.

Every error the API answers (4xx, 5xx) and every connection failure is raised as one
`EnvlabError` carrying the API's own message and the HTTP status. Lists are returned whole:
a bare JSON list is taken with the rest its `Link: <...>; rel="next"` header points to (a
list the lab caps), and a page (`{results, next}`, or `{count, next, previous, results}` when
asked with `limit`/`offset`) is followed to its end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, TypedDict
from urllib.parse import urljoin

import requests

DEFAULT_TIMEOUT = 60.0


class EnvlabError(Exception):
    """A refused request or an unreachable lab: `status` is the HTTP status (None when no
    answer came), `message` the API's own words, `body` its parsed JSON where it had one."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(f"{message} (HTTP {status})" if status is not None else message)
        self.message = message
        self.status = status
        self.body = body


class Environment(TypedDict, total=False):
    id: int
    name: str
    kind: str
    status: str
    base_url: str
    shared: bool
    owner: str
    capacity: int | None
    capacity_note: str
    tools: list[Any]
    metadata: dict[str, Any]
    last_error: str
    checked_at: str | None
    created_at: str


class Run(TypedDict, total=False):
    id: int
    name: str
    owner: str
    status: str
    step: int
    max_steps: int
    error: str
    model: str
    config: dict[str, Any]
    last_seq: int
    progress: dict[str, Any]
    alerts: list[dict[str, Any]]
    status_display: str
    phase: str
    failure: str
    resumable: bool
    resumable_reason: str | None
    checkpoints: list[dict[str, Any]]
    warnings: list[str]
    created_at: str
    started_at: str | None
    finished_at: str | None


class Rollout(TypedDict, total=False):
    seq: int
    step: int
    env: str
    prompt: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    rewards: dict[str, float | None]
    reward: float | None
    advantage: float | None
    unscored: bool
    replay_url: str


class Evaluation(TypedDict, total=False):
    id: int
    owner: str
    status: str
    environment: int | None
    environment_name: str
    models: list[dict[str, Any]]
    episodes: int
    progress: dict[str, Any]
    columns: list[str]
    results: list[dict[str, Any]]
    error: str


class Recipe(TypedDict, total=False):
    id: int
    name: str
    description: str
    latest_version: int
    created_at: str
    updated_at: str
    version: int
    terms: list[dict[str, Any]]
    versions: list[dict[str, Any]]


class Job(TypedDict, total=False):
    id: int
    kind: str
    status: str
    progress: dict[str, Any]
    result: Any
    error: str


class Sweep(TypedDict, total=False):
    id: int
    name: str
    method: str
    count: int | None
    seed: int | None
    status: str
    grid: dict[str, Any]
    size: int
    statuses: dict[str, int]
    url: str
    # GET sweeps/<id>/ only:
    base: dict[str, Any]
    paths: list[str]
    metric: str
    members: list[dict[str, Any]]


TERMINAL_RUN_STATUSES = frozenset({"succeeded", "failed", "cancelled", "interrupted"})


def error_message(body: Any, fallback: str) -> str:
    """The API's message: `detail`, or each refused field as `field: message`."""
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str) and len(body) == 1:
            return body["detail"]
        parts = []
        for field, value in body.items():
            text = "; ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            parts.append(text if field in ("detail", "non_field_errors") else f"{field}: {text}")
        if parts:
            return "; ".join(parts)
    if isinstance(body, list) and body:
        return "; ".join(str(item) for item in body)
    return fallback


class Client:
    """`Client("http://127.0.0.1:8000", token)`; the token from `POST /api/auth/token/`
    (`Client.login`), the account page, or `envlab login`."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url.rstrip("/") + "/"
        self.token = token
        self.timeout = timeout
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    @classmethod
    def login(cls, url: str, username: str, password: str, **kwargs: Any) -> Client:
        """A client holding a new token made from a username and password."""
        answer = cls(url, **kwargs).request("POST", "auth/token/", json={"username": username, "password": password})
        return cls(url, answer["token"], **kwargs)

    @classmethod
    def from_config(cls, **kwargs: Any) -> Client:
        """The lab and token `envlab login` stored (or ENVLAB_URL / ENVLAB_TOKEN)."""
        from envlab_client.config import load_login

        url, token = load_login()
        return cls(url, token, **kwargs)

    # --- plumbing ---------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        if path.startswith(("http://", "https://")):
            return path
        return urljoin(self.url, "api/" + path.lstrip("/"))

    def _send(self, method: str, path: str, *, stream: bool = False, **kwargs: Any) -> requests.Response:
        try:
            response = self.session.request(method, self._url(path), timeout=self.timeout, stream=stream, **kwargs)
        except requests.RequestException as exc:
            raise EnvlabError(f"cannot reach the lab at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = None
            fallback = response.text.strip()[:500] or response.reason or "request refused"
            raise EnvlabError(error_message(body, fallback), status=response.status_code, body=body)
        return response

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call by path (under /api/); the parsed JSON answer, None for 204."""
        response = self._send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise EnvlabError(f"the lab answered {path} with no JSON", status=response.status_code) from exc

    def iter_pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Each item of a list endpoint: a bare list (followed through its `Link: rel="next"`
        header when the lab capped it), or pages followed through `next`."""
        url: str | None = path
        query: Mapping[str, Any] | None = params
        while url:
            response = self._send("GET", url, params=query)
            try:
                answer = response.json()
            except ValueError as exc:
                raise EnvlabError(f"the lab answered {path} with no JSON", status=response.status_code) from exc
            if isinstance(answer, list):
                yield from answer
                following = response.links.get("next", {}).get("url")
                url, query = following, None  # the link carries the whole query
                continue
            if not isinstance(answer, dict) or "results" not in answer:
                raise EnvlabError(f"{path} did not answer with a list", body=answer)
            yield from answer["results"]
            url, query = answer.get("next"), None  # `next` carries the whole query

    def fetch_all(self, path: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return list(self.iter_pages(path, params))

    def download(self, path: str, destination: BinaryIO, params: Mapping[str, Any] | None = None) -> int:
        """Stream a download into an open binary file; the bytes written."""
        written = 0
        with self._send("GET", path, params=params, stream=True) as response:
            for chunk in response.iter_content(chunk_size=1 << 16):
                destination.write(chunk)
                written += len(chunk)
        return written

    # --- environments -----------------------------------------------------------------------

    def environments(self) -> list[Environment]:
        return self.fetch_all("environments/")

    def environment(self, environment_id: int) -> Environment:
        return self.request("GET", f"environments/{environment_id}/")

    def register_environment(self, name: str, **source: Any) -> Environment:
        """`base_url=...`, `image=...` or `ors_catalog=...`, and the registration's options
        (`capacity`, `measure_capacity`, `ors_env`, `api_key_env`)."""
        return self.request("POST", "environments/", json={"name": name, **source})

    def probe_environment(self, environment_id: int) -> Environment:
        return self.request("POST", f"environments/{environment_id}/probe/")

    # --- runs -------------------------------------------------------------------------------

    def runs(self, **params: Any) -> list[Run]:
        return self.fetch_all("runs/", params or None)

    def run(self, run_id: int) -> Run:
        return self.request("GET", f"runs/{run_id}/")

    def launch(self, config: Mapping[str, Any]) -> Run:
        """A run from its config (the lab's RunConfig); the answer carries `warnings`."""
        return self.request("POST", "runs/", json=dict(config))

    def create_external_run(
        self, name: str, *, config: Mapping[str, Any] | None = None, tags: list[str] | None = None,
        model: str = "", max_steps: int = 0,
    ) -> Run:
        """A run trained outside the lab (your own script): running at once; log to it with `log`."""
        body: dict[str, Any] = {"name": name, "model": model, "max_steps": max_steps}
        if config is not None:
            body["config"] = dict(config)
        if tags:
            body["tags"] = list(tags)
        return self.request("POST", "runs/external/", json=body)

    def log(
        self, run_id: int, step: int, metrics: Mapping[str, float], rollouts: list[Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """One step of an external run: {name: number} and, optionally, rollouts
        ({prompt, messages, rewards: {term: number}, reward, advantage}). A step sent again replaces its values."""
        body: dict[str, Any] = {"step": step, "metrics": dict(metrics)}
        if rollouts:
            body["rollouts"] = [dict(row) for row in rollouts]
        return self.request("POST", f"runs/{run_id}/log/", json=body)

    def finish_run(self, run_id: int, status: str = "succeeded", error: str = "") -> Run:
        """End an external run: "succeeded" or "failed" (with `error`)."""
        body: dict[str, Any] = {"status": status}
        if error:
            body["error"] = error
        return self.request("POST", f"runs/{run_id}/finish/", json=body)

    def launch_demo(self) -> Run:
        return self.request("POST", "runs/demo/")

    def cancel(self, run_id: int) -> Run:
        return self.request("POST", f"runs/{run_id}/cancel/")

    def resume(self, run_id: int, checkpoint: int | None = None) -> Run:
        body = {} if checkpoint is None else {"checkpoint": checkpoint}
        return self.request("POST", f"runs/{run_id}/resume/", json=body)

    def metric_keys(self, run_id: int) -> list[str]:
        return self.request("GET", f"runs/{run_id}/metrics/keys/")["keys"]

    def metrics(self, run_id: int, keys: list[str] | None = None, max_points: int = 500) -> dict[str, list[list[float]]]:
        """Each key's `[step, value]` points, a long series bucketed to about max_points
        (the chart view); `export_metrics` gives every point."""
        params: dict[str, Any] = {"max_points": max_points}
        if keys:
            params["key"] = keys
        return self.request("GET", f"runs/{run_id}/metrics/", params=params)["series"]

    def export_metrics(
        self, run_id: int, destination: BinaryIO, *, keys: list[str] | None = None, format: str = "csv"
    ) -> int:
        """Every point (step, key, value) as CSV or Parquet, streamed into `destination`."""
        params: dict[str, Any] = {"format": format}
        if keys:
            params["key"] = keys
        return self.download(f"runs/{run_id}/metrics/export/", destination, params)

    def rollouts(self, run_id: int, *, step: int | None = None, env: str | None = None, after_seq: int | None = None,
                 page_size: int = 200) -> Iterator[Rollout]:
        """The run's rollouts, oldest first, page after page."""
        params = {"step": step, "env": env, "after_seq": after_seq, "limit": page_size}
        return self.iter_pages(f"runs/{run_id}/rollouts/", {k: v for k, v in params.items() if v is not None})

    def export_rollouts(self, run_id: int, destination: BinaryIO, *, format: str = "jsonl") -> int:
        """Every rollout as JSONL or Parquet (the lab writes both), streamed into `destination`."""
        return self.download(f"runs/{run_id}/rollouts/export/", destination, {"format": format})

    def events(self, run_id: int) -> list[dict[str, Any]]:
        return self.fetch_all(f"runs/{run_id}/events/")

    # --- sweeps -----------------------------------------------------------------------------

    def sweeps(self) -> list[Sweep]:
        return self.fetch_all("sweeps/")

    def sweep(self, sweep_id: int, metric: str | None = None) -> Sweep:
        """The sweep with its members, their differing parameters and `metric`'s summary each."""
        return self.request("GET", f"sweeps/{sweep_id}/", params={"metric": metric} if metric else None)

    def launch_sweep(
        self, base: Mapping[str, Any], grid: Mapping[str, list[Any]], *, name: str = "", method: str = "grid",
        count: int | None = None, seed: int | None = None,
    ) -> Sweep:
        """Runs from `base` (a run config) over `grid` ({dotted config path: values}): every
        combination (`method="grid"`) or `count` random draws (`"random"`, with `seed`). Members
        beyond your active-run quota wait, pending, and start as slots free."""
        body: dict[str, Any] = {"base": dict(base), "grid": dict(grid), "method": method}
        if name:
            body["name"] = name
        for key, value in (("count", count), ("seed", seed)):
            if value is not None:
                body[key] = value
        return self.request("POST", "sweeps/", json=body)

    def cancel_sweep_rest(self, sweep_id: int) -> list[int]:
        """Cancel the members still pending (running ones go on); the runs cancelled."""
        return self.request("POST", f"sweeps/{sweep_id}/cancel-rest/")["cancelled"]

    # --- evaluations, recipes, jobs ---------------------------------------------------------

    def evaluations(self) -> list[Evaluation]:
        return self.fetch_all("evaluations/")

    def evaluation(self, evaluation_id: int) -> Evaluation:
        return self.request("GET", f"evaluations/{evaluation_id}/")

    def evaluate(self, environment: int, models: list[Any], **options: Any) -> Evaluation:
        """`models`: hub ids, folders, `demo:<name>`, {"run": id, "checkpoint": step|"last"},
        "solver", "random"; options: episodes, seed, prompt, ..."""
        return self.request("POST", "evaluations/", json={"environment": environment, "models": models, **options})

    def cancel_evaluation(self, evaluation_id: int) -> Evaluation:
        return self.request("POST", f"evaluations/{evaluation_id}/cancel/")

    def recipes(self) -> list[Recipe]:
        return self.fetch_all("reward-recipes/")

    def recipe(self, recipe_id: int, version: int | None = None) -> Recipe:
        params = {"version": version} if version is not None else None
        return self.request("GET", f"reward-recipes/{recipe_id}/", params=params)

    def job(self, job_id: int) -> Job:
        return self.request("GET", f"jobs/{job_id}/")
