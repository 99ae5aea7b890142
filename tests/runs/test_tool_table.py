"""The run's tool table (webapp/runs/telemetry/tools.py): sums of the per-tool metrics, the most common
error and the first failing transcript, on the run page and at GET /api/runs/<id>/tools/.
Data goes in through the worker's own write path (telemetry_record)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from envs.adapters.tool_metrics import ERROR_CLASSES
from tests.factories import RunFactory
from webapp.runs import views
from webapp.runs.models import Rollout, Run
from webapp.runs.telemetry.record import telemetry_record
from webapp.runs.telemetry.tools import run_tool_table

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"
SERVER_ERROR = f"Server error: {XSS} (code: EXECUTION_ERROR)"
MISSING = "echo: missing a required argument: 'message'"
NO_ERRORS = dict.fromkeys(ERROR_CLASSES, 0)


def failed(name: str, message: str) -> dict[str, str]:
    return {"role": "tool", "name": name, "content": str({"error": message})}


def answered(name: str, text: str) -> dict[str, str]:
    return {"role": "tool", "name": name, "content": text}


def rollout(step: int, *messages: dict[str, str]) -> dict:
    return {"step": step, "env": "echo", "prompt": [], "messages": list(messages), "rewards": {}}


def tool_metrics(name: str, calls: int, failures: int, latency: float | None = None) -> dict[str, float]:
    values = {f"tools/{name}/call_total": calls, f"tools/{name}/failure_total": failures}
    if latency is not None:
        values[f"tools/{name}/latency_s"] = latency
    return values


def error_metrics(**counts: int) -> dict[str, float]:
    return {f"tools/errors/{name}": counts.get(name, 0) for name in ERROR_CLASSES}


def record(run: Run, step: int, metrics: dict[str, float], *rollouts: dict) -> None:
    events = [("metrics", (step, {"loss": 0.1, **metrics}))]
    if rollouts:
        events.append(("rollouts", list(rollouts)))
    telemetry_record(run_id=run.pk, lease_owner="lease", events=events)


def seq_of(run: Run, step: int, index: int) -> int:
    return list(Rollout.objects.filter(run=run, step=step).order_by("seq").values_list("seq", flat=True))[index]


@pytest.fixture
def run(owner) -> Run:
    return RunFactory(
        owner=owner, name="tools", max_steps=3, status=Run.Status.RUNNING, lease_owner="lease"
    )


@pytest.fixture
def three_steps(run) -> Run:
    """echo fails at steps 1 and 3; the model invents `search` at step 2; `total` fails at
    step 2 in the counts only (TRL dropped that result from the transcript)."""
    record(
        run, 1,
        {**tool_metrics("echo", 4, 1, 0.1), **tool_metrics("total", 0, 0), **error_metrics(execution_error=1)},
        rollout(1, answered("echo", "hi")),
        rollout(1, answered("echo", "hi"), failed("echo", SERVER_ERROR)),
    )
    record(
        run, 2,
        {
            **tool_metrics("echo", 2, 0, 0.4), **tool_metrics("search", 1, 1), **tool_metrics("total", 1, 1, 0.05),
            **error_metrics(unknown_tool=1, execution_error=1),
        },
        rollout(2, failed("search", "Tool search not found.")),
    )
    record(
        run, 3,
        {**tool_metrics("echo", 3, 2, 0.2), **tool_metrics("total", 0, 0), **error_metrics(invalid_args=2)},
        rollout(3, failed("echo", MISSING), failed("echo", MISSING)),
        rollout(3, failed("echo", MISSING), answered("echo", "ok")),
    )
    return run


def expected_table(run: Run) -> dict:
    return {
        "tools": [
            {
                "name": "echo", "calls": 9, "failures": 3, "failure_rate": pytest.approx(1 / 3),
                # Weighted by each step's calls: (4 * 0.1 + 2 * 0.4 + 3 * 0.2) / 9.
                "latency_s": pytest.approx(0.2), "top_error": MISSING, "top_error_count": 3,
                "first_failure_step": 1, "first_failure_seq": seq_of(run, 1, 1),
            },
            {
                "name": "search", "calls": 1, "failures": 1, "failure_rate": 1.0, "latency_s": None,
                "top_error": "Tool search not found.", "top_error_count": 1,
                "first_failure_step": 2, "first_failure_seq": seq_of(run, 2, 0),
            },
            {
                "name": "total", "calls": 1, "failures": 1, "failure_rate": 1.0, "latency_s": pytest.approx(0.05),
                "top_error": "", "top_error_count": 0, "first_failure_step": 2, "first_failure_seq": None,
            },
        ],
        "errors": {**NO_ERRORS, "execution_error": 2, "invalid_args": 2, "unknown_tool": 1},
    }


def test_table_sums_every_step_and_finds_the_first_failing_transcript(three_steps):
    assert run_tool_table(run=three_steps) == expected_table(three_steps)


def test_a_run_without_tool_metrics_has_an_empty_table(run):
    record(run, 1, {"reward": 0.5}, rollout(1, answered("echo", "hi")))

    assert run_tool_table(run=run) == {"tools": [], "errors": NO_ERRORS}


def test_a_long_run_reads_the_transcripts_of_two_steps_only(run):
    for step in range(1, 301):
        record(
            run, step, {**tool_metrics("echo", 2, 1, 0.1), **error_metrics(execution_error=1)},
            rollout(step, failed("echo", f"boom at {step}")),
            rollout(step, answered("echo", "hi")),
        )

    with CaptureQueriesContext(connection) as queries:
        table = run_tool_table(run=run)

    rollout_reads = [q["sql"] for q in queries if '"runs_rollout"' in q["sql"]]
    assert len(rollout_reads) == 2  # the first and the latest failing step
    assert len(queries) <= 8, [q["sql"] for q in queries]
    assert table["tools"] == [{
        "name": "echo", "calls": 600, "failures": 300, "failure_rate": 0.5, "latency_s": pytest.approx(0.1),
        "top_error": "boom at 1", "top_error_count": 1, "first_failure_step": 1,
        "first_failure_seq": seq_of(run, 1, 0),
    }]


# --- the API ----------------------------------------------------------------------------


def test_api_gives_the_table_to_the_owner_and_an_operator(three_steps, api, operator_api):
    expected = expected_table(three_steps)

    for client in (api, operator_api):
        response = client.get(f"/api/runs/{three_steps.pk}/tools/")
        assert response.status_code == 200
        assert response.json() == expected


def test_api_hides_the_run_from_others(three_steps, outsider_api, staff_api):
    for client in (outsider_api, staff_api, APIClient()):
        response = client.get(f"/api/runs/{three_steps.pk}/tools/")
        assert response.status_code in (401, 403, 404)
        assert "tools" not in response.json()
    assert outsider_api.get(f"/api/runs/{three_steps.pk}/tools/").status_code == 404
    assert APIClient().get(f"/api/runs/{three_steps.pk}/tools/").status_code == 401


def test_api_schema_describes_the_endpoint(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()

    operation = schema["paths"]["/api/runs/{id}/tools/"]["get"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    table = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert sorted(table["properties"]) == ["errors", "tools"]


# --- the run page -----------------------------------------------------------------------


def test_run_page_shows_the_table_escaped_with_links_to_the_first_failures(three_steps, owner_client):
    first = seq_of(three_steps, 1, 1)

    page = owner_client.get(f"/runs/{three_steps.pk}/").content.decode()

    table = page[page.index('id="tool-table"'):page.index("Transcripts")]
    assert XSS not in page
    assert "&lt;script&gt;" in page  # the rollout feed shows the message, escaped
    assert f'href="/runs/{three_steps.pk}/?rollout={first}#rollout-{first}"' in table
    assert f'href="/api/runs/{three_steps.pk}/rollouts/?step=2"' in table  # total: no transcript shows it
    assert [row.split('"')[0] for row in table.split('data-tool="')[1:]] == ["echo", "search", "total"]
    assert "echo: missing a required argument: &#x27;message&#x27;" in table
    assert '<span class="tool-error-class" data-class="unknown_tool">unknown_tool 1</span>' in table


def test_a_linked_rollout_older_than_the_feed_is_shown(three_steps, owner_client, monkeypatch):
    monkeypatch.setattr(views, "PAGE_ROLLOUTS", 2)  # the feed shows the newest two: step 3's
    first = seq_of(three_steps, 1, 1)

    plain = owner_client.get(f"/runs/{three_steps.pk}/").content.decode()
    linked = owner_client.get(f"/runs/{three_steps.pk}/?rollout={first}").content.decode()

    assert f'id="rollout-{first}"' not in plain
    assert f'id="rollout-{first}"' in linked
    for junk in ("abc", "-1", "99999", "1" * 40, "²"):
        response = owner_client.get(f"/runs/{three_steps.pk}/", {"rollout": junk})
        assert response.status_code == 200
        assert response.content.decode().count('class="rollout"') == 2


def test_an_error_message_with_markup_is_shown_as_text(run, owner_client):
    record(
        run, 1, {**tool_metrics("echo", 1, 1, 0.1), **error_metrics(execution_error=1)},
        rollout(1, failed("echo", SERVER_ERROR)),
    )

    page = owner_client.get(f"/runs/{run.pk}/").content.decode()

    table = page[page.index('id="tool-table"'):page.index("Transcripts")]
    assert XSS not in page
    assert (
        '<pre class="message-content">Server error: &lt;script&gt;alert(1)&lt;/script&gt; '
        "(code: EXECUTION_ERROR)</pre>"
    ) in table


def test_run_page_without_tool_calls_says_so(run, owner_client):
    page = owner_client.get(f"/runs/{run.pk}/").content.decode()

    assert '<p class="muted" id="no-tools">No tool calls recorded yet.</p>' in page
