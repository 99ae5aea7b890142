"""Catalog snapshots: import the JSON file `openenv catalog build` writes, list, register.

The file is openenv's discovery profile 0.1-draft (openenv 0.10): a `CatalogSnapshot`
with `publisher`, `source` (a GitHub repository at one revision), `inventory`, `issues`,
`complete`, a `digest` over the content, and one `DiscoveryEntry` per environment. An
entry is metadata only: a `urn:air:` identifier, display name, description, and a card
saying where the source is (repository, path, revision), whether a git artifact can be
resolved, the interfaces it declares and its license. The profile has no container-image
field, so an entry never says which image runs it; a server for it is either one the
user runs (registered by URL) or one of our bundled servers with the same name.

Reading goes through openenv's own parser and pydantic models (duplicate keys, NaN,
every profile rule, digest and completeness, as `openenv catalog inspect` checks), imported
lazily: openenv is not imported when Django starts. What is stored is a bounded summary
of each entry; which bundled server an entry matches and which environment records it
are worked out on reading, so they follow the registry and the catalog.

Contracts:
- A rejected file writes nothing; the error names the field (`file`, `name`) and says
  what is wrong (not JSON, not a snapshot, which profile rule failed, too big).
- Registration goes through `environment_register` (the server is probed before a row is
  written) and then marks the environment with `catalog_entry` (the identifier) and
  `catalog_snapshot` (this snapshot's id) in its metadata.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.db.models import Q, QuerySet

from webapp.catalog.bundled import BUNDLED, BundledError, bundled_start
from webapp.catalog.models import BundledServer, CatalogSnapshot, Environment
from webapp.catalog.selectors import BUNDLED_REFUSAL, bundled_can_control, environments_visible_to
from webapp.catalog.services import (
    EnvironmentRejected,
    environment_name_errors,
    environment_register,
)

if TYPE_CHECKING:  # pragma: no cover - typing only; openenv is imported on use
    from openenv.discovery import CatalogSnapshot as OpenEnvSnapshot
    from openenv.discovery import DiscoveryEntry

SUPPORTED_FORMAT = "0.1-draft"
MAX_SNAPSHOT_BYTES = 5 * 1024 * 1024
MAX_ENTRIES = 1000
# Identifiers are matched exactly (they are stored on environments), so a longer one is
# refused rather than cut: the producer's are under 400 characters.
MAX_IDENTIFIER_CHARS = 1000
MAX_NAME_CHARS = 100
SHORT_TEXT_CHARS = 200
LONG_TEXT_CHARS = 2000
URI_CHARS = 500
MAX_LIST_ITEMS = 32
MAX_REPORTED_PROBLEMS = 5


class CatalogSnapshotRejected(EnvironmentRejected):
    """A snapshot or an entry registration was refused; `errors` maps fields to messages."""


# --- reading the file -------------------------------------------------------------------------


def _truncate(value: object, limit: int) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_file(message: str) -> CatalogSnapshotRejected:
    return CatalogSnapshotRejected({"file": [message]})


def _parse(raw: bytes) -> OpenEnvSnapshot:
    """The validated snapshot, or CatalogSnapshotRejected saying what is wrong with the file."""
    from openenv.discovery import CatalogError
    from openenv.discovery import CatalogSnapshot as OpenEnvSnapshot
    from openenv.discovery.serialization import catalog_digest, parse_json
    from pydantic import ValidationError

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _reject_file(
            f"not UTF-8 text (byte {exc.start}); a catalog snapshot is a JSON file"
        ) from None
    try:
        data = parse_json(text)
    except CatalogError as exc:
        cause = exc.__cause__
        if isinstance(cause, json.JSONDecodeError):
            detail = f"line {cause.lineno}, column {cause.colno}: {cause.msg}"
        elif isinstance(cause, RecursionError):
            detail = "nested too deeply"
        else:  # duplicate keys, NaN/Infinity
            detail = str(exc)
        raise _reject_file(f"not valid JSON ({detail})") from None
    if not isinstance(data, dict) or not {"entries", "publisher"} <= data.keys():
        raise _reject_file(
            "not a catalog snapshot: expected a JSON object with 'publisher', 'source', "
            "'inventory', 'entries', 'complete' and 'digest', as `openenv catalog build` writes"
        )
    version = data.get("schema_version", SUPPORTED_FORMAT)
    if version != SUPPORTED_FORMAT:
        raise _reject_file(
            f"catalog format '{_truncate(version, 40)}' is not supported; this installation "
            f"reads '{SUPPORTED_FORMAT}' (openenv 0.10)"
        )
    entries = data["entries"]
    if isinstance(entries, list) and len(entries) > MAX_ENTRIES:
        raise _reject_file(f"{len(entries)} entries; a snapshot may list at most {MAX_ENTRIES}")
    try:
        snapshot = OpenEnvSnapshot.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in error['loc']) or '(top level)'}: "
            f"{_truncate(error['msg'], 300)}"
            for error in exc.errors(include_url=False)[:MAX_REPORTED_PROBLEMS]
        ]
        more = exc.error_count() - len(problems)
        raise _reject_file(
            "does not match openenv's catalog profile "
            f"{SUPPORTED_FORMAT}: "
            + "; ".join(problems)
            + (f" (and {more} more)" if more > 0 else "")
        ) from None
    if not snapshot.complete:
        failed = [
            f"{issue.path}: {issue.message}"
            for issue in snapshot.issues
            if issue.severity == "error"
        ]
        raise _reject_file(
            "the snapshot is incomplete (the build failed for "
            + _truncate("; ".join(failed), 500)
            + "); fix those environments and run `openenv catalog build` again"
        )
    if catalog_digest(snapshot) != snapshot.digest:
        raise _reject_file(
            "the content does not match its digest: the file was changed after "
            "`openenv catalog build` wrote it"
        )
    too_long = [e.identifier for e in snapshot.entries if len(e.identifier) > MAX_IDENTIFIER_CHARS]
    if too_long:
        raise _reject_file(
            f"an entry identifier is longer than {MAX_IDENTIFIER_CHARS} characters: "
            f"{_truncate(too_long[0], 80)}"
        )
    return snapshot


def _entry_summary(entry: DiscoveryEntry) -> dict[str, Any]:
    """What is kept of one entry: bounded plain values."""
    card = entry.data
    source = card.source
    return {
        "identifier": entry.identifier,
        "display_name": _truncate(entry.display_name, SHORT_TEXT_CHARS),
        "name": _truncate(card.name, SHORT_TEXT_CHARS),
        "description": _truncate(entry.description, LONG_TEXT_CHARS),
        "tags": [_truncate(tag, 60) for tag in entry.tags[:MAX_LIST_ITEMS]],
        "capabilities": [_truncate(name, 100) for name in entry.capabilities[:MAX_LIST_ITEMS]],
        "license": _truncate(card.license, SHORT_TEXT_CHARS),
        "source": {
            "provider": source.provider,
            "repository": _truncate(source.id, SHORT_TEXT_CHARS),
            "uri": _truncate(source.uri, URI_CHARS),
            "path": _truncate(source.path, URI_CHARS),
            "revision": source.revision,
        },
        "artifact_availability": card.artifact_availability,
        "artifacts": [
            {
                "kind": artifact.kind,
                "uri": _truncate(artifact.uri, URI_CHARS),
                "path": _truncate(artifact.path, URI_CHARS),
                "revision": artifact.revision,
            }
            for artifact in card.artifacts[:MAX_LIST_ITEMS]
        ],
        "interfaces": [
            {"role": interface.role, "protocol": _truncate(interface.protocol, 100)}
            for interface in card.interfaces[:MAX_LIST_ITEMS]
        ],
        "framework_requirement": _truncate(card.framework_requirement or "", SHORT_TEXT_CHARS),
    }


# --- services ---------------------------------------------------------------------------------


def catalog_snapshot_too_big(*, content_length: str | int | None) -> CatalogSnapshotRejected | None:
    """The refusal for a request whose declared body cannot hold a snapshot within the limit.

    Checked before the body is parsed (where the request is parsed lazily), so a huge upload
    is refused without being read; the margin is for the other form fields and encoding.
    """
    try:
        length = int(content_length or 0)
    except (TypeError, ValueError):
        return None
    if length <= MAX_SNAPSHOT_BYTES + 1024 * 1024:
        return None
    return CatalogSnapshotRejected({"file": [_too_big_message()]})


def _too_big_message() -> str:
    return (
        f"the file is larger than {MAX_SNAPSHOT_BYTES // (1024 * 1024)} MB; a catalog snapshot "
        "is metadata only, so a file this big is not one"
    )


def catalog_snapshot_name_from_filename(filename: str) -> str:
    """The default name of an uploaded snapshot: the file's name without `.json`."""
    stem = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    return (stem[:-5] if stem.lower().endswith(".json") else stem).strip()[:MAX_NAME_CHARS]


