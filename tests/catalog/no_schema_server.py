"""A server that answers `/health` and `/metadata` with JSON and has nothing else: no
`/schema`, no `/ws`, no `/list_environments` (Starlette's plain 404). An OpenEnv server from
before `/schema`, or a JSON service that is not an environment, looks like this to
registration. Served by uvicorn: `tests.catalog.no_schema_server:app` (`health_only`: not even
`/metadata`)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "healthy"})


async def metadata(request: Request) -> JSONResponse:
    return JSONResponse({"name": "OldEnvironment", "description": "Served before /schema existed.", "version": "0.1.1"})


app = Starlette(routes=[Route("/health", health), Route("/metadata", metadata)])
health_only = Starlette(routes=[Route("/health", health)])
