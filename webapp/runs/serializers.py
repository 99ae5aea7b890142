"""The API's shapes of runs, their alerts, checkpoints, events, tools, rollouts, and workers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, extend_schema_field
from rest_framework import serializers

from webapp.runs.checkpoints import run_checkpoints
from webapp.runs.models import Rollout, Run, RunEvent, RunTag, WorkerHeartbeat
from webapp.runs.selectors import (
    rollout_replay_url,
    run_alerts,
    run_progress,
    run_resumable,
    run_status_display,
)
from webapp.runs.services import LAUNCH_WARNING
from webapp.runs.telemetry.layout import MAX_METRIC_CHARTS, MAX_SMOOTHING, METRIC_REF, X_AXES
from webapp.runs.workers import run_waiting_reason, worker_facts


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
        fields: tuple[str, ...] = (
            "id", "name", "owner", "status", "step", "max_steps", "error", "model", "config",
            "cancel_requested", "attempts", "checkpoint_step", "last_seq", "worker_name",
            "created_at", "started_at", "finished_at", "heartbeat_at", "progress", "alerts", "status_display",
            "phase", "queue", "waiting_reason", "failure", "resumable", "resumable_reason",
            "tags", "group", "notes", "external",
        )

    tags: serializers.SlugRelatedField[RunTag] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="slug", help_text="Its tags (slugs), sorted."
    )
    group = serializers.CharField(read_only=True, help_text="The runs it belongs with (seeds, a sweep); may be empty.")
    notes = serializers.CharField(read_only=True, help_text="Its owner's notes: untrusted text, show it as text.")

    failure = serializers.CharField(
        read_only=True,
        help_text=(
            "A failed run's class of failure: config, model, alert, infrastructure (a worker, machine, network "
            "or server that went away) or error (unclassified); empty otherwise."
        ),
    )
    resumable = serializers.SerializerMethodField(
        help_text=(
            "Whether POST /api/runs/<id>/resume/ takes it: interrupted and cancelled runs, and failed runs whose "
            "failure is infrastructure."
        )
    )
    resumable_reason = serializers.SerializerMethodField(
        help_text="Why it cannot resume (null when it can)."
    )

    def get_resumable(self, run: Run) -> bool:
        return run_resumable(run=run)[0]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_resumable_reason(self, run: Run) -> str | None:
        return run_resumable(run=run)[1] or None

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
        # Read once for the two fields that show them (alerts, status_display): a run's fields
        # are made one after the other, by this serializer (or by a list's one child).
        if getattr(self, "_alerts_of", None) is not run:
            self._alerts_of, self._alerts_read = run, run_alerts(run=run)
        return self._alerts_read

    @extend_schema_field(AlertOut(many=True))
    def get_alerts(self, run: Run) -> list[dict]:
        return self._alerts(run)

    @extend_schema_field(serializers.CharField())
    def get_status_display(self, run: Run) -> str:
        return run_status_display(run=run, alerts=self._alerts(run))


class MetricSummaryOut(serializers.Serializer):
    last = serializers.FloatField(allow_null=True, help_text="The value at `step` (null: TRL logged NaN).")
    max = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField(help_text="The last step that logged the key.")


class RunRowOut(RunOut):
    """A row of the runs table: the run, and a summary of each metric asked for (`summary=`)."""

    summary = serializers.SerializerMethodField(
        help_text="{key: {last, max, min, step}} for each `summary=` key the run logged; {} when none asked."
    )

    class Meta(RunOut.Meta):
        fields = (*RunOut.Meta.fields, "summary")

    @extend_schema_field(serializers.DictField(child=MetricSummaryOut()))
    def get_summary(self, run: Run) -> dict:
        return self.context.get("summaries", {}).get(run.pk, {})


class RunLabelsIn(serializers.Serializer):
    """What `PATCH /api/runs/<id>/` edits; each field is optional, tags are replaced whole
    (checked by webapp.runs.labels)."""

    name = serializers.CharField(required=False, max_length=120)
    tags = serializers.ListField(
        child=serializers.SlugField(max_length=40), required=False, max_length=20,
        help_text="Slugs: lowercase letters, digits, '-' and '_'.",
    )
    group = serializers.CharField(required=False, allow_blank=True, max_length=120)
    notes = serializers.CharField(required=False, allow_blank=True, max_length=10_000)


class RunResumeIn(serializers.Serializer):
    checkpoint = serializers.IntegerField(
        required=False, min_value=0,
        help_text=(
            "Restart from this recorded checkpoint step (0: the warm-up's model) as a new attempt, forgetting what "
            "came after it; without it the run resumes from its last checkpoint."
        ),
    )


class ExternalRunIn(serializers.Serializer):
    """`POST /api/runs/external/` (checked by webapp.runs.external, which this documents)."""

    name = serializers.CharField(max_length=120)
    config = serializers.DictField(
        required=False, help_text="Any JSON object of the script's settings (at most 64 KiB, 8 levels); shown as given."
    )
    tags = serializers.ListField(child=serializers.SlugField(max_length=40), required=False, max_length=20)
    model = serializers.CharField(required=False, allow_blank=True, max_length=500)
    max_steps = serializers.IntegerField(required=False, min_value=0, help_text="0 (default): not known.")


class ExternalRolloutIn(serializers.Serializer):
    prompt = serializers.JSONField(required=False, help_text="The prompt's chat messages, or its text.")
    messages = serializers.ListField(child=serializers.DictField(), required=False, help_text="The transcript.")
    rewards = serializers.DictField(
        child=serializers.FloatField(allow_null=True), required=False, help_text="{term: value}"
    )
    reward = serializers.FloatField(required=False, allow_null=True)
    advantage = serializers.FloatField(required=False, allow_null=True)
    env = serializers.CharField(required=False, max_length=64)
    seed = serializers.IntegerField(required=False, allow_null=True)


class ExternalLogIn(serializers.Serializer):
    step = serializers.IntegerField(min_value=0)
    metrics = serializers.DictField(
        child=serializers.FloatField(), help_text="At most 500 finite numbers; names 1-200 characters."
    )
    rollouts = ExternalRolloutIn(many=True, required=False, help_text="At most 256, each at most 256 KiB.")


class ExternalLogOut(serializers.Serializer):
    seq = serializers.IntegerField(help_text="The run's telemetry sequence number after this log.")
    step = serializers.IntegerField()
    rollouts = serializers.IntegerField(help_text="How many rollouts were stored.")


class ExternalFinishIn(serializers.Serializer):
    status = serializers.ChoiceField(choices=["succeeded", "failed"], required=False, default="succeeded")
    error = serializers.CharField(required=False, allow_blank=True, max_length=10_000)


class CheckpointOut(serializers.Serializer):
    step = serializers.IntegerField(help_text="The GRPO step; 0 is the warm-up's model.")
    phase = serializers.ChoiceField(choices=Run.Phase.choices)
    created_at = serializers.DateTimeField()
    size_bytes = serializers.IntegerField()
    adapter = serializers.BooleanField(help_text="A LoRA adapter alone (a run with `peft`): loaded on its base model.")


class RunDetailOut(RunOut):
    """One run, with what is on disk for it (not in lists: it reads the run's folder)."""

    checkpoints = serializers.SerializerMethodField(
        help_text='Usable as a model: {"run": <id>, "checkpoint": <step>|"last"}.'
    )

    class Meta(RunOut.Meta):
        fields: tuple[str, ...] = (*RunOut.Meta.fields, "checkpoints")

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
        fields = (*RunDetailOut.Meta.fields, "warnings")

    def get_warnings(self, run: Run) -> list[str]:
        return list(run.events.filter(kind=LAUNCH_WARNING).order_by("pk").values_list("message", flat=True))


@extend_schema_field(serializers.DictField())
class RunEventDataField(serializers.JSONField):
    """An event's facts as stored (an object), published as one: each kind has its own."""


class RunEventOut(serializers.ModelSerializer):
    """Something that happened to a run (claimed, checkpoint resumed, an alert raised...).
    `message` may quote model or environment text: show it as text."""

    data = RunEventDataField(  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Serializer.data
        read_only=True,
        help_text="The event's facts; their fields depend on `kind` (an alert's: alert, step, active; "
        "episode_lost: step, envs, seqs, reasons...). {} when it has none.",
    )

    class Meta:
        model = RunEvent
        fields = ("id", "kind", "message", "data", "created_at")


class RunEventPageOut(serializers.Serializer):
    """`GET /api/runs/<id>/events/`: one page of the run's events, oldest first."""

    count = serializers.IntegerField(help_text="The run's events, on every page (`after` aside).")
    next = serializers.CharField(
        allow_null=True, help_text="The next page's URL (`after` the last event shown); null on the last page."
    )
    previous = serializers.CharField(allow_null=True, help_text="Always null: a cursor page links forward only.")
    results = RunEventOut(many=True)


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
    errors = serializers.DictField(  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Serializer.errors
        child=serializers.IntegerField(),
        help_text=(
            "Failed calls of every tool by class: execution_error, invalid_args, transport_error, "
            "tool_not_found, timeout (OpenEnv's MCP error types) and unknown_tool."
        ),
    )


# A rollout's transcript is served as the training worker (TRL's tool loop) or an external
# run's script logged it (webapp/runs/telemetry/record.py): the fields below are JSON passed
# through unchanged, and these serializers only describe it in the schema.


@extend_schema_field({
    "oneOf": [
        {"type": "string"},
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "description": "text, image..."},
                    "text": {"type": "string", "description": "A text part's text."},
                },
            },
        },
        {"type": "null"},
    ]
})
class MessageContentField(serializers.JSONField):
    pass


