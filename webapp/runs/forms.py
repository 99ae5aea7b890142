"""The run form: a friendly face on the one run config schema (webapp.runs.config).

The form checks only the shape of each input (a number is a number); ranges and
cross-field rules come from the schema, whose dotted error keys `errors_to_form` places
next to the matching input.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any, Literal

import annotated_types
from django import forms
from django.utils.text import slugify

from webapp.catalog.models import Environment
from webapp.rewards.models import RewardRecipe
from webapp.rewards.terms import KINDS
from webapp.runs.config import (
    ALERT_KINDS,
    AlertSettings,
    GRPOSettings,
    RunEnvironment,
    WarmupSettings,
)
from webapp.runs.grpo_fields import TRL_PASSTHROUGH

# Every GRPO setting of the schema, the lab's core settings first: the form's GRPO fieldset
# is built from the schema (type, bounds, help), so a field added there reaches the form.
GRPO_FIELDS = (
    *(name for name in GRPOSettings.model_fields if name not in TRL_PASSTHROUGH),
    *TRL_PASSTHROUGH,
)
ENVIRONMENT_FIELDS = {
    "environment": "environment",
    "name": "environment",
    "prompt": "prompt",
    "rows": "rows",
}
# Form input -> `alerts` setting of the run config (webapp/runs/telemetry/health.py's thresholds).
ALERT_FIELDS = {
    "alerts_enabled": "enabled",
    "alert_zero_variance_frac": "zero_variance_frac",
    "alert_zero_variance_steps": "zero_variance_steps",
    "alert_tool_failure_rate": "tool_failure_rate",
    "alert_tool_failure_steps": "tool_failure_steps",
    "alert_no_tool_calls_steps": "no_tool_calls_steps",
    "alert_reward_flat_steps": "reward_flat_steps",
    "alert_entropy_min": "entropy_min",
    "alert_stop_on": "stop_on",
}
ALERT_SETTINGS = {setting: field for field, setting in ALERT_FIELDS.items()}
# Form input -> `warmup` setting of the run config (worker/training/warmup.py), when the warm-up is on.
WARMUP_FIELDS = {
    "warmup_source": "source",
    "warmup_run": "run",
    "warmup_min_reward": "min_reward",
    "warmup_episodes": "episodes",
    "warmup_epochs": "epochs",
    "warmup_learning_rate": "learning_rate",
}
WARMUP_SETTINGS = {setting: field for field, setting in WARMUP_FIELDS.items()}
# The form has no input for a term's params or children: it offers the leaf kinds whose params
# all have defaults. The others are composed in JSON mode or a saved recipe (the API).
REWARD_KINDS = [
    (name, f"{name}: {kind.description}")
    for name, kind in KINDS.items()
    if not kind.container and not any(field.is_required() for field in kind.params.model_fields.values())
]
DEFAULT_PROMPT = "Echo '{phrase}'."


CHECKPOINT_LABEL_RE = re.compile(r"^run:([0-9]{1,12})@([0-9]{1,9}|last)$")


def model_spec(text: str) -> str | dict[str, Any]:
    """The run config's `model` for what the form's model input says: `run:<id>@<step|last>`
    (how webapp.runs.checkpoints.model_label shows a checkpoint) becomes a checkpoint reference."""
    match = CHECKPOINT_LABEL_RE.fullmatch(text.strip())
    if match is None:
        return text
    step = match.group(2)
    return {"run": int(match.group(1)), "checkpoint": step if step == "last" else int(step)}


def _number_field(settings: type[Any], name: str, label: str | None = None) -> forms.Field:
    """An optional number input for a numeric field of a config model: its default shown,
    its description as help; left blank, the schema's default applies."""
    info = settings.model_fields[name]
    default = info.get_default(call_default_factory=True)
    kind = forms.FloatField if isinstance(default, float) else forms.IntegerField
    return kind(required=False, initial=default, label=label, help_text=info.description or "")


