"""REST API for environments and catalog snapshots (shared/docs/design.md): thin views over
webapp.catalog's services and selectors."""

from __future__ import annotations

import json

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.catalog.models import Environment
from webapp.catalog.selectors import (
    environment_for,
    environments_visible_to,
)
from webapp.catalog.serializers import (
    CatalogEntryRegisterIn,
    CatalogSnapshotIn,
    CatalogSnapshotOut,
    EnvironmentChangeIn,
    EnvironmentIn,
    EnvironmentOut,
    EnvironmentRegisteredOut,
)
from webapp.catalog.services import (
    environment_container_stop,
    environment_measure_capacity,
    environment_probe,
    environment_set_shared,
    environments_register,
)
from webapp.catalog.snapshot import (
    MAX_SNAPSHOT_BYTES,
    CatalogSnapshotRejected,
    catalog_entry_register,
    catalog_snapshot_import,
    catalog_snapshot_name_from_filename,
    catalog_snapshot_too_big,
    catalog_snapshots_visible_to,
)
from webapp.core.paging import PAGE_PARAMETERS, list_or_page, list_or_page_schema
from webapp.core.parsers import EnvlabJSONParser as JSONParser
from webapp.core.throttles import WriteThrottled
from webapp.core.users import signed_in_user


def _visible_environment(request: Request, pk: int) -> Environment:
    return environment_for(user=request.user, pk=pk)


def _controlled_environment(request: Request, pk: int) -> Environment:
    return environment_for(user=request.user, pk=pk, control=True)


# The snapshots list without `limit`/`offset`: at most this many, with a Link to the rest.
SNAPSHOTS_LIST_CAP = 100


class EnvironmentListApi(WriteThrottled, APIView):
    write_throttle_scope = "register"

    @extend_schema(
        operation_id="environments_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(EnvironmentOut, "Environment"),
    )
    def get(self, request: Request) -> Response:
        environments = environments_visible_to(user=request.user)
        return list_or_page(request, environments, lambda rows: EnvironmentOut(rows, many=True).data)

    @extend_schema(request=EnvironmentIn, responses={201: EnvironmentRegisteredOut})
    def post(self, request: Request) -> Response:
        data = EnvironmentIn(data=request.data)
        data.is_valid(raise_exception=True)
        environments = environments_register(owner=signed_in_user(request), **data.validated_data)
        out = EnvironmentRegisteredOut(environments[0], context={"registered": environments})
        return Response(out.data, status=status.HTTP_201_CREATED)


class EnvironmentDetailApi(APIView):
    @extend_schema(responses=EnvironmentOut)
    def get(self, request: Request, pk: int) -> Response:
        return Response(EnvironmentOut(_visible_environment(request, pk)).data)

    @extend_schema(request=EnvironmentChangeIn, responses=EnvironmentOut)
    def patch(self, request: Request, pk: int) -> Response:
        environment = _controlled_environment(request, pk)
        data = EnvironmentChangeIn(data=request.data)
        data.is_valid(raise_exception=True)
        if "shared" in data.validated_data:
            environment = environment_set_shared(
                environment=environment, shared=data.validated_data["shared"]
            )
        return Response(EnvironmentOut(environment).data)


# `POST`: `perform` on an environment the user may drive; answers the entry as it is then.
# (A comment, not a docstring: the schema would show it as each subclass's description.)
class _EnvironmentActionApi(APIView):
    @staticmethod
    def perform(*, environment: Environment) -> Environment:
        raise NotImplementedError

    @extend_schema(request=None, responses=EnvironmentOut)
    def post(self, request: Request, pk: int) -> Response:
        environment = self.perform(environment=_controlled_environment(request, pk))
        return Response(EnvironmentOut(environment).data)


class EnvironmentCapacityApi(_EnvironmentActionApi):
    throttle_scope = "capacity"
    perform = staticmethod(environment_measure_capacity)