@extend_schema_field({
    "oneOf": [
        {"type": "string", "description": "JSON text (OpenAI's form)."},
        {"type": "object", "description": "The parameters by name (TRL's form)."},
    ]
})
class ToolArgumentsField(serializers.JSONField):
    pass


class ToolCallFunctionOut(serializers.Serializer):
    name = serializers.CharField(help_text="The tool called (model text).")
    arguments = ToolArgumentsField(
        help_text="The call's arguments as the model wrote them: an object of the tool's parameters, "
        "or JSON text; the tool's own schema says their types."
    )


class ToolCallOut(serializers.Serializer):
    type = serializers.CharField(required=False, help_text='"function".')
    id = serializers.CharField(required=False)
    function = ToolCallFunctionOut()


class TranscriptMessageOut(serializers.Serializer):
    """One chat message of a stored transcript. Its text is model or environment text: show
    it as text. Other keys a producer kept (tool_call_id, reasoning_content...) pass through."""

    role = serializers.CharField(
        help_text="system, user, assistant or tool. A transcript over the size cap holds a system "
        "message, where it was cut, saying so."
    )
    content = MessageContentField(
        required=False,
        help_text="The text; a list of content parts where the model takes them (multimodal); null on "
        "an assistant turn that only calls tools (OpenAI's form).",
    )
    name = serializers.CharField(required=False, help_text="On a tool message: the tool that answered.")
    tool_calls = ToolCallOut(many=True, required=False, help_text="On an assistant message: the calls it made.")


