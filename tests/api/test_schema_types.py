"""Every response in the OpenAPI document says what it holds (issue 21 item 2): no GET
operation answers, at its top level, a bare object (an object with no properties and no
typed additionalProperties) or an untyped value; and the two most-used responses, a run's
metrics and its rollouts, hold no bare object or untyped value at any depth, short of the
few parts whose shape is someone else's (listed in DEEP_EXCEPTIONS, each with its reason)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.factories import JobFactory

# Schema keywords that say what a value is; a schema with none of them accepts anything.
TYPING_KEYWORDS = frozenset({
    "type", "$ref", "oneOf", "anyOf", "allOf", "enum", "const", "properties", "items", "prefixItems",
})

# The responses that must be typed all the way down.
DEEP = ("/api/runs/{id}/metrics/", "/api/runs/{id}/rollouts/")

# Where DEEP holds an object whose keys and values are not the lab's to say.
DEEP_EXCEPTIONS = {
    # A tool call's arguments as TRL parses them: the tool's own parameters by name, whose
    # types are the environment's tool schema (a string instead where the caller kept OpenAI's form).
    "/api/runs/{id}/rollouts/ $.results[].messages[].tool_calls[].function.arguments|1",
    "/api/runs/{id}/rollouts/ $.results[].prompt|1[].tool_calls[].function.arguments|1",
}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref not in seen, f"a $ref loop at {ref}"
        seen.add(ref)
        target: Any = schema
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _types(node: dict[str, Any]) -> set[str]:
    declared = node.get("type", [])
    return {declared} if isinstance(declared, str) else set(declared)


def _untyped(node: Any) -> bool:
    """Accepts any value: `true`, or a schema with no keyword that says what the value is."""
    return node is True or (isinstance(node, dict) and not (TYPING_KEYWORDS & set(node)))


def _bare_object(node: dict[str, Any]) -> bool:
    """An object that says nothing of its fields: no properties, and additionalProperties
    absent, `true` or untyped."""
    if "object" not in _types(node) or node.get("properties") or node.get("patternProperties"):
        return False
    extra = node.get("additionalProperties", True)
    return extra is not False and _untyped(extra)


def _branches(schema: dict[str, Any], node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """The node itself, or each of its oneOf / anyOf branches (`where|index`), $refs resolved."""
    node = _resolve(schema, node)
    if isinstance(node, dict) and ("oneOf" in node or "anyOf" in node):
        for index, branch in enumerate(node.get("oneOf", []) + node.get("anyOf", [])):
            yield from _branches(schema, branch, f"{where}|{index}")
        return
    yield where, node


def _faults_at(schema: dict[str, Any], node: Any, where: str) -> Iterator[str]:
    for place, branch in _branches(schema, node, where):
        if _untyped(branch):
            yield f"{place} (untyped)"
        elif isinstance(branch, dict) and _bare_object(branch):
            yield f"{place} (bare object)"


def _deep_faults(schema: dict[str, Any], node: Any, where: str, depth: int = 0) -> Iterator[str]:
    assert depth < 40, f"nested past 40 levels at {where}"
    yield from _faults_at(schema, node, where)
    for place, branch in _branches(schema, node, where):
        if not isinstance(branch, dict):
            continue
        for name, child in (branch.get("properties") or {}).items():
            yield from _deep_faults(schema, child, f"{place}.{name}", depth + 1)
        for key, suffix in (("items", "[]"), ("additionalProperties", "{*}")):
            if isinstance(branch.get(key), dict) and branch[key]:
                yield from _deep_faults(schema, branch[key], f"{place}{suffix}", depth + 1)
        for index, child in enumerate(branch.get("prefixItems", [])):
            yield from _deep_faults(schema, child, f"{place}[{index}]", depth + 1)
        for index, child in enumerate(branch.get("allOf", [])):
            yield from _deep_faults(schema, child, f"{place}&{index}", depth + 1)


def _get_json_200(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for path, operations in sorted(schema["paths"].items()):
        response = (operations.get("get") or {}).get("responses", {}).get("200")
        body = (_resolve(schema, response) or {}).get("content", {}).get("application/json")
        if body is not None:
            yield path, body.get("schema", {})


def test_every_get_response_is_typed_at_its_top_level(schema: dict[str, Any]) -> None:
    faults = [f"{path} {fault}" for path, body in _get_json_200(schema) for fault in _faults_at(schema, body, "$")]
    assert not faults, "GET responses (200, JSON) that do not say what they hold:\n" + "\n".join(faults)


def test_metrics_and_rollouts_are_typed_all_the_way_down(schema: dict[str, Any]) -> None:
    bodies = dict(_get_json_200(schema))
    assert set(DEEP) <= set(bodies)
    found = [f"{path} {fault}" for path in DEEP for fault in _deep_faults(schema, bodies[path], "$")]
    faults = [fault for fault in found if fault.rsplit(" (", 1)[0] not in DEEP_EXCEPTIONS]
    assert not faults, "untyped parts of the metrics and rollouts responses:\n" + "\n".join(faults)
    stale = DEEP_EXCEPTIONS - {fault.rsplit(" (", 1)[0] for fault in found}
    assert not stale, f"exceptions that no longer match anything (remove them): {sorted(stale)}"


def test_the_checks_see_what_they_look_for(schema: dict[str, Any]) -> None:
    """The walkers flag a bare object and an untyped value, and pass typed ones."""
    doc = {"components": {"schemas": {"Bare": {"type": "object", "additionalProperties": {}}}}}
    assert list(_faults_at(doc, {"$ref": "#/components/schemas/Bare"}, "")) == [" (bare object)"]
    assert list(_faults_at(doc, {"oneOf": [{"type": "null"}, {}]}, "")) == ["|1 (untyped)"]
    typed_map = {"type": "object", "additionalProperties": {"type": "number"}}
    assert list(_faults_at(doc, typed_map, "")) == []
    nested = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": ["object", "null"]}}}}
    assert list(_deep_faults(doc, nested, "")) == [".a[] (bare object)"]


# Transcripts in each form a producer stores: TRL's tool loop (arguments as an object), an
# external script in OpenAI's form (arguments as JSON text, content null beside a call), a
# multimodal prompt, a bare prompt string and a message with a key the lab does not name.
ROLLOUTS = [
    {
        "prompt": [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "say hi"}],
        "messages": [
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "greet", "arguments": {"who": "you", "n": 2}}}]},
            {"role": "tool", "name": "greet", "content": "hi you"},
            {"role": "assistant", "content": "hi"},
        ],
        "rewards": {"exact": 1.0, "brevity": None},
        "reward": 1.0,
        "advantage": 0.5,
        "env": "echo",
        "seed": 7,
    },
    {
        "prompt": "say hi",
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "greet", "arguments": "{\"who\": 1}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "name": "greet", "content": "{'error': 'no'}"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "reasoning_content": "easy"},
        ],
        "rewards": {"exact": 0.0},
    },
    {"prompt": [{"role": "user", "content": [{"type": "text", "text": "look"}]}], "messages": [], "rewards": {}},
]


def _conforms(schema: dict[str, Any], path: str, method: str, response: Any) -> None:
    from jsonschema import Draft202012Validator

    assert response.status_code == 200, (path, response.content[:500])
    body = schema["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({**body, "components": schema["components"]})
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in validator.iter_errors(response.json())]
    assert not errors, f"{method.upper()} {path} answers what its schema does not say:\n" + "\n".join(errors)


@pytest.mark.django_db
def test_real_responses_conform_to_the_typed_schemas(schema: dict[str, Any], api: Any, owner: Any) -> None:
    """The schemas above say what the endpoints answer: real answers (the external-run write
    path stores the transcripts) validate against them."""
    from webapp.jobs.models import Job

    runs = []
    for name in ("a", "b"):
        created = api.post("/api/runs/external/", {"name": name, "config": {"lr": len(name), "x": {}}}, format="json")
        assert created.status_code == 201, created.json()
        run_id = created.json()["id"]
        for step in (1, 2):
            logged = api.post(
                f"/api/runs/{run_id}/log/",
                json.dumps({"step": step, "metrics": {"reward": step / 2, "loss": 0.25}, "rollouts": ROLLOUTS}),
                content_type="application/json",
            )
            assert logged.status_code == 200, logged.json()
        assert api.post(f"/api/runs/{run_id}/finish/", {}, format="json").status_code == 200
        runs.append(run_id)
    first = runs[0]

    rollouts = api.get(f"/api/runs/{first}/rollouts/")
    assert [m.get("role") for m in rollouts.json()["results"][0]["messages"]] == ["assistant", "tool", "assistant"]
    _conforms(schema, "/api/runs/{id}/rollouts/", "get", rollouts)
    _conforms(schema, "/api/runs/{id}/rollouts/steps/", "get", api.get(f"/api/runs/{first}/rollouts/steps/"))
    metrics = api.get(f"/api/runs/{first}/metrics/")
    assert metrics.json()["series"]["reward"] == [[1, 0.5], [2, 1.0]]
    _conforms(schema, "/api/runs/{id}/metrics/", "get", metrics)
    _conforms(schema, "/api/runs/{id}/metrics/keys/", "get", api.get(f"/api/runs/{first}/metrics/keys/"))
    events = api.get(f"/api/runs/{first}/events/", {"limit": 1})
    assert events.json()["next"]
    _conforms(schema, "/api/runs/{id}/events/", "get", events)
    _conforms(schema, "/api/runs/{id}/events/", "get", api.get(f"/api/runs/{first}/events/"))
    for extra in ({}, {"group_by": "group", "key": ["reward", "loss"]}):
        compare = api.get("/api/runs/compare/", {"run": runs, **extra})
        _conforms(schema, "/api/runs/compare/", "get", compare)
    assert "groups" in compare.json()

    _conforms(schema, "/api/account/run-layout/", "get", api.get("/api/account/run-layout/"))
    layout = {"metrics": ["loss"], "settings": {"metric:loss": {"log_y": True}, "reward": {"smoothing": 0.5}}}
    _conforms(schema, "/api/account/run-layout/", "put", api.put("/api/account/run-layout/", layout, format="json"))
    _conforms(schema, "/api/account/run-layout/", "get", api.get("/api/account/run-layout/"))

    _conforms(schema, "/api/reward-recipes/kinds/", "get", api.get("/api/reward-recipes/kinds/"))
    queued = JobFactory(owner=owner, progress_total=0)
    done = JobFactory(
        owner=owner, progress_total=4, progress_done=4, status=Job.Status.SUCCEEDED,
        result={"groups": [{"rewards": [1.0, None]}]},
    )
    for job in (queued, done):
        _conforms(schema, "/api/jobs/{id}/", "get", api.get(f"/api/jobs/{job.pk}/"))
