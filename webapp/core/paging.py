"""One paging shape for every list the API serves.

Asked with `limit` and/or `offset`, a list answers one page: `{count, next, previous,
results}` (DRF's limit/offset shape; `next` and `previous` are whole URLs carrying the query,
null at either end). Asked without them, it answers the v1 shape it always had, a bare JSON
list, and never cuts it silently: every bare list carries `X-Total-Count`, and one longer than
its endpoint's cap (the runs, evaluations, sweeps, recipes and catalog snapshots lists) answers
the first `cap` items with a `Link: <...>; rel="next"` header to the page after them.

`limit` is at most MAX_LIMIT; a bad `limit` or `offset` is a 400 naming the parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from webapp.core.params import int_param

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
MAX_OFFSET = 10**9

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit", int,
        description=f"Page size (1-{MAX_LIMIT}, default {DEFAULT_LIMIT} with `offset`): the answer is one page, "
        "{count, next, previous, results}.",
    ),
    OpenApiParameter("offset", int, description="Items to skip (with or without `limit`): the answer is one page."),
]


class Pager(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT


def wants_page(request: Request) -> bool:
    return "limit" in request.query_params or "offset" in request.query_params


Rows = QuerySet[Any] | Sequence[Any]
Serialize = Callable[[list[Any]], Any]


def list_or_page(request: Request, rows: Rows, serialize: Serialize, *, cap: int | None = None) -> Response:
    """`rows` (a queryset or a list) as one page when asked for one, else as the bare list (at
    most `cap` items, with the headers that say so). `serialize` turns a list of rows into the
    JSON list of their items (a serializer's `.data`)."""
    if wants_page(request):
        int_param(request, "limit", None, 1, MAX_LIMIT)
        int_param(request, "offset", None, 0, MAX_OFFSET)
        pager = Pager()
        page = pager.paginate_queryset(rows, request) or []
        return pager.get_paginated_response(serialize(list(page)))
    items = list(rows) if cap is None else list(rows[: cap + 1])
    if cap is None or len(items) <= cap:
        response = Response(serialize(items))
        response["X-Total-Count"] = str(len(items))
        return response
    total = rows.count() if isinstance(rows, QuerySet) else len(rows)
    response = Response(serialize(items[:cap]))
    response["X-Total-Count"] = str(total)
    following = replace_query_param(request.build_absolute_uri(), "limit", min(cap, MAX_LIMIT))
    response["Link"] = f'<{replace_query_param(following, "offset", cap)}>; rel="next"'
    return response


@cache
def page_serializer(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    """`{count, next, previous, results: [item]}` as a serializer class (for the schema)."""
    fields: dict[str, Any] = {
        "count": serializers.IntegerField(help_text="Items that match, on every page."),
        "next": serializers.CharField(allow_null=True, help_text="The next page's URL; null on the last page."),
        "previous": serializers.CharField(allow_null=True, help_text="The previous page's URL; null on the first."),
        "results": item(many=True),
        "__doc__": f"One page of {name} (asked with `limit` or `offset`).",
    }
    return type(f"{name}Page", (serializers.Serializer,), fields)


def list_or_page_schema(item: type[serializers.Serializer], name: str, *, cap: int | None = None) -> OpenApiResponse:
    """The schema of a `list_or_page` answer: the bare list or a page."""
    shape = PolymorphicProxySerializer(
        component_name=f"{name}ListOrPage",
        serializers=[item(many=True), page_serializer(item, name)],
        resource_type_field_name=None,
        many=False,  # the answer is one of the shapes, not a list of either
    )
    bare = (
        f"the first {cap}, with `Link: <...>; rel=\"next\"` to the rest when there are more"
        if cap is not None else "all of them"
    )
    return OpenApiResponse(
        shape,
        description=f"Without `limit`/`offset`: a list ({bare}; `X-Total-Count` says how many match). "
        "With them: one page, {count, next, previous, results}.",
    )