@extend_schema_field(TranscriptMessageOut(many=True))
class TranscriptField(serializers.JSONField):
    pass


class PromptField(serializers.JSONField):
    """A prompt as stored: its chat messages, or its text (published by the extension below)."""


class PromptFieldExtension(OpenApiSerializerFieldExtension):
    target_class = PromptField

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        message = auto_schema.resolve_serializer(TranscriptMessageOut, direction).ref
        return {"oneOf": [{"type": "string"}, {"type": "array", "items": message}]}


@extend_schema_field(serializers.DictField(child=serializers.FloatField(allow_null=True)))
class RolloutRewardsField(serializers.JSONField):
    pass


class RolloutToolCountOut(serializers.Serializer):
    calls = serializers.IntegerField(help_text="Results of the tool in the transcript.")
    failures = serializers.IntegerField(help_text="Those that were errors.")


@extend_schema_field(serializers.DictField(child=RolloutToolCountOut()))
class RolloutToolsField(serializers.JSONField):
    pass


class RolloutOut(serializers.ModelSerializer):
    replay_url = serializers.SerializerMethodField(
        help_text="The rollout's replay page (an absolute path; it asks for a signed-in session)."
    )
    prompt = PromptField(read_only=True, help_text="The prompt the episode started from: its chat messages, or its text.")
    messages = TranscriptField(
        read_only=True,
        help_text="The transcript as logged: for the lab's runs the completion (the model's turns and the "
        "tools' results after the prompt).",
    )
    rewards = RolloutRewardsField(
        read_only=True,
        help_text="{reward term: value}; null where the term does not apply, and for every term of an unscored rollout.",
    )
    tools = RolloutToolsField(
        read_only=True,
        help_text="{tool name: {calls, failures}} of the transcript's tool results; {} for rollouts stored "
        "before tool facts were recorded.",
    )

    class Meta:
        model = Rollout
        fields = (
            "seq", "step", "env", "seed", "prompt_key", "prompt", "messages", "rewards", "reward", "advantage",
            "unscored", "tools", "created_at", "replay_url",
        )

    def get_replay_url(self, rollout: Rollout) -> str:
        return rollout_replay_url(rollout)