def _bounds(metadata: list[Any]) -> dict[str, str]:
    """The schema's bounds of a number as the input's min/max attributes (the schema itself
    refuses a value out of them, with its message next to the input)."""
    attrs: dict[str, str] = {}
    for item in metadata:
        if isinstance(item, annotated_types.Ge | annotated_types.Gt):
            attrs["min"] = str(item.ge if isinstance(item, annotated_types.Ge) else item.gt)
        elif isinstance(item, annotated_types.Le | annotated_types.Lt):
            attrs["max"] = str(item.le if isinstance(item, annotated_types.Le) else item.lt)
    return attrs


def _strict_bool(value: str) -> bool:
    return value == "true"


def schema_form_field(settings: type[Any], name: str, label: str | None = None) -> forms.Field:
    """An optional input for one field of a config model, from its annotation: a number input
    with the schema's bounds, a choice of a Literal's values (or true/false), a JSON input for a
    mapping. Its description is the help; left blank, the field is left out and its default applies."""
    info = settings.model_fields[name]
    default = info.get_default(call_default_factory=True)
    help_text = info.description or ""
    members = [info.annotation]
    while any(typing.get_origin(m) in (typing.Union, types.UnionType) for m in members):
        members = [a for m in members for a in (typing.get_args(m) if typing.get_origin(m) in (typing.Union, types.UnionType) else (m,))]
    members = [m for m in members if m is not type(None)]
    blank = "default" if default is None else f"default ({json.dumps(default)})"
    literals = [value for m in members if typing.get_origin(m) is Literal for value in typing.get_args(m)]
    if literals:
        return forms.ChoiceField(
            required=False, label=label, help_text=help_text, choices=[("", blank), *[(v, v) for v in literals]]
        )
    if bool in members:
        return forms.TypedChoiceField(
            required=False, label=label, help_text=help_text, coerce=_strict_bool, empty_value=None,
            choices=[("", blank), ("true", "true"), ("false", "false")],
        )
    if dict in members or any(typing.get_origin(m) is dict for m in members):
        return forms.JSONField(required=False, label=label, help_text=help_text, initial=default)
    attrs = _bounds(info.metadata)
    if float in members:
        attrs["step"] = "any"
        return forms.FloatField(required=False, initial=default, label=label, help_text=help_text, widget=forms.NumberInput(attrs))
    return forms.IntegerField(required=False, initial=default, label=label, help_text=help_text, widget=forms.NumberInput(attrs))


def _alert_field(name: str) -> forms.Field:
    info = AlertSettings.model_fields[name]
    default = info.get_default(call_default_factory=True)
    help_text = info.description or ""
    if name == "enabled":
        return forms.BooleanField(
            required=False, initial=True, label="Run-health alerts",
            help_text="Check every step's metrics for runs that cannot learn (zero-variance groups, failing tools, NaN...).",
        )
    if name == "stop_on":
        return forms.MultipleChoiceField(
            required=False, initial=default, choices=[(k, k.replace("_", " ")) for k in ALERT_KINDS],
            widget=forms.CheckboxSelectMultiple, label="Stop the run on", help_text=help_text,
        )
    return _number_field(AlertSettings, name, name.replace("_", " ").capitalize())


def _warmup_field(name: str) -> forms.Field:
    help_text = WarmupSettings.model_fields[name].description or ""
    if name == "source":
        return forms.ChoiceField(
            required=False, initial="solver", label="Warm-up episodes from",
            choices=[("solver", "the environment's solver"), ("run", "a run's kept rollouts")], help_text=help_text,
        )
    if name == "run":
        return forms.IntegerField(required=False, min_value=1, label="Warm-up run id", help_text=help_text)
    return _number_field(WarmupSettings, name, "Warm-up " + name.replace("_", " "))


class RecipeChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: RewardRecipe) -> str:
        return f"{obj.name} (v{obj.latest_version})"


class EnvironmentChoiceField(forms.ModelChoiceField):
    # Whose form it is (the view sets it): names are unique per owner only, so another
    # user's shared entry of the same name says whose it is.
    viewer_id: int | None = None

    def label_from_instance(self, obj: Environment) -> str:
        label = f"{obj.name} ({obj.status})"
        if (obj.metadata or {}).get("bundled"):
            return f"{label}, bundled"
        if obj.owner_id is not None and obj.owner_id != self.viewer_id:
            return f"{label}, shared by {obj.owner.get_username() if obj.owner else obj.owner_id}"
        return label


