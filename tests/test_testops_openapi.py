"""The conformance table's 25.4 rows against allure-testops-service 25.4.1's own description, and every request
the suite's TestOps flows send validated with a real OpenAPI validator (openapi-core).

1. **Re-derivation.** Every 25.4 fact of ``tests/data/testops-conformance.json`` (route, query parameters,
   request body fields, types, enums, required fields, limits, answer status and fields) is compared with
   ``tests/data/testops-openapi/report-service-25.4.1.json``. A difference is allowed only where the table
   names it (``exceptions-25.4``: what differs and why); an exception that no longer differs is stale and
   fails too.
2. **Recorded requests.** The upload and verify phases run here against the TestOps test server of each
   generation; the server records every request it gets (body as sent), and each is validated with
   openapi-core against the 25.4.1 description. The current generation has no published description: its
   requests are validated against 25.4.1's too, so the only differences allowed are the ones the table's
   current rows name (``exceptions-current``). Non-conforming: zero, or the exceptions named in the table
   (``exceptions-25.4``), each matched by its location.

Set ``TESTOPS_EVIDENCE_RECORD_REQUESTS`` to a directory and every TestOps test server of a pytest run writes
its requests there (``tests/servers/testops_server.py``); :func:`test_the_recorded_requests_of_a_run_conform`
then validates those too: every flow of those modules (bootstrap, launch, select, upload, verify, reconcile,
the fault matrix) — how the cross-check of issue 28 was repeated over whole modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from servers import conformance
from servers.testops_server import LoggedRequest, TestOpsServer, load_recorded

openapi_core = pytest.importorskip("openapi_core", reason="openapi-core is in the dev lock (requirements/dev.txt): "
                                   "bash scripts/setup.sh tests installs it")

DESCRIPTION = Path(__file__).resolve().parent / "data" / "testops-openapi" / "report-service-25.4.1.json"
PREFIX = "/api"


@cache
def description() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DESCRIPTION.read_text(encoding="utf-8"))
    return data


@cache
def validator() -> Any:
    from openapi_core import Config, OpenAPI

    # The published file fails openapi-spec-validator on three chart parameters the action never calls
    # (tests/data/testops-openapi/README.md); the request validation does not depend on that check.
    return OpenAPI.from_file_path(str(DESCRIPTION), config=Config(spec_validator_cls=None))


def resolve(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with ``$ref`` followed and ``allOf`` merged (properties and required)."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return resolve(description()["components"]["schemas"][name])
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema.get("allOf", ()):
        inner = resolve(part)
        merged["properties"] = {**inner.get("properties", {}), **merged.get("properties", {})}
        merged["required"] = sorted({*inner.get("required", ()), *merged.get("required", ())})
        merged.setdefault("type", inner.get("type"))
    if "properties" in merged:
        merged.setdefault("type", "object")
    return merged


def operation(method: str, route: str) -> dict[str, Any] | None:
    item = description()["paths"].get(PREFIX + route)
    return None if item is None else item.get(method.lower())


# --- 1. the table's 25.4 rows, re-derived ---------------------------------------------------------------------


def _spec(shape: Any) -> Mapping[str, Any]:
    return {"type": shape} if isinstance(shape, str) else shape


def compare(shape: Any, schema: Mapping[str, Any], where: str, *, answer: bool = False) -> Iterator[str]:
    """Where the table's ``shape`` says something other than the description's ``schema``."""
    spec, schema = _spec(shape), resolve(schema)
    kind = spec["type"]
    if kind == "any":
        return
    if "oneOf" in schema:
        # The step DTOs: the table describes the one branch the action sends (its fields all in that branch).
        branches = [resolve(b) for b in schema["oneOf"]]
        fields = set(spec.get("fields", {}))
        fitting = [b for b in branches if fields <= set(b.get("properties", {}))]
        if not fitting:
            yield f"{where}: no branch of oneOf has the fields {sorted(fields)}"
            return
        schema = fitting[0]
    if kind == "page":
        content = resolve(schema).get("properties", {}).get("content")
        if content is None:
            yield f"{where}: the description's answer is not a page"
            return
        yield from compare(spec["items"], content["items"], f"{where}.content[]", answer=answer)
        return
    want = {"object": "object", "array": "array", "integer": "integer", "string": "string", "boolean": "boolean",
            "number": "number"}[kind]
    if schema.get("type") != want:
        yield f"{where}: the table says {want}, the description {schema.get('type')}"
        return
    if kind == "object":
        properties = schema.get("properties", {})
        for name, item in spec.get("fields", {}).items():
            if name not in properties:
                yield f"{where}.{name}: not in the description"
            else:
                yield from compare(item, properties[name], f"{where}.{name}", answer=answer)
        required = set(schema.get("required", ()))
        if answer:
            missing = required - set(spec.get("fields", {}))
            if missing and not spec.get("open"):
                yield f"{where}: the answer leaves out the required {sorted(missing)}"
        elif set(spec.get("required", ())) != required:
            yield f"{where}: required {sorted(spec.get('required', ()))}, the description {sorted(required)}"
    elif kind == "array":
        yield from compare(spec["items"], schema["items"], f"{where}[]", answer=answer)
        if spec.get("max") != schema.get("maxItems"):
            yield f"{where}: at most {spec.get('max')} items, the description {schema.get('maxItems')}"
    elif kind == "string":
        if spec.get("case") == "insensitive":
            yield f"{where}: case-insensitive, the description's enum is exact"
        if (sorted(spec.get("enum") or ()) != sorted(schema.get("enum") or ())
                and not (answer and "enum" not in spec)):  # an answer's enum the action does not rely on
            yield f"{where}: enum {spec.get('enum')}, the description {schema.get('enum')}"
        for ours, theirs in (("min", "minLength"), ("max", "maxLength")):
            if spec.get(ours) != schema.get(theirs) and not (ours == "min" and spec.get(ours, 0) == 0
                                                             and theirs not in schema):
                yield f"{where}: {ours} {spec.get(ours)}, the description {theirs} {schema.get(theirs)}"


def differences(endpoint: conformance.Endpoint) -> Iterator[str]:
    where = f"{endpoint.method} {endpoint.route}"
    op = operation(endpoint.method, endpoint.route)
    if endpoint.absent or op is None:
        if endpoint.absent != (op is None):
            yield f"{where}: the table says {'absent' if endpoint.absent else 'present'}, the description the other"
        return
    params = {p["name"]: p for p in op.get("parameters", ()) if p.get("in") == "query"}
    for name, spec in endpoint.query.items():
        param = params.get(name)
        if spec.get("undefined"):
            if param is not None:
                yield f"{where} ?{name}: marked undefined, but the description defines it"
            continue
        if param is None:
            yield f"{where} ?{name}: not a parameter in the description"
            continue
        schema = resolve(param["schema"])
        kind = "string" if schema.get("type") == "array" else schema.get("type")
        if spec["type"] != kind or bool(spec.get("repeat")) != (schema.get("type") == "array"):
            yield f"{where} ?{name}: {spec['type']}{'[]' if spec.get('repeat') else ''}, the description {schema}"
        if bool(spec.get("required")) != bool(param.get("required")):
            yield f"{where} ?{name}: required {bool(spec.get('required'))}, the description {param.get('required')}"
    for name, param in params.items():
        if param.get("required") and name not in endpoint.query:
            yield f"{where} ?{name}: required by the description, missing from the table"
    content = (op.get("requestBody") or {}).get("content", {})
    body = endpoint.body
    if body is None:
        if content:
            yield f"{where}: the description takes a body ({sorted(content)}), the table none"
    elif body["content-type"] not in content:
        yield f"{where}: body {body['content-type']}, the description {sorted(content)}"
    elif body["content-type"] == "multipart/form-data":
        schema = resolve(content["multipart/form-data"]["schema"])
        for name, part in body.get("parts", {}).items():
            if name not in schema.get("properties", {}):
                yield f"{where}: part {name!r} not in the description"
            elif bool(part.get("required")) != (name in schema.get("required", ())):
                yield f"{where}: part {name!r} required {bool(part.get('required'))}"
    else:
        yield from compare(body["shape"], content[body["content-type"]]["schema"], f"{where} body")
    codes = sorted(op.get("responses", {}))
    status = str(endpoint.answer.get("status", 200))
    if codes != [status]:
        yield f"{where}: answers {status}, the description {codes}"
        return
    answered = op["responses"][status].get("content")
    shape = endpoint.answer.get("shape")
    if shape is None:
        if answered:
            yield f"{where}: the description answers a body, the table none"
        return
    if not answered:
        yield f"{where}: the table answers a body, the description none"
        return
    schema = next(iter(answered.values()))["schema"]
    if "oneOf" in schema and _spec(shape)["type"] == "object":
        schema = schema["oneOf"][0]  # GET /job: JobDto, or a page of them
    yield from compare(shape, schema, f"{where} answer", answer=True)


def table_exceptions(generation: str = "25.4") -> dict[str, dict[str, str]]:
    """endpoint id -> {where: reason} of the differences the table names."""
    return {entry["id"]: {x["where"]: x["reason"] for x in entry.get(f"exceptions-{generation}", ())}
            for entry in conformance.table()["endpoints"]}


@pytest.mark.parametrize("endpoint", conformance.endpoints("25.4"), ids=lambda e: e.id)
def test_the_25_4_rows_are_what_the_description_says(endpoint: conformance.Endpoint) -> None:
    found = set(differences(endpoint))
    # "request: ..." exceptions are about requests as sent (checked by the recorded-requests tests below)
    named = {w: r for w, r in table_exceptions()[endpoint.id].items() if not w.startswith("request: ")}
    assert found == set(named), {"unnamed": sorted(found - set(named)), "stale": sorted(set(named) - found)}
    for reason in named.values():
        assert len(reason) > 40  # a reason, not a label


def test_every_route_the_action_calls_is_in_the_description() -> None:
    for endpoint in conformance.endpoints("25.4"):
        entry = next(e for e in conformance.table()["endpoints"] if e["id"] == endpoint.id)
        if entry["used-by"] and not endpoint.absent:
            assert operation(endpoint.method, endpoint.route) is not None, endpoint.id


def test_the_comparison_sees_what_the_findings_were() -> None:
    """The re-derivation is not blind: the table rows of main that issue 28 found wrong differ here."""
    results = conformance.by_id("25.4", "upload.results")
    lower = json.loads(json.dumps(results.body))
    lower["shape"]["fields"]["results"]["items"]["fields"]["status"] = {
        "type": "string", "enum": ["failed", "broken", "passed", "skipped", "unknown"], "case": "insensitive"}
    lower["shape"]["fields"]["results"]["items"]["fields"]["steps"]["items"]["fields"]["steps"] = {
        "type": "array", "items": "any"}
    found = set(compare(lower["shape"], operation("POST", "/upload/test-result")["requestBody"]["content"][  # type: ignore[index]
        "application/json"]["schema"], "body"))
    assert "body.results[].status: case-insensitive, the description's enum is exact" in found
    assert any("steps[]: no branch of oneOf has the fields" in f and "'steps'" in f for f in found), found
    rows = {"type": "array", "items": {"type": "object", "fields": {}, "open": False}}
    schema = operation("POST", "/testresult/attachment")["responses"]["200"]["content"]["*/*"]["schema"]  # type: ignore[index]
    assert list(compare(rows, schema, "answer", answer=True)) == [
        "answer[]: the answer leaves out the required ['entity']"]


# --- 2. recorded requests, validated -------------------------------------------------------------------------


def validation_errors(entry: LoggedRequest) -> list[str]:
    """Why the description refuses this recorded request (empty: it conforms). Beyond openapi-core, a query
    parameter the operation does not define is reported, since the server ignores it silently."""
    from openapi_core.testing import MockRequest

    route = entry.route
    op = operation(entry.method, route)
    templated = None
    if op is None:
        for endpoint in conformance.endpoints("25.4"):
            if endpoint.method == entry.method and endpoint.pattern.fullmatch(route):
                templated, op = endpoint.route, operation(entry.method, endpoint.route)
                break
    if op is None:
        return [f"{entry.method} {route}: no such operation in the description"]
    errors = []
    defined = {p["name"] for p in op.get("parameters", ()) if p.get("in") == "query"}
    errors += [f"?{name}: not a parameter of {entry.method} {templated or route}" for name in entry.query
               if name not in defined]
    query = [(k, v) for k, values in entry.query.items() for v in values]
    request = MockRequest("http://testops.local", entry.method.lower(), PREFIX + route, args=query,
                          data=entry.raw or None, content_type=entry.content_type or None)
    try:
        validator().validate_request(request)
    except Exception as error:  # openapi-core raises several classes of error; each is reported
        errors += _explain(error, entry)
    return errors


def _explain(error: BaseException, entry: LoggedRequest) -> list[str]:
    cause = error.__cause__
    schema_errors = getattr(cause, "schema_errors", None) or getattr(error, "schema_errors", None)
    if not schema_errors:
        return [f"{type(error).__name__}: {error}"[:300]]
    found = []
    for problem in schema_errors:
        path = "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in problem.absolute_path)
        if (problem.validator == "type" and isinstance(problem.instance, bytes)
                and problem.schema.get("format") == "binary"):
            # openapi-core hands a multipart file part over as bytes, which its OpenAPI 3.1 validator then
            # refuses as not a string: an artefact of the validator (format: binary is a file), not of the request.
            continue
        if problem.validator == "oneOf" and _is_a_body_step(problem.instance):
            # Each step matches all three step DTOs (open objects, a discriminator mapped to no value): named
            # in the table (upload.results, exceptions-25.4), checked here against the body step it is.
            found.append(f"{path}: oneOf ambiguous (a body step, valid as UploadTestResultBodyStepDto alone)")
            continue
        found.append(f"{path}: {problem.message}"[:300])
    return found


@cache
def _body_step_validator() -> Any:
    """UploadTestResultBodyStepDto with no field beyond those it (and its allOf) defines, resolved inside the
    description (JSON Schema 2020-12, the dialect of OpenAPI 3.1)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    registry = Registry().with_resource("urn:report-service", Resource.from_contents(
        description(), default_specification=DRAFT202012))
    return Draft202012Validator({"$ref": "urn:report-service#/components/schemas/UploadTestResultBodyStepDto",
                                 "unevaluatedProperties": False}, registry=registry)


