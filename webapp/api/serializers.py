"""Output shapes of the API (input goes through the services' own validation)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp.catalog.capacity import capacity_note
from webapp.catalog.models import Environment
from webapp.runs.checkpoints import run_checkpoints
from webapp.runs.models import Rollout, Run, RunEvent, WorkerHeartbeat
from webapp.runs.selectors import rollout_replay_url, run_alerts, run_progress, run_status_display
from webapp.runs.services import LAUNCH_WARNING
from webapp.runs.workers import run_waiting_reason, worker_facts


class EnvironmentIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    kind = serializers.ChoiceField(
        choices=[("", "detect"), *Environment.Kind.choices], default="", allow_blank=True,
        help_text="Leave empty to detect OpenEnv or Open Reward Standard from the server.",
    )
    base_url = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    image = serializers.CharField(
        max_length=300, required=False, allow_blank=True, default="",
        help_text="A container image, started through OpenEnv's docker support (needs a Docker engine).",
    )
    ors_catalog = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default="", help_text="Open Reward catalog name 'Org/Env'."
    )
    ors_env = serializers.CharField(
        max_length=100, required=False, allow_blank=True, default="",
        help_text=(
            "Which environment of an ORS server that hosts several. Empty: every one is registered, "
            "named '<name>-<environment>'."
        ),
    )
    api_key_env = serializers.CharField(
        max_length=100, required=False, allow_blank=True, default="",
        help_text=(
            "With an ORS catalog name only: an allowed variable holding the installation's key "
            "(OPENREWARD_API_KEY by default). Or leave it empty and store your own key on your account page."
        ),
    )
    capacity = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=100_000)
    measure_capacity = serializers.BooleanField(
        required=False, default=False, help_text="Measure capacity by opening sessions until CAPACITY_REACHED."
    )
    shared = serializers.BooleanField(
        required=False, default=False,
        help_text="Every user sees it and may train on it; only its owner (and administrators) change it.",
    )


class EnvironmentChangeIn(serializers.Serializer):
    shared = serializers.BooleanField(required=False, help_text="Share with every user, or make private.")


class EnvironmentOut(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", default=None)
    capacity_note = serializers.SerializerMethodField(
        help_text='The capacity and where it came from, as its page shows it: "at least 22 (measured; the '
        'measurement ran out of time)", "1 (learned when the server refused a session at step 3 of run 7)".'
    )

    class Meta:
        model = Environment
        fields = [
            "id", "name", "kind", "base_url", "status", "tools", "capacity", "capacity_note", "metadata",
            "last_error", "checked_at", "created_at", "owner", "shared",
        ]

    def get_capacity_note(self, environment: Environment) -> str:
        return capacity_note(environment)


class EnvironmentRegisteredOut(EnvironmentOut):
    """The answer to a registration: the first entry's fields, as for a single one, and every
    entry the request made (one per environment of a multi-environment ORS server)."""

    registered = serializers.SerializerMethodField(
        help_text="Every entry this registration made, in the server's order (the first is the one above)."
    )

    class Meta(EnvironmentOut.Meta):
        fields = [*EnvironmentOut.Meta.fields, "registered"]

    @extend_schema_field(EnvironmentOut(many=True))
    def get_registered(self, environment: Environment) -> list[dict]:
        return EnvironmentOut(self.context.get("registered", [environment]), many=True).data


class AlertOut(serializers.Serializer):
    kind = serializers.CharField()
    step = serializers.IntegerField(allow_null=True)
    message = serializers.CharField()
    active = serializers.BooleanField()


class RunOut(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username")
    progress = serializers.SerializerMethodField()
    alerts = serializers.SerializerMethodField()
    status_display = serializers.SerializerMethodField(
        help_text='The status as shown to people: "succeeded, with warnings" when a succeeded run has an active alert.'
    )

    class Meta:
        model = Run
        fields = [
            "id", "name", "owner", "status", "step", "max_steps", "error", "model", "config",
            "cancel_requested", "attempts", "checkpoint_step", "last_seq", "worker_name",
            "created_at", "started_at", "finished_at", "heartbeat_at", "progress", "alerts", "status_display",
            "phase", "queue", "waiting_reason",
        ]

    queue = serializers.SerializerMethodField(
        help_text="The Celery queue of its train task: train, train-cuda-<N> or train-vllm-<N>."
    )
    waiting_reason = serializers.SerializerMethodField(
        help_text="For a queued run that no worker seen lately can carry: why it waits; else null."
    )

    def get_queue(self, run: Run) -> str:
        return run.queue

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_waiting_reason(self, run: Run) -> str | None:
        return run_waiting_reason(run=run)

    def get_progress(self, run: Run) -> dict:
        return run_progress(run=run)

    def _alerts(self, run: Run) -> list[dict]:
        cached = getattr(run, "_alerts_out", None)
        if cached is None:
            cached = run._alerts_out = run_alerts(run=run)  # type: ignore[attr-defined]
        return cached

    @extend_schema_field(AlertOut(many=True))
    def get_alerts(self, run: Run) -> list[dict]:
        return self._alerts(run)

    @extend_schema_field(serializers.CharField())
    def get_status_display(self, run: Run) -> str:
        return run_status_display(run=run, alerts=self._alerts(run))


class CheckpointOut(serializers.Serializer):
    step = serializers.IntegerField(help_text="The GRPO step; 0 is the warm-up's model.")
    phase = serializers.ChoiceField(choices=Run.Phase.choices)
    created_at = serializers.DateTimeField()
    size_bytes = serializers.IntegerField()


class RunDetailOut(RunOut):
    """One run, with what is on disk for it (not in lists: it reads the run's folder)."""

    checkpoints = serializers.SerializerMethodField(
        help_text='Usable as a model: {"run": <id>, "checkpoint": <step>|"last"}.'
    )

    class Meta(RunOut.Meta):
        fields = [*RunOut.Meta.fields, "checkpoints"]

    @extend_schema_field(CheckpointOut(many=True))
    def get_checkpoints(self, run: Run) -> list[dict]:
        return [checkpoint.as_dict() for checkpoint in run_checkpoints(run=run)]


class RunLaunchOut(RunDetailOut):
    """The answer to a launch: the queued run, and what the launch was warned about."""

    warnings = serializers.SerializerMethodField(
        help_text="What the launch should know but did not refuse it for (a capacity that is only a lower "
        "bound, below the generation batch); also the run's launch_warning events."
    )

    class Meta(RunDetailOut.Meta):
        fields = [*RunDetailOut.Meta.fields, "warnings"]

    def get_warnings(self, run: Run) -> list[str]:
        return list(run.events.filter(kind=LAUNCH_WARNING).order_by("pk").values_list("message", flat=True))


class RunEventOut(serializers.ModelSerializer):
    """Something that happened to a run (claimed, checkpoint resumed, an alert raised...).
    `message` may quote model or environment text: show it as text."""

    class Meta:
        model = RunEvent
        fields = ["id", "kind", "message", "data", "created_at"]


class RunToolOut(serializers.Serializer):
    """One tool of a run (webapp/runs/telemetry/tools.py). `name` and `top_error` are model or
    environment text: show them as text."""

    name = serializers.CharField()
    calls = serializers.IntegerField()
    failures = serializers.IntegerField()
    failure_rate = serializers.FloatField(allow_null=True, help_text="failures / calls; null before any call.")
    latency_s = serializers.FloatField(
        allow_null=True, help_text="Mean seconds per call over the run; null when no call was timed."
    )
    top_error = serializers.CharField(
        allow_blank=True,
        help_text="The most common error message in the transcripts of the tool's first and latest failing steps.",
    )
    top_error_count = serializers.IntegerField(help_text="How often top_error occurs in those steps.")
    first_failure_step = serializers.IntegerField(allow_null=True)
    first_failure_seq = serializers.IntegerField(
        allow_null=True,
        help_text="The rollout (its seq) of the tool's first failure; null when its transcripts do not show it.",
    )


class RunToolTableOut(serializers.Serializer):
    tools = RunToolOut(many=True, help_text="Most failures first, then most calls.")
    errors = serializers.DictField(
        child=serializers.IntegerField(),
        help_text=(
            "Failed calls of every tool by class: execution_error, invalid_args, transport_error, "
            "tool_not_found, timeout (OpenEnv's MCP error types) and unknown_tool."
        ),
    )


class RolloutOut(serializers.ModelSerializer):
    replay_url = serializers.SerializerMethodField(
        help_text="The rollout's replay page (an absolute path; it asks for a signed-in session)."
    )

    class Meta:
        model = Rollout
        fields = [
            "seq", "step", "env", "seed", "prompt_key", "prompt", "messages", "rewards", "reward", "advantage",
            "unscored", "created_at", "replay_url",
        ]

    def get_replay_url(self, rollout: Rollout) -> str:
        return rollout_replay_url(rollout)


class RolloutPageOut(serializers.Serializer):
    results = RolloutOut(many=True)
    next = serializers.CharField(allow_null=True, help_text="The next page's URL; null on the last page.")


class WorkerOut(serializers.ModelSerializer):
    current_run = serializers.SerializerMethodField(
        help_text="The run it trains, when the caller may see that run; null otherwise."
    )

    class Meta:
        model = WorkerHeartbeat
        fields = ["name", "capabilities", "heartbeat_at", "current_run", "queues", "seen"]

    queues = serializers.SerializerMethodField(help_text="The training queues its capabilities let it consume.")
    seen = serializers.SerializerMethodField(help_text="Heartbeat recent enough to count on it at launch.")

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_queues(self, worker: WorkerHeartbeat) -> list[str]:
        return worker_facts(worker)["queues"]

    def get_seen(self, worker: WorkerHeartbeat) -> bool:
        return bool(worker_facts(worker)["seen"])

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_current_run(self, worker: WorkerHeartbeat) -> int | None:
        visible = self.context.get("visible_runs", set())
        return worker.current_run_id if worker.current_run_id in visible else None


# --- catalog snapshots (webapp.catalog.snapshot) ----------------------------------------------
# Imported here, not at the top: this section is appended by its own change.
from webapp.catalog.models import CatalogSnapshot  # noqa: E402
from webapp.catalog.snapshot import catalog_entries  # noqa: E402


class CatalogSnapshotIn(serializers.Serializer):
    """A snapshot as a multipart `file`, or as JSON `{name, snapshot: {...}}`."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    file = serializers.FileField(
        required=False, help_text="The JSON file `openenv catalog build --output` wrote."
    )
    snapshot = serializers.JSONField(
        required=False, help_text="The snapshot's content, when it is sent as JSON."
    )


class CatalogSnapshotOut(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", default=None)
    entries = serializers.SerializerMethodField()

    class Meta:
        model = CatalogSnapshot
        fields = [
            "id", "name", "owner", "uploaded_at", "format_version", "publisher", "source_uri",
            "source_revision", "digest", "entries",
        ]

    def get_entries(self, snapshot: CatalogSnapshot) -> list[dict]:
        return catalog_entries(snapshot)


class CatalogEntryRegisterIn(serializers.Serializer):
    identifier = serializers.CharField(max_length=1000)
    base_url = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    start_bundled = serializers.BooleanField(
        required=False, default=False,
        help_text="Start the bundled server the entry names and register it (instead of base_url).",
    )
    name = serializers.CharField(
        max_length=100, required=False, allow_blank=True, default="",
        help_text="Defaults to the entry's display name.",
    )