# The GRPO inputs, one per schema field, under the schema's names.
_GRPOInputs: type[forms.Form] = type(
    "_GRPOInputs", (forms.Form,), {name: schema_form_field(GRPOSettings, name) for name in GRPO_FIELDS}
)


class RunForm(_GRPOInputs):  # type: ignore[valid-type,misc]
    name = forms.CharField(max_length=120, initial="echo-run")
    model = forms.CharField(
        max_length=500,
        initial="demo:echo",
        help_text="A hub id 'org/name', an absolute local folder, 'demo:<name>', or a run's checkpoint "
        "'run:<id>@<step>' ('run:<id>@last' for its newest).",
    )
    environment = EnvironmentChoiceField(queryset=Environment.objects.all(), empty_label=None)
    prompt = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        initial=DEFAULT_PROMPT,
        help_text="{phrase} is filled with a seeded random phrase that becomes the target.",
    )
    rows = forms.IntegerField(
        required=False,
        initial=RunEnvironment.model_fields["rows"].default,
        help_text="Dataset rows (episodes) for this environment.",
    )
    alerts_enabled = _alert_field("enabled")
    alert_zero_variance_frac = _alert_field("zero_variance_frac")
    alert_zero_variance_steps = _alert_field("zero_variance_steps")
    alert_tool_failure_rate = _alert_field("tool_failure_rate")
    alert_tool_failure_steps = _alert_field("tool_failure_steps")
    alert_no_tool_calls_steps = _alert_field("no_tool_calls_steps")
    alert_reward_flat_steps = _alert_field("reward_flat_steps")
    alert_entropy_min = _alert_field("entropy_min")
    alert_stop_on = _alert_field("stop_on")
    warmup_enabled = forms.BooleanField(
        required=False, label="SFT warm-up first",
        help_text="Train on good episodes with TRL's SFTTrainer before GRPO; GRPO starts from the result (checkpoint 0).",
    )
    warmup_source = _warmup_field("source")
    warmup_run = _warmup_field("run")
    warmup_min_reward = _warmup_field("min_reward")
    warmup_episodes = _warmup_field("episodes")
    warmup_epochs = _warmup_field("epochs")
    warmup_learning_rate = _warmup_field("learning_rate")
    warmup_only = forms.BooleanField(
        required=False, label="Warm-up only (no GRPO)",
        help_text="Stop after the warm-up: its model is usable as run:<id>@0 in a later run.",
    )
    reward_recipe = RecipeChoiceField(
        queryset=RewardRecipe.objects.none(), required=False, empty_label="— the terms below —",
        label="Reward recipe",
        help_text="A saved recipe replaces the terms below; its latest version is pinned when the run launches.",
    )

    def config_part(self) -> dict[str, Any]:
        """The config without rewards, from cleaned data; blank numbers take the schema default."""
        data = self.cleaned_data
        environment: Environment = data["environment"]
        item: dict[str, Any] = {
            "environment": environment.pk,
            "name": environment_slug(environment.name),
            "prompt": data["prompt"],
        }
        if data.get("rows") is not None:
            item["rows"] = data["rows"]
        grpo = {name: data[name] for name in GRPO_FIELDS if data.get(name) not in (None, "")}
        alerts = {
            setting: data[field] for field, setting in ALERT_FIELDS.items()
            if data.get(field) is not None or setting in ("enabled", "stop_on")
        }
        alerts["enabled"] = bool(alerts.get("enabled"))
        alerts["stop_on"] = list(alerts.get("stop_on") or [])
        config: dict[str, Any] = {
            "name": data["name"], "model": model_spec(data["model"]), "environments": [item], "grpo": grpo, "alerts": alerts,
        }
        if data.get("warmup_enabled"):
            config["sft_warmup"] = {
                "kind": "sft",
                **{setting: data[field] for field, setting in WARMUP_FIELDS.items() if data.get(field) not in (None, "")},
            }
            if config["sft_warmup"].get("source", "solver") == "solver":
                config["sft_warmup"].pop("run", None)  # only a run source takes one; a stray id is not an error
        if data.get("warmup_only"):
            config["grpo"] = None  # the schema refuses it without a warm-up, next to that input
        return config

    def rewards_part(self, terms: list[dict[str, Any]]) -> list[dict[str, Any]] | dict[str, Any]:
        """The run config's `rewards`: the chosen saved recipe, else the terms of the table."""
        recipe = self.cleaned_data.get("reward_recipe")
        return {"recipe": recipe.pk} if recipe is not None else terms


