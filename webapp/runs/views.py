"""Pages for runs: the home list with the one-click demo, the run form, the live run page."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from webapp.catalog.models import Environment
from webapp.catalog.selectors import environments_visible_to
from webapp.core.plotly import plotly_url
from webapp.core.throttles import throttle_posts
from webapp.core.users import signed_in_user
from webapp.jobs.models import Job
from webapp.rewards.selectors import recipes_visible_to
from webapp.runs.checkpoints import run_checkpoints
from webapp.runs.config import RunConfigError, has_sft_warmup
from webapp.runs.demo import demo_config, demo_environment, run_launch_demo
from webapp.runs.forms import (
    ALERT_FIELDS,
    GRPO_FIELDS,
    REWARD_INITIAL,
    WARMUP_FIELDS,
    RewardFormSet,
    RunForm,
    RunJsonForm,
    errors_to_form,
)
from webapp.runs.labels import NAME_MAX_LENGTH
from webapp.runs.models import Rollout, Run
from webapp.runs.presets import preset_config_for, preset_get, presets
from webapp.runs.probe import PROBE_JOB_KIND, probe_start
from webapp.runs.selectors import (
    run_alerts,
    run_can_change,
    run_environments,
    run_for,
    run_progress,
    run_resumable,
    run_rollout_steps,
    run_status_display,
    runs_visible_to,
    runs_with_alerts,
)
from webapp.runs.services import (
    RunStateError,
    run_launch,
    run_request_cancel,
    run_resume,
)
from webapp.runs.table import RunListRejected, runs_metric_summaries, runs_table, summary_keys
from webapp.runs.telemetry.charts import run_chart_page, run_charts
from webapp.runs.telemetry.export import term_names
from webapp.runs.telemetry.layout import MAX_METRIC_CHARTS, MAX_SMOOTHING, run_layout_for
from webapp.runs.telemetry.metric_keys import WALL_TIME_KEY
from webapp.runs.telemetry.series import run_metric_series
from webapp.runs.telemetry.tools import run_tool_table
from webapp.runs.telemetry.transcripts import transcript_messages
from webapp.runs.workers import run_waiting_reason

HOME_RUNS = 50
# Rollouts rendered with the page (what shows without scripts); the live script replaces
# them with its virtualised list (webapp/static/js/rollout_list.js), which pages in the others.
PAGE_ROLLOUTS = 20
METRIC_POINTS = 2000
FORM_GROUPS = (
    ("Run", ("name", "model")),
    ("Environment", ("environment", "prompt", "rows")),
    ("GRPO", GRPO_FIELDS),
    ("Run health", tuple(ALERT_FIELDS)),
    ("SFT warm-up", ("warmup_enabled", *WARMUP_FIELDS, "warmup_only")),
    ("Reward recipe", ("reward_recipe",)),
)


def _run_rows(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        active = [alert for alert in run_alerts(run=run) if alert["active"]]
        rows.append({
            "run": run, "progress": _percent(run.step, run.max_steps), "active_alerts": active,
            "status_display": run_status_display(run=run, alerts=active),
        })
    return rows


def _percent(step: int, max_steps: int) -> int:
    return min(100, round(100 * step / max_steps)) if max_steps else 0


def _home(request: HttpRequest, demo_errors: list[str] | None = None) -> HttpResponse:
    """The runs table: the user's own runs, filtered, sorted, paged and summarised as the
    query string says (the same parameters as GET /api/runs/), so a reload or a shared link
    shows the same table."""
    user = signed_in_user(request)
    mine = runs_with_alerts(runs_visible_to(user=user).filter(owner=user))
    table_errors: list[str] = []
    try:
        runs = runs_table(runs=mine, params=request.GET)
        keys = summary_keys(request.GET)
    except RunListRejected as exc:
        table_errors = [f"{field}: {message}" for field, messages in exc.errors.items() for message in messages]
        runs, keys = mine.none(), []
    offset = _query_int(request.GET.get("offset"), 0, 10**9)
    total = runs.count()
    page = list(runs[offset : offset + HOME_RUNS])
    summaries = runs_metric_summaries(run_ids=[run.pk for run in page], keys=keys)
    rows = _run_rows(page)
    for row in rows:
        found = summaries.get(row["run"].pk, {})
        row["summary"] = [found.get(key) for key in keys]
        row["tags"] = [tag.slug for tag in row["run"].tags.all()]
    ordering = request.GET.get("ordering", "")
    return render(
        request,
        "home.html",
        {
            "runs": rows,
            "total": total,
            "first": offset + 1 if page else 0,
            "last": offset + len(page),
            "previous_url": _home_query(request, offset=max(0, offset - HOME_RUNS)) if offset else None,
            "next_url": _home_query(request, offset=offset + HOME_RUNS) if offset + len(page) < total else None,
            "columns": [
                {"field": field, "label": label, "url": _home_query(
                    request, offset=0, ordering=f"-{field}" if ordering == field else field
                ), "sorted": "ascending" if ordering == field else "descending" if ordering == f"-{field}" else ""}
                for field, label in HOME_COLUMNS
            ],
            "summary_keys": keys,
            "summary_inputs": [*keys, *[""] * max(1, 3 - len(keys))],
            "filters": {name: request.GET.get(name, "") for name in ("status", "tag", "group", "model", "search")},
            "ordering": ordering,
            "statuses": Run.Status.choices,
            "table_errors": table_errors,
            "filtered": any(request.GET.get(name) for name in ("status", "tag", "group", "model", "search")),
            "demo_errors": demo_errors or [],
            "echo_registered": _demo_environment(request) is not None,
            "nav": "runs",
        },
    )


# The runs table's sortable columns (a subset of webapp.runs.table.ORDERING_FIELDS), in page order.
HOME_COLUMNS = (("id", "#"), ("name", "Name"), ("group", "Group"), ("model", "Model"), ("status", "Status"),
                ("step", "Progress"), ("created_at", "Created"))


def _query_int(raw: str | None, lo: int, hi: int) -> int:
    if raw and raw.isascii() and raw.isdigit() and len(raw) <= 10:
        return min(hi, max(lo, int(raw)))
    return lo


def _home_query(request: HttpRequest, **changes: Any) -> str:
    """The home page's URL with the current query, `changes` applied (offset 0 is dropped)."""
    params = request.GET.copy()
    for name, value in changes.items():
        if value in (None, "", 0):
            params.pop(name, None)
        else:
            params[name] = str(value)
    query = params.urlencode()
    return reverse("home") + (f"?{query}" if query else "")