def catalog_snapshot_import(
    *, owner: User | None, raw: bytes, name: str
) -> CatalogSnapshot:
    """Validate a snapshot file and store its entries; CatalogSnapshotRejected writes nothing."""
    name = (name or "").strip()
    errors: dict[str, list[str]] = {}
    if not name or len(name) > MAX_NAME_CHARS:
        errors["name"] = [f"give a name of 1 to {MAX_NAME_CHARS} characters"]
    if not raw:
        errors["file"] = [
            "the file is empty; give the JSON file `openenv catalog build --output` wrote"
        ]
    elif len(raw) > MAX_SNAPSHOT_BYTES:
        errors["file"] = [_too_big_message()]
    if errors:
        raise CatalogSnapshotRejected(errors)
    parsed = _parse(raw)
    return CatalogSnapshot.objects.create(
        owner=owner,
        name=name,
        format_version=parsed.schema_version,
        publisher=_truncate(parsed.publisher, 253),
        source_uri=_truncate(parsed.source.uri, URI_CHARS),
        source_revision=parsed.source.revision,
        digest=parsed.digest,
        entries=[_entry_summary(entry) for entry in parsed.entries],
    )


def _bundled_key(entry: dict[str, Any]) -> str | None:
    """The bundled server an entry names: its name, display name or folder, as `echo`,
    `echo-env` or `echo_env` (the OpenEnv repository's folders end in `_env`).

    Only the OpenEnv servers: every catalog entry's orchestration protocol is `openenv`
    (the profile allows no other), which the ORS server does not speak.
    """
    source = found if isinstance(found := entry.get("source"), dict) else {}
    folder = str(source.get("path", "")).rsplit("/", 1)[-1]
    for candidate in (entry.get("name"), entry.get("display_name"), folder):
        base = str(candidate or "").strip().lower().replace("-", "_")
        for key in (base, base.removesuffix("_env"), base.removesuffix("_environment")):
            spec = BUNDLED.get(key)
            if spec is not None and spec.kind == Environment.Kind.OPENENV:
                return key
    return None