def _is_a_body_step(step: Any) -> bool:
    return isinstance(step, dict) and step.get("type") == "body" and bool(_body_step_validator().is_valid(step))


def test_a_step_is_checked_as_a_body_step_with_nothing_else() -> None:
    step = {"type": "body", "body": "trial 1 of 2 > tests pass", "status": "PASSED", "start": 1, "stop": 2}
    assert _is_a_body_step(step)
    assert not _is_a_body_step({**step, "steps": []})  # nested steps: not in the description
    assert not _is_a_body_step({**step, "status": "passed"})
    assert not _is_a_body_step({**step, "type": "UploadTestResultBodyStepDto"})


def endpoint_id(entry: LoggedRequest, generation: str = "25.4") -> str:
    """The table row of a recorded request (a request answered by an injected fault was never matched)."""
    if entry.endpoint:
        return entry.endpoint
    found = conformance.endpoint(generation, entry.method, entry.route)
    return found.id if found is not None else ""


def allowed(entry: LoggedRequest, error: str) -> bool:
    """Whether the table names this non-conformance (exceptions-25.4 of the request's endpoint)."""
    named = table_exceptions().get(endpoint_id(entry), {})
    return any(where.startswith("request: ") and where.removeprefix("request: ") in error for where in named)


def run_the_flows(tmp_path: Path, generation: str) -> list[LoggedRequest]:
    """Upload and verify against one server, as the other test modules run them (the selection is seeded by
    TestOpsCampaign); the other phases' requests are checked from recorded runs."""
    from evidence_support import SENTINEL, TestOpsCampaign, cell, small_contract

    contract = small_contract(testops=True)
    with TestOpsServer(token=SENTINEL, generation=generation, visible_after_polls=1) as server:
        campaign = TestOpsCampaign(server, tmp_path, contract)
        campaign.export([cell(contract, "get-task-context"),
                         cell(contract, "budget-stop", disposition="behavior_failure", failed=["spend-reported"]),
                         cell(contract, "company-credential-approval")])
        upload = campaign.run("upload")
        assert upload.exit_code == 0, upload.summary
        assert campaign.run("verify").exit_code == 1
        return list(server.log)