def _demo_environment(request: HttpRequest) -> Environment | None:
    return demo_environment(user=signed_in_user(request))


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return _home(request)


@login_required
@throttle_posts("launch")
@require_POST
def run_demo(request: HttpRequest) -> HttpResponse:
    try:
        run = run_launch_demo(owner=signed_in_user(request))
    except RunConfigError as exc:
        lines = [
            f"{key}: {message}" for key, key_messages in exc.errors.items() for message in key_messages
        ]
        return _home(request, demo_errors=lines)
    messages.success(request, f"Demo run #{run.pk} queued.")
    return redirect("run-detail", pk=run.pk)


@login_required
@throttle_posts("launch")
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    posted = request.POST if request.method == "POST" else None
    mode = request.POST.get("mode", "form") if posted is not None else "form"
    # "Start a run from it" on a run's checkpoint links here with ?model=run:<id>@<step>.
    initial_model = request.GET.get("model", "")[:500]
    form = RunForm(posted if mode == "form" else None, initial={"model": initial_model} if initial_model else None)
    # Only environments the user may see are offered (run_launch refuses the others too).
    form.fields["environment"].queryset = environments_visible_to(user=request.user)
    form.fields["environment"].viewer_id = request.user.pk
    form.fields["reward_recipe"].queryset = recipes_visible_to(user=request.user)
    rewards = RewardFormSet(
        posted if mode == "form" else None, initial=REWARD_INITIAL, prefix="rewards"
    )
    echo = _demo_environment(request)
    if echo is not None:  # the entry the demo trains on, never another user's entry named echo
        form.fields["environment"].initial = echo.pk
    # "Start from a preset" links here with ?preset=<slug>: its config fills the JSON form;
    # "Launch again" on a run's page with ?from=<id>: its config, under a fresh name, in the JSON
    # form (opened). A run the user may not see is a 404, as everywhere.
    preset = preset_get(slug=request.GET.get("preset", "")[:64]) if posted is None else None
    source = _launch_again_source(request) if posted is None and preset is None else None
    # A learnability probe's page links back here with ?probe=<job id>: its numbers above the
    # form, and the config it probed in the JSON form.
    probe = _probe_card(request) if posted is None and preset is None and source is None else None
    if source is not None:
        start = launch_again_config(source)
    elif preset is not None:
        start = preset_config_for(preset=preset, user=signed_in_user(request))
    elif probe is not None and isinstance(probe["job"].params.get("run_config"), dict):
        start = probe["job"].params["run_config"]
    else:
        start = demo_config(echo.pk if echo else 1)
    if preset is not None or source is not None or probe is not None:
        mode = "json"
    json_form = RunJsonForm(posted if mode == "json" else None, initial={"config_json": json.dumps(start, indent=2)})
    top_errors: list[str] = []
    json_errors: list[str] = []
    if posted is not None:
        data: Any = None
        if mode == "json" and json_form.is_valid():
            data = json_form.cleaned_data["config_json"]
        elif mode == "form" and form.is_valid() and rewards.is_valid():
            terms = [term for term in (f.term() for f in rewards.forms) if term is not None]
            data = {**form.config_part(), "rewards": form.rewards_part(terms)}
        if data is not None:
            probing = request.POST.get("action") == "probe"
            try:
                if probing:  # a dry run of this config before it is spent (webapp/runs/probe.py)
                    job = probe_start(owner=signed_in_user(request), data=data)
                else:
                    run = run_launch(owner=signed_in_user(request), data=data)
            except RunConfigError as exc:
                if mode == "json":
                    json_errors = [f"{k}: {m}" for k, msgs in exc.errors.items() for m in msgs]
                else:
                    top_errors = errors_to_form(exc.errors, form, rewards)
            else:
                if probing:
                    messages.success(request, f"Learnability probe queued (job #{job.pk}).")
                    return redirect("job-detail", pk=job.pk)
                messages.success(request, f"Run #{run.pk} queued.")
                return redirect("run-detail", pk=run.pk)
    return render(
        request,
        "runs/run_form.html",
        {
            "form": form,
            "field_groups": [
                (title, [form[name] for name in names]) for title, names in FORM_GROUPS
            ],
            "rewards": rewards,
            "json_form": json_form,
            "top_errors": top_errors,
            "json_errors": json_errors,
            "mode": mode,
            "presets": presets(),
            "preset": preset,
            "environments_exist": environments_visible_to(user=request.user).exists(),
            "nav": "new-run",
            "launch_again": source,
            "probe": probe,
        },
    )


