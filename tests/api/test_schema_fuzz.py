"""Schemathesis against the served OpenAPI schema: the real ASGI app (uvicorn), signed in
with a real token, bounded examples per operation. No 5xx, and every documented response
matches its schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.envs.servers import free_port
from tests.support.processes import start_web

# Each operation's test writes through the live server; the database is flushed after each.
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Endpoints that would revoke the fuzzer's own token mid-run.
EXCLUDED = r"^/api/auth/logout"


@pytest.fixture(scope="module")
def fuzz_web(django_db_setup) -> Iterator[str]:
    port = free_port()
    # Short probes: generated loopback URLs must not cost a 10 s deadline each.
    service = start_web(port, ENVLAB_PROBE_DEADLINE="2", ENVLAB_PROBE_TIMEOUT="1")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        service.stop()


@pytest.fixture
def fuzz_headers(transactional_db, echo_url) -> dict[str, str]:
    """A signed-in user with a registered environment (so ids in paths can exist)."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from webapp.catalog.services import environment_register

    user = get_user_model().objects.create_user("fuzzer", password="fuzzer-password-long")
    environment_register(owner=user, name="echo-server", base_url=echo_url)
    _, token = AuthToken.objects.create(user=user, expiry=None)
    return {"Authorization": f"Token {token}"}


def _generated_schema() -> dict[str, Any]:
    """The document /api/schema/ serves, built in-process at collection time (schemathesis's
    lazy fixture loader does not run on this pytest); a test below checks the served one is it."""
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


GENERATED = _generated_schema()
schema = schemathesis.openapi.from_dict(GENERATED).exclude(path_regex=EXCLUDED)


def test_the_fuzzed_schema_is_the_served_one(fuzz_web: str, fuzz_headers: dict[str, str]) -> None:
    import requests

    served = requests.get(f"{fuzz_web}/api/schema/?format=json", headers=fuzz_headers, timeout=30)
    assert served.status_code == 200
    assert served.json() == GENERATED
    anonymous = requests.get(f"{fuzz_web}/api/schema/?format=json", timeout=30)
    assert anonymous.status_code == 401  # L3: the schema is for signed-in users


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_no_server_error_and_documented_shapes(case: Any, fuzz_web: str, fuzz_headers: dict[str, str]) -> None:
    case.call_and_validate(
        base_url=fuzz_web, headers=fuzz_headers, timeout=30,
        checks=[not_a_server_error, response_schema_conformance],
    )