def test_every_request_of_the_upload_and_verify_flows_conforms(tmp_path: Path, testops_generation: str) -> None:
    generation = testops_generation
    recorded = run_the_flows(tmp_path, generation)
    assert {e.endpoint for e in recorded} >= {"upload.start", "upload.session", "upload.results", "upload.stop",
                                              "testresult.list", "jobrun.get"}, {e.endpoint for e in recorded}
    report = check(recorded, generation)
    assert report["non-conforming"] == [], report["non-conforming"][:5]
    assert report["checked"] == len([e for e in recorded if e.path != "/api/uaa/oauth/token"])


def check(recorded: Iterable[LoggedRequest], generation: str) -> dict[str, Any]:
    """Validate recorded requests: the non-conforming ones (unnamed errors) and the named exceptions met."""
    bad, named, checked = [], set(), 0
    for entry in recorded:
        if entry.path.endswith("/uaa/oauth/token") or entry.refused or entry.status is None:
            continue  # the token exchange is not part of report-service; refused requests are tests of refusal
        if entry.endpoint is None and entry.status in (404, 405):
            continue  # a route no table row has, sent by a test of the server's 404 and 405, never by a flow
        checked += 1
        for error in validation_errors(entry):
            if allowed(entry, error) or (generation == "current" and current_allows(entry, error)):
                named.add((endpoint_id(entry, generation), error.split(":")[0]))
            else:
                bad.append(f"{entry.method} {entry.path}: {error}")
    return {"checked": checked, "non-conforming": bad, "named": sorted(named, key=str)}