def _probe_card(request: HttpRequest) -> dict[str, Any] | None:
    """The caller's probe named by ?probe=<id>, as the form's card shows it; None without one
    (another user's job is as absent as a missing one)."""
    raw = request.GET.get("probe", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        return None
    job = Job.objects.filter(
        pk=int(raw), owner=signed_in_user(request), kind=PROBE_JOB_KIND, params__has_key="probe_key"
    ).first()
    if job is None:
        return None
    result = job.result if isinstance(job.result, dict) else {}
    numbers = found if isinstance(found := result.get("probe"), dict) else {}
    return {
        "job": job,
        "result": result,
        "numbers": numbers,
        "expected_percent": round(float(numbers.get("expected_zero_variance_fraction") or 0) * 100),
        "measured_percent": round(float(result.get("zero_variance_fraction") or 0) * 100),
    }


AGAIN_SUFFIX = " (again)"


def _launch_again_source(request: HttpRequest) -> Run | None:
    raw = request.GET.get("from", "")
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        raise Http404("no such run")
    return run_for(user=request.user, pk=int(raw))


def launch_again_config(run: Run) -> dict[str, Any]:
    """The run's config as it was launched, named afresh ("<name> (again)", cut to fit RunConfig)."""
    config = dict(run.config) if isinstance(run.config, dict) else {}
    base = str(config.get("name") or run.name)
    if base.endswith(AGAIN_SUFFIX):
        base = base[: -len(AGAIN_SUFFIX)]
    config["name"] = base[: NAME_MAX_LENGTH - len(AGAIN_SUFFIX)] + AGAIN_SUFFIX
    return config


# --- the run page -------------------------------------------------------------------------


def duration(seconds: float | None) -> str:
    """'1h 02m 03s', '2m 05s', '45s' (the live page's formatDuration writes the same)."""
    if seconds is None:
        return "—"
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "—"


def rollout_view(rollout: Rollout) -> dict[str, Any]:
    """A rollout as the transcript feed shows it (webapp/static/js/run_live.js renders the same)."""
    rewards = rollout.rewards if isinstance(rollout.rewards, dict) else {}
    return {
        "seq": rollout.seq,
        "step": rollout.step,
        "env": rollout.env,
        "reward": _number(rollout.reward),
        "advantage": _number(rollout.advantage),
        "prompt_key": rollout.prompt_key,
        "rewards": [(str(term), _number(value)) for term, value in rewards.items()],
        "prompt": transcript_messages(rollout.prompt),
        "messages": transcript_messages(rollout.messages),
    }


def _live_config(run: Run, last_seq: int, progress: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": run.pk,
        "last_seq": last_seq,
        "status": run.status,
        "cancel_requested": run.cancel_requested,
        "resumable": run_resumable(run=run)[0],
        "step": run.step,
        "max_steps": run.max_steps,
        "elapsed_seconds": progress["elapsed_seconds"],
        "eta_seconds": progress["eta_seconds"],
        "ws_path": f"/ws/runs/{run.pk}/",
        "api_run": reverse("api-run", args=[run.pk]),
        "api_metrics": reverse("api-run-metrics", args=[run.pk]),
        "api_rollouts": reverse("api-run-rollouts", args=[run.pk]),
        "api_rollout_steps": reverse("api-run-rollout-steps", args=[run.pk]),
        # [[step, rollouts up to last_seq], ...], newest step first: the transcript list's size.
        "rollout_steps": run_rollout_steps(run=run, through_seq=last_seq),
        "metric_points": METRIC_POINTS,
        "active_statuses": list(Run.NOT_ENDED),
        "resumable_statuses": list(Run.RESUMABLE),
    }


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(user=request.user, pk=pk)
    # The sequence number is read before the data, so what the page shows covers at least
    # everything up to it; the live script skips events at or below it.
    last_seq = run.last_seq
    resumable, why_not = run_resumable(run=run)
    series = run_metric_series(run=run, keys=None, max_points=METRIC_POINTS)
    charts = run_charts(
        series, warmup=has_sft_warmup(run.config or {}), gpu=(run.config or {}).get("device") == "cuda"
    )
    layout = run_layout_for(user=signed_in_user(request))
    chart_page = {
        **run_chart_page(
            series, logged_keys=sorted(series), wall_time_key=WALL_TIME_KEY, added=layout["metrics"]
        ),
        "layout": layout,
        "api_layout": reverse("api-run-layout"),
        "csrf_token": get_token(request),
        "max_metric_charts": MAX_METRIC_CHARTS,
        "max_smoothing": MAX_SMOOTHING,
        "wall_time_key": WALL_TIME_KEY,
    }
    rollouts = _first_rollouts(request, run)
    rollouts += _linked_rollout(request, run, rollouts)
    progress = run_progress(run=run)
    alerts = run_alerts(run=run)
    return render(
        request,
        "runs/run_detail.html",
        {
            "run": run,
            "active_alerts": [alert for alert in alerts if alert["active"]],
            "status_display": run_status_display(run=run, alerts=alerts),
            "progress": progress,
            "percent": _percent(run.step, run.max_steps),
            "elapsed": duration(progress["elapsed_seconds"]),
            "eta": duration(progress["eta_seconds"] if run.status == Run.Status.RUNNING else None),
            "charts": charts,
            "chart_page": chart_page,
            "rollouts": [rollout_view(r) for r in rollouts],
            "tool_table": run_tool_table(run=run),
            "reward_terms": term_names(run),
            "checkpoints": run_checkpoints(run=run),
            "environments": run_environments(run=run),
            "waiting_reason": run_waiting_reason(run=run),
            "events": run.events.order_by("-created_at", "-id")[:200],
            "config_json": json.dumps(run.config, indent=2, sort_keys=True, ensure_ascii=False),
            "live": _live_config(run, last_seq, progress),
            # Cancel and resume are offered only to those who may use them (the live
            # script shows and hides the forms by status).
            "can_change": run_can_change(user=request.user, run=run),
            # Name, tags, group and notes are edited by the owner only (PATCH /api/runs/<id>/).
            "can_label": run.owner_id == request.user.pk,
            "run_tags": list(run.tags.values_list("slug", flat=True)),
            "api_run": reverse("api-run", args=[run.pk]),
            "can_cancel": run.status in Run.NOT_ENDED and not run.cancel_requested,
            "can_resume": resumable,
            "not_resumable_reason": "" if resumable or run.status != Run.Status.FAILED else why_not,
            "plotly_url": plotly_url(),
        },
    )


def _first_rollouts(request: HttpRequest, run: Run) -> list[Rollout]:
    """The newest PAGE_ROLLOUTS of the list as it opens (`?step=<n>`: of that step), shown
    before the script takes over; none under `?render=all`, the benchmark's baseline, where
    the script renders every row itself."""
    if request.GET.get("render") == "all":
        return []
    rows = Rollout.objects.filter(run=run)
    raw = request.GET.get("step", "")
    if raw.isascii() and raw.isdigit() and len(raw) <= 9:
        rows = rows.filter(step=int(raw))
    return list(rows.order_by("-seq")[:PAGE_ROLLOUTS])


def _linked_rollout(request: HttpRequest, run: Run, shown: list[Rollout]) -> list[Rollout]:
    """The rollout `?rollout=<seq>` names (the tool table links a tool's first failure),
    when the newest ones shown leave it out; nothing for a seq the run does not have."""
    raw = request.GET.get("rollout", "")
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 15):
        return []
    seq = int(raw)
    if any(rollout.seq == seq for rollout in shown):
        return []
    return list(Rollout.objects.filter(run=run, seq=seq)[:1])


def _changeable_run(request: HttpRequest, pk: int) -> Run:
    """404 for a run the user cannot see; 403 for one they see but may not change."""
    return run_for(user=request.user, pk=pk, change=True)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = _changeable_run(request, pk)
    try:
        run = run_request_cancel(run=run)
    except RunStateError as exc:
        messages.error(request, f"Nothing to cancel: {exc}.")
        return redirect("run-detail", pk=run.pk)
    if run.status == Run.Status.CANCELLED:
        messages.success(request, "Run cancelled.")
    else:
        messages.success(
            request, "Cancel requested: the run stops after its current step, with a checkpoint."
        )
    return redirect("run-detail", pk=run.pk)


@login_required
@require_POST
def run_resume_view(request: HttpRequest, pk: int) -> HttpResponse:
    run = _changeable_run(request, pk)
    try:
        run = run_resume(run=run)
    except RunStateError as exc:
        messages.error(request, f"Cannot resume: {exc}.")
    else:
        messages.success(request, "Resume queued.")
    return redirect("run-detail", pk=run.pk)
