"""The API's shapes of environments and catalog snapshots (input is validated by the services)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp.catalog.capacity import capacity_note
from webapp.catalog.models import CatalogSnapshot, Environment
from webapp.catalog.snapshot import catalog_entries


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
        fields: tuple[str, ...] = (
            "id", "name", "kind", "base_url", "status", "tools", "capacity", "capacity_note", "metadata",
            "last_error", "checked_at", "created_at", "owner", "shared",
        )

    def get_capacity_note(self, environment: Environment) -> str:
        return capacity_note(environment)


class EnvironmentRegisteredOut(EnvironmentOut):
    """The answer to a registration: the first entry's fields, as for a single one, and every
    entry the request made (one per environment of a multi-environment ORS server)."""

    registered = serializers.SerializerMethodField(
        help_text="Every entry this registration made, in the server's order (the first is the one above)."
    )

    class Meta(EnvironmentOut.Meta):
        fields = (*EnvironmentOut.Meta.fields, "registered")

    @extend_schema_field(EnvironmentOut(many=True))
    def get_registered(self, environment: Environment) -> list[dict]:
        return EnvironmentOut(self.context.get("registered", [environment]), many=True).data  # type: ignore[return-value]  # many=True builds a ListSerializer: its .data is a list, the stubs say the child's dict


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
        fields = (
            "id", "name", "owner", "uploaded_at", "format_version", "publisher", "source_uri",
            "source_revision", "digest", "entries",
        )

    def get_entries(self, snapshot: CatalogSnapshot) -> list[dict]:
        return catalog_entries(snapshot, user=self.context["request"].user)


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