class EnvironmentProbeApi(_EnvironmentActionApi):
    throttle_scope = "probe"
    perform = staticmethod(environment_probe)


class EnvironmentContainerStopApi(_EnvironmentActionApi):
    """Stops and removes the container an image registration started; the entry stays."""

    perform = staticmethod(environment_container_stop)


def _snapshot_bytes(data: dict) -> tuple[bytes, str]:
    """The file's bytes (at most one over the limit) and a default name, from either input."""
    upload, content = data.get("file"), data.get("snapshot")
    if (upload is None) == (content is None):
        raise CatalogSnapshotRejected(
            {"file": ["give the catalog file as the multipart field 'file', or its content as "
                      "'snapshot' in a JSON body (one of the two)"]}
        )
    if upload is not None:
        upload.seek(0)
        return bytes(upload.read(MAX_SNAPSHOT_BYTES + 1)), catalog_snapshot_name_from_filename(
            upload.name or ""
        )
    if isinstance(content, str):
        return content.encode("utf-8"), ""
    publisher = content.get("publisher") if isinstance(content, dict) else None
    try:
        raw = json.dumps(content, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError:
        raise CatalogSnapshotRejected({"snapshot": ["contains a non-finite number"]}) from None
    return raw, publisher[:100] if isinstance(publisher, str) else ""


class CatalogSnapshotListApi(APIView):
    parser_classes = (JSONParser, MultiPartParser, FormParser)

    @extend_schema(
        operation_id="catalog_snapshots_list", parameters=PAGE_PARAMETERS,
        responses=list_or_page_schema(CatalogSnapshotOut, "CatalogSnapshot", cap=SNAPSHOTS_LIST_CAP),
    )
    def get(self, request: Request) -> Response:
        return list_or_page(
            request, catalog_snapshots_visible_to(user=request.user),
            lambda rows: CatalogSnapshotOut(rows, many=True, context={"request": request}).data,
            cap=SNAPSHOTS_LIST_CAP,
        )

    @extend_schema(request=CatalogSnapshotIn, responses={201: CatalogSnapshotOut})
    def post(self, request: Request) -> Response:
        too_big = catalog_snapshot_too_big(content_length=request.META.get("CONTENT_LENGTH"))
        if too_big is not None:  # before request.data reads the body
            raise too_big
        data = CatalogSnapshotIn(data=request.data)
        data.is_valid(raise_exception=True)
        raw, default_name = _snapshot_bytes(data.validated_data)
        try:
            snapshot = catalog_snapshot_import(
                owner=signed_in_user(request), raw=raw, name=data.validated_data["name"] or default_name
            )
        except CatalogSnapshotRejected as exc:
            if "snapshot" in data.validated_data and "file" in exc.errors:
                # The content came as the JSON field `snapshot`: name that field.
                exc.errors["snapshot"] = exc.errors.pop("file")
            raise
        return Response(CatalogSnapshotOut(snapshot, context={"request": request}).data, status=status.HTTP_201_CREATED)


class CatalogSnapshotDetailApi(APIView):
    @extend_schema(responses=CatalogSnapshotOut)
    def get(self, request: Request, pk: int) -> Response:
        snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
        return Response(CatalogSnapshotOut(snapshot, context={"request": request}).data)


class CatalogEntryRegisterApi(APIView):
    throttle_scope = "register"

    """Probes the server (and may start a bundled one, waiting for its /health) before it answers."""

    @extend_schema(request=CatalogEntryRegisterIn, responses={201: EnvironmentOut})
    def post(self, request: Request, pk: int) -> Response:
        snapshot = get_object_or_404(catalog_snapshots_visible_to(user=request.user), pk=pk)
        data = CatalogEntryRegisterIn(data=request.data)
        data.is_valid(raise_exception=True)
        environment = catalog_entry_register(owner=signed_in_user(request), snapshot=snapshot, **data.validated_data)
        return Response(EnvironmentOut(environment).data, status=status.HTTP_201_CREATED)
