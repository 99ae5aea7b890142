"""The sweeps API's bodies, for the schema: what a create takes and what each endpoint answers."""

from __future__ import annotations

from rest_framework import serializers

from webapp.sweeps.grid import MAX_MEMBERS
from webapp.sweeps.models import NAME_MAX_LENGTH, Sweep


class SweepIn(serializers.Serializer):
    """Checked by webapp.sweeps.services.sweep_spec; published for the schema."""

    name = serializers.CharField(required=False, allow_blank=True, max_length=NAME_MAX_LENGTH,
                                 help_text="Also the group of its runs; sweep-<id> when left out.")
    base = serializers.JSONField(help_text="The run config every member starts from, as POST /api/runs/ takes it.")
    grid = serializers.JSONField(
        help_text='{dotted config path: [values]}, e.g. {"grpo.learning_rate": [1e-5, 1e-4], "grpo.seed": [0, 1, 2]}; '
        "paths reach list items by index (environments.0.rows, rewards.1.weight)."
    )
    method = serializers.ChoiceField(choices=Sweep.Method.choices, required=False, default=Sweep.Method.GRID)
    count = serializers.IntegerField(required=False, min_value=1, max_value=MAX_MEMBERS,
                                     help_text="Random sweeps: how many combinations to draw.")
    seed = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1,
                                    help_text="Random sweeps: the draw's seed (one is drawn and stored when left out).")


class SweepOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    method = serializers.CharField()
    count = serializers.IntegerField(allow_null=True)
    seed = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    grid = serializers.JSONField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    size = serializers.IntegerField(help_text="How many runs the sweep made.")
    statuses = serializers.DictField(child=serializers.IntegerField(), help_text="{run status: members in it}.")
    url = serializers.CharField(help_text="The sweep's page.")


class SweepSummaryOut(serializers.Serializer):
    last = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    step = serializers.IntegerField()


class SweepMemberOut(serializers.Serializer):
    index = serializers.IntegerField()
    run = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()
    step = serializers.IntegerField()
    max_steps = serializers.IntegerField()
    params = serializers.DictField(child=serializers.JSONField(), help_text="{differing path: this member's value}.")
    summary = SweepSummaryOut(allow_null=True, help_text="The chosen metric over the run's steps; null before it logs one.")


class SweepDetailOut(SweepOut):
    base = serializers.JSONField()
    paths = serializers.ListField(child=serializers.CharField(), help_text="The config paths whose value differs between members.")
    metric = serializers.CharField()
    members = SweepMemberOut(many=True)


class SweepCancelRestOut(serializers.Serializer):
    cancelled = serializers.ListField(child=serializers.IntegerField(), help_text="The runs cancelled (they were pending).")
    sweep = SweepOut()