def _run_hint(entry: dict[str, Any]) -> str:
    """One line on how the entry can be run, from what the entry itself says."""
    source = found if isinstance(found := entry.get("source"), dict) else {}
    where = f"{source.get('uri', '')} at {source.get('path', '')}, revision {str(source.get('revision', ''))[:12]}"
    availability = entry.get("artifact_availability")
    if availability == "resolvable":
        return f"git artifact: {where}"
    if availability == "external":
        return f"artifact published elsewhere (not in the catalog); source: {where}"
    return f"no artifact declared; source: {where}"


def catalog_entries(snapshot: CatalogSnapshot, *, user: User | AnonymousUser) -> list[dict[str, Any]]:
    """Each stored entry with how to run it, the matching bundled server and its registration.

    `image` is always empty: the 0.1-draft profile has no image field. `registered_environment_id`
    is the oldest environment `user` may see whose metadata records this entry, None when there
    is none: another user's private registration is not told (it named that entry's id).
    """
    stored = [e for e in (snapshot.entries or []) if isinstance(e, dict) and e.get("identifier")]
    identifiers = [str(e["identifier"]) for e in stored]
    registered: dict[str, int] = {}
    if identifiers:
        rows = (
            environments_visible_to(user=user).filter(metadata__catalog_entry__in=identifiers)
            .order_by("pk")
            .values_list("pk", "metadata__catalog_entry")
        )
        for pk, identifier in rows:
            registered.setdefault(str(identifier), pk)
    return [
        {
            "identifier": str(entry["identifier"]),
            "display_name": str(entry.get("display_name", "")),
            "name": str(entry.get("name", "")),
            "description": str(entry.get("description", "")),
            "tags": list(entry.get("tags") or []),
            "capabilities": list(entry.get("capabilities") or []),
            "license": str(entry.get("license", "")),
            "image": "",
            "artifact_availability": str(entry.get("artifact_availability", "")),
            "artifacts": list(entry.get("artifacts") or []),
            "source": dict(entry.get("source") or {}),
            "interfaces": list(entry.get("interfaces") or []),
            "framework_requirement": str(entry.get("framework_requirement", "")),
            "run_hint": _run_hint(entry),
            "bundled_key": _bundled_key(entry),
            "registered_environment_id": registered.get(str(entry["identifier"])),
        }
        for entry in stored
    ]