def current_allows(entry: LoggedRequest, error: str) -> bool:
    """The current generation's own rows (Allure 3's client) that differ from 25.4.1: named in the table's
    current generation (exceptions-current)."""
    named = table_exceptions("current").get(endpoint_id(entry, "current"), {})
    return any(where.startswith("request: ") and where.removeprefix("request: ") in error for where in named)


# The flows whose every TestOps request is recorded and checked when no recording is given: select's binding,
# upload (both generations, chunks, bundles, reconcile), the phases against the server of each generation.
FLOW_MODULES = ("tests/test_select_testops.py", "tests/test_upload_testops.py", "tests/test_testops_phases.py")


@pytest.mark.slow
def test_the_recorded_requests_of_a_run_conform(tmp_path: Path, testops_generation: str) -> None:
    """Every request the suite's TestOps flows send, recorded by the test servers: all conform, or the exceptions
    are the table's. A directory of recordings from a wider run can be given with
    TESTOPS_EVIDENCE_RECORD_REQUESTS; without one, the flow modules' tests of this generation run here, recorded,
    in a child pytest."""
    folder = os.environ.get("TESTOPS_EVIDENCE_RECORD_REQUESTS")
    if not folder or not Path(folder).is_dir():
        folder = str(tmp_path / "recorded")
        Path(folder).mkdir()
        root = Path(__file__).resolve().parent.parent
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                               "-k", f"[{testops_generation}]", *FLOW_MODULES], cwd=root, capture_output=True,
                              text=True, check=False, env={**os.environ, "TESTOPS_EVIDENCE_RECORD_REQUESTS": folder})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    by_generation = load_recorded(Path(folder))
    assert testops_generation in by_generation, sorted(by_generation)
    assert by_generation, f"no recorded requests in {folder}"
    for generation, recorded in by_generation.items():
        report = check(recorded, generation)
        assert report["checked"] > 0, generation
        assert report["non-conforming"] == [], (generation, len(report["non-conforming"]),
                                                report["non-conforming"][:10])
