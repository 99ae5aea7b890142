"""The run page's facts and events over the socket: what each write announces on the run's
channel group (the real Redis channel layer of the test settings), what the snapshot
carries, and the events endpoint the page reads them back from."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from tests.factories import RunFactory
from tests.runs.test_run_socket import _first_frame
from tests.support.websocket import signed_in_headers
from webapp.runs.models import Run, RunEvent
from webapp.runs.services import (
    run_checkpointed,
    run_claim,
    run_finish,
    run_request_cancel,
    run_rewind,
)
from webapp.runs.telemetry.live import run_group
from webapp.runs.telemetry.record import telemetry_record
from worker.training.telemetry import TelemetrySink

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture
def run(owner: Any) -> Run:
    return RunFactory(owner=owner, name="facts", max_steps=5)


class Listener:
    """A channel in the run's group, as a consumer's would be."""

    def __init__(self, run_id: int) -> None:
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(run_group(run_id), self.channel)

    def next(self, timeout: float = 5.0) -> dict[str, Any] | None:
        async def receive() -> dict[str, Any] | None:
            try:
                message = await asyncio.wait_for(self.layer.receive(self.channel), timeout)
            except TimeoutError:
                return None
            return message["payload"]

        return async_to_sync(receive)()


def _last_event(run: Run) -> RunEvent:
    return RunEvent.objects.filter(run=run).latest("id")


def _status_note(run: Run, status: str, display: str, step: int, event_kind: str) -> dict[str, Any]:
    """The note a status change announces: the run's status at `step`, and the event it wrote."""
    event = RunEvent.objects.get(run=run, kind=event_kind)
    return {"type": "status", "status": status, "status_display": display, "step": step, "event": event.pk}


def test_each_write_announces_status_or_facts_with_the_newest_event(run: Run) -> None:
    listener = Listener(run.pk)

    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="worker-1")
    claimed = listener.next()
    telemetry_notes = telemetry_record(
        run_id=run.pk,
        lease_owner="lease-a",
        events=[
            ("metrics", (1, {"reward": 0.5})),
            (
                "alert",
                {"kind": "tool_failures", "step": 1, "message": f"failed: {XSS}", "active": True},
            ),
        ],
    )
    alert_event = _last_event(run)
    checkpoint_notes = run_checkpointed(run_id=run.pk, lease_owner="lease-a", step=1)
    run_request_cancel(run=run)
    cancel = listener.next()
    run_finish(run_id=run.pk, lease_owner="lease-a", status=Run.Status.SUCCEEDED, step=1)
    finished = listener.next()

    assert claimed == _status_note(run, "running", "running", 0, "claimed")
    # The alert's note comes with the telemetry (the worker's sink publishes it), after the metrics.
    assert telemetry_notes == [
        {"type": "metrics", "seq": 1, "step": 1, "values": {"reward": 0.5}},
        {"type": "facts", "event": alert_event.pk},
    ]
    assert (alert_event.kind, alert_event.message) == ("alert", f"failed: {XSS}")
    assert checkpoint_notes == [{"type": "facts", "checkpoint": 1}]
    assert cancel == _status_note(run, "running", "running", 1, "cancel_requested")
    assert finished == _status_note(run, "succeeded", "succeeded, with warnings", 1, "succeeded")
    assert listener.next(timeout=0.5) is None  # nothing else was announced
    run.refresh_from_db()
    assert (run.checkpoint_step, run.worker_name, run.attempts) == (1, "worker-1", 1)


def test_a_refused_write_announces_nothing(run: Run) -> None:
    listener = Listener(run.pk)
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="worker-1")
    assert listener.next() is not None

    notes = run_checkpointed(run_id=run.pk, lease_owner="someone-else", step=3)
    rewound = run_rewind(run_id=run.pk, lease_owner="someone-else", to_step=0)
    finished = run_finish(run_id=run.pk, lease_owner="someone-else", status=Run.Status.FAILED)

    assert (notes, rewound, finished) == ([], False, False)
    assert listener.next(timeout=0.5) is None
    run.refresh_from_db()
    assert (run.status, run.checkpoint_step) == ("running", None)


def test_a_new_attempt_announces_its_started_event(run: Run) -> None:
    """ "started" ends the last attempt's alerts: the page must hear of it to drop the banner."""
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="worker-1")
    listener = Listener(run.pk)

    assert run_rewind(run_id=run.pk, lease_owner="lease-a", to_step=0) is True

    started = RunEvent.objects.get(run=run, kind="started")
    assert listener.next() == {
        "type": "facts",
        "status": "running",
        "status_display": "running",
        "step": 0,
        "event": started.pk,
    }


