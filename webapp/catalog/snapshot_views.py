"""Pages for catalog snapshots: import a file, list its entries, register an entry.

Access: login required; a snapshot is shown to its uploader and staff only (others get a
404). Registering an entry probes a server and may start a bundled one (a wait of
seconds), so that view is async and does the work on a thread of its own, as the
bundled start view does; its page is rendered on the sync thread (the template reads
`request.user`).

The forms live here rather than in forms.py: they serve these views only.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp.catalog.models import CatalogSnapshot
from webapp.catalog.services import EnvironmentRejected
from webapp.catalog.snapshot import (
    MAX_IDENTIFIER_CHARS,
    MAX_SNAPSHOT_BYTES,
    CatalogSnapshotRejected,
    catalog_entries,
    catalog_entry_register,
    catalog_snapshot_import,
    catalog_snapshot_name_from_filename,
    catalog_snapshot_too_big,
    catalog_snapshots_visible_to,
)
from webapp.core.threads import on_own_thread
from webapp.core.users import signed_in_user


class CatalogSnapshotUploadForm(forms.Form):
    file = forms.FileField(
        label="Catalog file",
        help_text="The JSON file `openenv catalog build --output` wrote (at most 5 MB).",
    )
    name = forms.CharField(max_length=100, required=False, help_text="Defaults to the file's name.")


class CatalogEntryRegisterForm(forms.Form):
    identifier = forms.CharField(max_length=MAX_IDENTIFIER_CHARS)
    base_url = forms.CharField(max_length=500, required=False)
    name = forms.CharField(max_length=100, required=False)
    start_bundled = forms.BooleanField(required=False)


def _read_upload(upload: Any) -> bytes:
    """At most one byte over the limit: the service says the file is too big."""
    upload.seek(0)
    return bytes(upload.read(MAX_SNAPSHOT_BYTES + 1))


def _render_index(
    request: HttpRequest, form: CatalogSnapshotUploadForm, status: int = 200
) -> HttpResponse:
    return render(
        request,
        "catalog/snapshot.html",
        {
            "upload_form": form,
            "snapshots": list(catalog_snapshots_visible_to(user=request.user)[:100]),
            "nav": "environments",
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
def catalog_snapshot_import_view(request: HttpRequest) -> HttpResponse:
    """GET: the user's imported catalogs and the upload form. POST: import a file."""
    if request.method == "GET":
        return _render_index(request, CatalogSnapshotUploadForm())
    too_big = catalog_snapshot_too_big(content_length=request.META.get("CONTENT_LENGTH"))
    if too_big is not None:
        form = CatalogSnapshotUploadForm()
        form.add_error(None, too_big.errors["file"][0])
        return _render_index(request, form)
    form = CatalogSnapshotUploadForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            snapshot = catalog_snapshot_import(
                owner=signed_in_user(request),
                raw=_read_upload(upload),
                name=form.cleaned_data["name"]
                or catalog_snapshot_name_from_filename(upload.name or ""),
            )
        except CatalogSnapshotRejected as exc:
            for field, field_messages in exc.errors.items():
                for message in field_messages:
                    form.add_error(field if field in form.fields else None, message)
        else:
            messages.success(
                request,
                f"Imported catalog '{snapshot.name}' with {len(snapshot.entries)} entries.",
            )
            return redirect("catalog-snapshot-detail", pk=snapshot.pk)
    return _render_index(request, form)


def _render_snapshot(
    request: HttpRequest,
    snapshot: CatalogSnapshot,
    *,
    failed: dict[str, Any] | None = None,
) -> HttpResponse:
    """The snapshot page; `failed` is the rejected registration: identifier, values, errors.

    Errors are shown as (field, message) pairs in the entry's row, with what was typed.
    """
    entries = catalog_entries(snapshot, user=request.user)
    matched = False
    for entry in entries:
        entry["failed"] = failed if failed and failed["identifier"] == entry["identifier"] else None
        matched = matched or entry["failed"] is not None
    return render(
        request,
        "catalog/snapshot.html",
        {
            "snapshot": snapshot,
            "entries": entries,
            # A refusal for no entry of this page (an unknown identifier) is shown above the table.
            "page_errors": failed["errors"] if failed and not matched else [],
            "nav": "environments",
        },
    )


@login_required
def catalog_snapshot_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
    return _render_snapshot(request, snapshot)


def _register(*, pk: int, user: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Runs on its own thread: the outcome as plain values."""
    snapshot = catalog_snapshots_visible_to(user=user).filter(pk=pk).first()
    if snapshot is None:
        return {"missing": True}
    try:
        environment = catalog_entry_register(
            owner=user,
            snapshot=snapshot,
            identifier=data["identifier"],
            base_url=data["base_url"],
            start_bundled=data["start_bundled"],
            name=data["name"],
        )
    except EnvironmentRejected as exc:
        return {"errors": exc.errors}
    return {"environment": (environment.pk, environment.name, environment.base_url)}


def _failed(identifier: str, values: Any, errors: Any) -> dict[str, Any]:
    return {
        "identifier": identifier,
        "base_url": str(values.get("base_url") or ""),
        "name": str(values.get("name") or ""),
        "errors": [
            (field, str(message))
            for field, field_messages in errors.items()
            for message in field_messages
        ],
    }


def _rerender(request: HttpRequest, pk: int, failed: dict[str, Any]) -> HttpResponse:
    snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
    return _render_snapshot(request, snapshot, failed=failed)


@login_required
@require_POST
async def catalog_entry_register_view(request: HttpRequest, pk: int) -> HttpResponse:
    form = CatalogEntryRegisterForm(request.POST)
    if not form.is_valid():
        failed = _failed(request.POST.get("identifier", ""), request.POST, form.errors)
        return await sync_to_async(_rerender)(request, pk, failed)
    outcome = await on_own_thread(
        _register, pk=pk, user=await request.auser(), data=form.cleaned_data
    )
    if outcome.get("missing"):
        raise Http404("no such catalog snapshot")
    if "errors" in outcome:
        failed = _failed(form.cleaned_data["identifier"], form.cleaned_data, outcome["errors"])
        return await sync_to_async(_rerender)(request, pk, failed)
    _, name, base_url = outcome["environment"]
    messages.success(request, f"Registered environment '{name}' at {base_url}.")
    return redirect("catalog-snapshot-detail", pk=pk)