class RolloutSearchOut(serializers.Serializer):
    mode = serializers.ChoiceField(
        choices=["fulltext", "scan"],
        help_text="fulltext: PostgreSQL's text index, over every rollout of the run; scan: a substring "
        "search over the run's newest `limit` rollouts only.",
    )
    scanned = serializers.IntegerField(required=False, help_text="scan: the rollouts looked through.")
    limit = serializers.IntegerField(required=False, help_text="scan: the most rollouts a search looks through.")


class RolloutPageOut(serializers.Serializer):
    """One page of the run's rollouts, in the API's one paging shape (webapp/core/paging.py)."""

    count = serializers.IntegerField(help_text="Rollouts that match the filters, on every page (cursors aside).")
    next = serializers.CharField(allow_null=True, help_text="The next page's URL; null on the last page.")
    previous = serializers.CharField(
        allow_null=True,
        help_text="By reward or advantage (`offset` pages): the page before; by seq a cursor page links forward "
        "only, and this is null.",
    )
    results = RolloutOut(many=True)
    search = RolloutSearchOut(allow_null=True, help_text="How `q` was searched; null without `q`.")


class RolloutStepsOut(serializers.Serializer):
    """`GET /api/runs/<id>/rollouts/steps/`: how many rollouts each step stored."""

    last_seq = serializers.IntegerField(
        help_text="The run's telemetry seq when counted: the counts cover rollouts up to it; later ones arrive live."
    )
    steps = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="[step, rollouts] pairs, newest step first.",
    )


class MetricSeriesOut(serializers.Serializer):
    """`GET /api/runs/<id>/metrics/`: each key's points, by step."""

    series = serializers.DictField(
        child=serializers.ListField(
            child=serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2),
            help_text="[step, value] pairs by step; a long series is cut to `max_points`, keeping each bucket's "
            "lowest and highest point and the first and last.",
        ),
        help_text="{metric key: points} for each key asked for (all the run logged without `key`) that has "
        "a point; unknown keys are left out.",
    )


class MetricKeysOut(serializers.Serializer):
    keys = serializers.ListField(
        child=serializers.CharField(),
        help_text="Every metric key the run logged that can be charted, sorted (not the lab's own `_` keys).",
    )


class ChartSettingsOut(serializers.Serializer):
    smoothing = serializers.FloatField(min_value=0, max_value=MAX_SMOOTHING, help_text="0: none.")
    log_y = serializers.BooleanField()
    x = serializers.ChoiceField(choices=list(X_AXES))


class RunChartLayoutOut(serializers.Serializer):
    """The signed-in user's run-page chart layout (webapp/runs/telemetry/layout.py), every setting filled in."""

    metrics = serializers.ListField(
        child=serializers.CharField(), max_length=MAX_METRIC_CHARTS,
        help_text="The metric keys of the charts added, in page order.",
    )
    settings = serializers.DictField(
        child=ChartSettingsOut(),
        help_text=f"{{chart: settings}}: a chart is a fixed chart's id or '{METRIC_REF}<key>' for an added one.",
    )


class WorkerOut(serializers.ModelSerializer):
    current_run = serializers.SerializerMethodField(
        help_text="The run it trains, when the caller may see that run; null otherwise."
    )

    class Meta:
        model = WorkerHeartbeat
        fields = ("name", "capabilities", "heartbeat_at", "current_run", "queues", "seen")

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


class PresetOut(serializers.Serializer):
    """A named, versioned starting config (webapp/runs/presets.py). `config` is a run config
    whose environments carry the id of the caller's entry of `environment` (0: they have none)."""

    slug = serializers.CharField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    description = serializers.CharField()
    source = serializers.CharField(help_text="Where the recipe comes from.")  # type: ignore[assignment]  # DRF's metaclass takes declared fields off the class: no clash with Field.source
    environment = serializers.CharField(help_text="The bundled environment it is meant for.")
    config = serializers.DictField(help_text="A run config, to POST to /api/runs/ as is or changed.")