def test_the_sink_announces_the_checkpoint_after_the_telemetry_before_it(run: Run) -> None:
    run_claim(run_id=run.pk, lease_owner="lease-a", worker_name="worker-1")
    listener = Listener(run.pk)
    sink = TelemetrySink(run_id=run.pk, lease_owner="lease-a", heartbeat_seconds=0.2)

    sink.alert({"kind": "zero_variance", "step": 2, "message": "same reward", "active": True})
    sink.checkpoint(2)
    assert sink.close(timeout=10) is True

    alert_event = _last_event(run)
    assert [listener.next(), listener.next()] == [
        {"type": "facts", "event": alert_event.pk},
        {"type": "facts", "checkpoint": 2},
    ]
    assert listener.next(timeout=0.5) is None
    run.refresh_from_db()
    assert run.checkpoint_step == 2


def test_the_snapshot_names_the_newest_event_and_the_status_as_read(run: Run, owner: Any) -> None:
    run.status = Run.Status.SUCCEEDED
    run.save(update_fields=["status"])
    RunEvent.objects.create(
        run=run, kind="alert", message="m", data={"alert": "reward_flat", "step": 2, "active": True}
    )
    newest = RunEvent.objects.create(run=run, kind="succeeded", message="Run succeeded.")
    headers, _ = signed_in_headers(owner)

    frame = _first_frame(run, headers)

    assert (frame["type"], frame["status"], frame["status_display"], frame["event"]) == (
        "snapshot",
        "succeeded",
        "succeeded, with warnings",
        newest.pk,
    )


# --- GET /api/runs/<id>/events/ -------------------------------------------------------------


def _events(run: Run, count: int) -> list[RunEvent]:
    return [
        RunEvent.objects.create(
            run=run,
            kind="alert" if i == 1 else "claimed",
            message=f"event {i} {XSS}",
            data={"i": i},
        )
        for i in range(count)
    ]


def test_events_after_an_id_page_by_page(api: Any, run: Run) -> None:
    events = _events(run, 5)
    other = RunFactory(owner=run.owner, name="other", max_steps=1)
    RunEvent.objects.create(run=other, kind="claimed", message="not this run's")

    first = api.get(f"/api/runs/{run.pk}/events/", {"after": events[0].pk, "limit": 3}).json()
    second = api.get(first["next"]).json()

    assert [e["id"] for e in first["results"]] == [e.pk for e in events[1:4]]
    assert first["results"][0] == {
        "id": events[1].pk,
        "kind": "alert",
        "message": f"event 1 {XSS}",
        "data": {"i": 1},
        "created_at": first["results"][0]["created_at"],
    }
    assert first["next"].endswith(f"/api/runs/{run.pk}/events/?after={events[3].pk}&limit=3")
    assert ([e["id"] for e in second["results"]], second["next"]) == ([events[4].pk], None)
    everything = api.get(f"/api/runs/{run.pk}/events/").json()
    assert ([e["id"] for e in everything["results"]], everything["next"]) == (
        [e.pk for e in events],
        None,
    )


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"after": "x"}, "after", "'x' is not an integer"),
        ({"after": "-1"}, "after", "must be between 0 and 1000000000000000"),
        ({"limit": "0"}, "limit", "must be between 1 and 500"),
    ],
)
def test_bad_parameters_are_refused_with_what_to_fix(
    api: Any, run: Run, query: dict, field: str, message: str
) -> None:
    response = api.get(f"/api/runs/{run.pk}/events/", query)

    assert response.status_code == 400
    assert response.json()[field] == [message]


@pytest.mark.parametrize(
    ("persona", "status"), [("api", 200), ("operator_api", 200), ("outsider_api", 404)]
)
def test_who_reads_the_events(request: Any, run: Run, persona: str, status: int) -> None:
    _events(run, 1)
    response = request.getfixturevalue(persona).get(f"/api/runs/{run.pk}/events/")

    assert response.status_code == status
    if status == 200:
        assert [e["message"] for e in response.json()["results"]] == [f"event 0 {XSS}"]


def test_anonymous_reads_no_events(client: Any, run: Run) -> None:
    _events(run, 1)
    response = client.get(f"/api/runs/{run.pk}/events/")

    assert response.status_code in (401, 403)
    assert "event 0" not in json.dumps(response.json())