class RewardTermForm(forms.Form):
    name = forms.CharField(max_length=64, required=False)
    kind = forms.ChoiceField(choices=REWARD_KINDS, initial="env_reward")
    weight = forms.FloatField(required=False, initial=1.0)

    def term(self) -> dict[str, Any] | None:
        """None for a row left blank."""
        data = getattr(self, "cleaned_data", {})
        if not data.get("name"):
            return None
        term = {"name": data["name"], "kind": data["kind"]}
        if data.get("weight") is not None:
            term["weight"] = data["weight"]
        return term


RewardFormSet = forms.formset_factory(RewardTermForm, extra=2, max_num=32, validate_max=True)
REWARD_INITIAL = [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}]


class RunJsonForm(forms.Form):
    config_json = forms.CharField(
        label="Run config (JSON)",
        widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false", "class": "code"}),
    )

    def clean_config_json(self) -> Any:
        try:
            return json.loads(self.cleaned_data["config_json"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None


def environment_slug(name: str) -> str:
    """The environment's name as a run-local name (lowercase, digits, '-', '_'), or ''."""
    slug = slugify(name).lstrip("-_")[:64]
    return slug if re.fullmatch(r"[a-z0-9][a-z0-9_-]*", slug) else ""


def errors_to_form(
    errors: dict[str, list[str]], form: RunForm, rewards: forms.BaseFormSet
) -> list[str]:
    """Attach each dotted schema error to its input; return the ones no input matches."""
    unplaced: list[str] = []
    for key, key_messages in errors.items():
        parts = key.split(".")
        target: tuple[forms.Form, str | None] | None = None
        if key in form.fields:
            target = (form, key)
        elif parts[0] == "model":
            target = (form, "model")
        elif parts[0] == "grpo" and len(parts) == 2 and parts[1] in form.fields:
            target = (form, parts[1])
        elif parts[0] == "alerts" and len(parts) >= 2 and parts[1] in ALERT_SETTINGS:
            target = (form, ALERT_SETTINGS[parts[1]])
        elif parts[0] == "sft_warmup" and len(parts) >= 2 and parts[1] in WARMUP_SETTINGS:
            target = (form, WARMUP_SETTINGS[parts[1]])
        elif parts[0] == "sft_warmup":
            target = (form, "warmup_enabled")
        elif parts[0] == "grpo" and len(parts) == 1:
            target = (form, "warmup_only")
        elif parts[0] == "rewards" and len(parts) == 1 and form.cleaned_data.get("reward_recipe") is not None:
            target = (form, "reward_recipe")
        elif parts[0] == "environments" and len(parts) == 3 and parts[2] in ENVIRONMENT_FIELDS:
            target = (form, ENVIRONMENT_FIELDS[parts[2]])
        elif parts[0] == "environments" and len(parts) == 1:
            target = (form, "environment")
        elif parts[0] == "rewards" and len(parts) >= 2 and parts[1].isdigit():
            terms = [f for f in rewards.forms if f.term() is not None]
            index = int(parts[1])
            if index < len(terms):
                field = parts[2] if len(parts) >= 3 and parts[2] in terms[index].fields else None
                target = (terms[index], field)
        if target is None:
            unplaced.extend(f"{key}: {message}" for message in key_messages)
            continue
        target_form, field_name = target
        for message in key_messages:
            target_form.add_error(field_name, message)
    return unplaced