def catalog_snapshots_visible_to(
    *, user: User | AnonymousUser
) -> QuerySet[CatalogSnapshot]:
    """A snapshot is its uploader's (and visible to users with the permission
    catalog.view_catalogsnapshot): other users get a 404, as for runs."""
    snapshots = CatalogSnapshot.objects.select_related("owner")
    if not user.is_authenticated:
        return snapshots.none()
    if user.has_perm("catalog.view_catalogsnapshot"):
        return snapshots
    return snapshots.filter(Q(owner=user))


def catalog_entry_register(
    *,
    owner: User | None,
    snapshot: CatalogSnapshot,
    identifier: str,
    base_url: str = "",
    start_bundled: bool = False,
    name: str = "",
) -> Environment:
    """Register the server for one entry: at `base_url`, or the bundled server it names.

    `name` empty means the entry's display name. The server is probed before anything is
    stored (environment_register); starting a bundled server waits for its /health, so
    call this outside any transaction.
    """
    identifier = (identifier or "").strip()
    base_url = (base_url or "").strip()
    entry = next(
        (
            e
            for e in (snapshot.entries or [])
            if isinstance(e, dict) and e.get("identifier") == identifier
        ),
        None,
    )
    if entry is None:
        raise CatalogSnapshotRejected(
            {
                "identifier": [
                    f"no entry '{_truncate(identifier, 120)}' in catalog '{snapshot.name}'"
                ]
            }
        )
    name = (name or "").strip() or _truncate(
        entry.get("display_name") or entry.get("name"), MAX_NAME_CHARS
    )
    errors: dict[str, list[str]] = {}
    if not name or len(name) > MAX_NAME_CHARS:
        errors["name"] = [f"give a name of 1 to {MAX_NAME_CHARS} characters"]
    else:
        # The registration's own rule (the owner's names, reserved names), said before a
        # bundled server is started for it.
        name_errors = environment_name_errors(owner=owner, name=name)
        if name_errors:
            errors["name"] = name_errors
    key = _bundled_key(entry)
    if base_url and start_bundled:
        errors["base_url"] = [
            "give the URL of a running server or start the bundled server, not both"
        ]
    elif not base_url and not start_bundled:
        errors["base_url"] = ["give the URL of a server that runs this entry"]
    elif start_bundled and key is None:
        openenv_keys = [k for k, spec in BUNDLED.items() if spec.kind == Environment.Kind.OPENENV]
        errors["start_bundled"] = [
            f"'{entry.get('display_name', '')}' is not one of the bundled servers "
            f"({', '.join(openenv_keys)}); give the URL of a server that runs it"
        ]
    elif start_bundled and not bundled_can_control(user=owner):
        errors["start_bundled"] = [BUNDLED_REFUSAL + "; give the URL of a server that runs this entry"]
    if errors:
        raise CatalogSnapshotRejected(errors)

    marks: dict[str, object] = {"catalog_entry": identifier, "catalog_snapshot": snapshot.pk}
    kind, capacity = "", None
    if start_bundled and key is not None:
        try:
            server = bundled_start(key=key)
        except BundledError as exc:
            raise CatalogSnapshotRejected({"start_bundled": [f"{key}: {exc}"]}) from None
        if server.status != BundledServer.Status.RUNNING:
            first_line = (server.last_error or "no error recorded").splitlines()[0]
            raise CatalogSnapshotRejected(
                {"start_bundled": [f"{key} did not start: {first_line} (log: {server.log_path})"]}
            )
        base_url, kind, capacity = server.url, BUNDLED[key].kind, server.capacity
        # As the bundled page marks its entries: stopping the server re-checks this one.
        marks["bundled"] = key
    environment = environment_register(
        owner=owner, name=name, base_url=base_url, kind=kind, capacity=capacity
    )
    with transaction.atomic():
        environment.metadata = {**(environment.metadata or {}), **marks}
        environment.save(update_fields=["metadata"])
    return environment
