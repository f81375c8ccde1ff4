"""The TestOps conformance table (``tests/data/testops-conformance.json``) as code: find the endpoint a
request is for, check the request against the generation's facts, and cut an answer down to the fields
the generation documents.

A request the table refuses gets the answer the real server gives to a bad request: HTTP 400 (415 for a
wrong content type) with the error body ``{message, status, timestamp}``; a route the generation does not
have answers 404. The table names the source of every fact; this module adds none of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).resolve().parent.parent / "data" / "testops-conformance.json"
GENERATIONS = ("25.4", "current")
DESCRIPTION = "report-service.json 25.4.1"  # tests/data/testops-openapi/report-service-25.4.1.json
DEFAULT_GENERATION = "current"


class Refused(Exception):
    """The request breaks the table: ``status`` (400, 404 or 415) and the reason, as the server says it."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Endpoint:
    id: str
    method: str
    route: str
    pattern: re.Pattern[str]
    absent: bool
    query: Mapping[str, Any]
    body: Mapping[str, Any] | None
    answer: Mapping[str, Any]
    cite: str = ""  # where report-service.json (25.4.1) describes the operation; empty for other generations


@cache
def table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return data


def _pattern(route: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[a-zA-Z]+\\\}", r"(\\d+)", re.escape(route)))


@cache
def endpoints(generation: str) -> tuple[Endpoint, ...]:
    if generation not in GENERATIONS:
        raise ValueError(f"generation must be one of {GENERATIONS}")
    found = []
    for entry in table()["endpoints"]:
        override = entry["generations"].get(generation, {})
        request = {**entry["request"], **override.get("request", {})}
        found.append(Endpoint(entry["id"], entry["method"], entry["route"], _pattern(entry["route"]),
                              bool(override.get("absent")), request.get("query", {}), request.get("body"),
                              override.get("answer", entry["answer"]),
                              f"{DESCRIPTION}: paths['/api{entry['route']}'].{entry['method'].lower()}"
                              if generation == "25.4" else ""))
    return tuple(found)


def endpoint(generation: str, method: str, route: str) -> Endpoint | None:
    """The table's endpoint for this request; ``None`` for a method and route the table does not list."""
    for candidate in endpoints(generation):
        if candidate.method == method and candidate.pattern.fullmatch(route):
            return candidate
    return None


def by_id(generation: str, endpoint_id: str) -> Endpoint:
    return next(e for e in endpoints(generation) if e.id == endpoint_id)


# --- requests -----------------------------------------------------------------------------------------------


def check_request(ep: Endpoint, query: Mapping[str, Sequence[str]], ctype: str, body: Any,
                  parts: Sequence[str] | None) -> None:
    """Refuse what the generation's table does not allow (``parts``: the multipart part names sent)."""
    if ep.absent:
        raise Refused(404, f"No handler found for {ep.method} {ep.route}")
    for name, values in query.items():
        spec = ep.query.get(name)
        if spec is None:
            raise Refused(400, f"unknown query parameter {name!r} for {ep.method} {ep.route}{_cited(ep.cite)}")
        if spec.get("undefined"):
            continue  # not in the description: ignored, as Spring ignores an undefined query parameter
        if len(values) > 1 and not spec.get("repeat"):
            raise Refused(400, f"query parameter {name!r} given {len(values)} times")
        for value in values:
            _check_query_value(name, spec, value)
    for name, spec in ep.query.items():
        if spec.get("required") and name not in query:
            raise Refused(400, f"Required request parameter '{name}' is not present")
    spec = ep.body
    if spec is None:
        if body is not None or parts:
            raise Refused(400, f"{ep.method} {ep.route} takes no request body")
        return
    content_type = spec["content-type"]
    if not ctype.split(";")[0].strip().lower() == content_type:
        raise Refused(415, f"Content type '{ctype or '(none)'}' not supported; {content_type} expected")
    if content_type == "multipart/form-data":
        sent = list(parts or [])
        allowed = spec.get("parts", {})
        for name in sent:
            if name not in allowed:
                raise Refused(400, f"unknown multipart part {name!r}")
        for name, part in allowed.items():
            if part.get("required") and name not in sent:
                raise Refused(400, f"Required request part '{name}' is not present")
            if not part.get("repeat") and sent.count(name) > 1:
                raise Refused(400, f"multipart part {name!r} given {sent.count(name)} times")
        return
    if body is None:
        raise Refused(400, "Required request body is missing")
    try:
        check_value(spec["shape"], body, "body", nulls=False)
    except Refused as refused:
        raise Refused(refused.status, refused.reason + _cited(ep.cite)) from None


def _cited(cite: str) -> str:
    return f" [{cite}]" if cite else ""


def _check_query_value(name: str, spec: Mapping[str, Any], value: str) -> None:
    kind = spec["type"]
    if kind == "integer":
        if not re.fullmatch(r"-?\d{1,18}", value):
            raise Refused(400, f"query parameter {name!r}: {value!r} is not an integer")
        if "min" in spec and int(value) < spec["min"]:
            raise Refused(400, f"query parameter {name!r} must be >= {spec['min']}")
    elif kind == "boolean" and value not in ("true", "false"):
        raise Refused(400, f"query parameter {name!r}: {value!r} is not true or false")


def _shape(shape: Any) -> Mapping[str, Any]:
    return {"type": shape} if isinstance(shape, str) else shape


def check_value(shape: Any, value: Any, where: str, *, nulls: bool = True) -> None:
    """Check a JSON value against a table shape. In an answer a null counts as absent (Jackson writes an unset
    field as null); a request's null is refused (``nulls=False``): report-service.json types every field
    (string, integer, ...) and none as null, so the action never sends one (``conventions.nulls``)."""
    spec = _shape(shape)
    kind = spec["type"]
    if value is None and not nulls and kind != "any":
        raise Refused(400, f"{where}: null is not a {kind}")
    if value is None or kind == "any":
        return
    if kind == "object":
        if not isinstance(value, dict):
            raise Refused(400, f"{where}: a JSON object is expected")
        fields = spec.get("fields", {})
        for name in spec.get("required", ()):
            if value.get(name) is None:
                raise Refused(400, f"{where}.{name}: must not be null")
        groups = spec.get("one-of-required")
        if groups and not any(all(value.get(n) is not None for n in group) for group in groups):
            raise Refused(400, f"{where}: one of {' or '.join('+'.join(g) for g in groups)} is required")
        for name, item in value.items():
            if name not in fields:
                if spec.get("open"):
                    continue
                raise Refused(400, f"{where}.{name}: unknown field" + _cited(spec.get("cite", "")))
            check_value(fields[name], item, f"{where}.{name}", nulls=nulls)
        return
    if kind == "page":
        if not isinstance(value, dict) or not isinstance(value.get("content"), list):
            raise Refused(400, f"{where}: a page (an object with a content array) is expected")
        check_value(table()["conventions"]["pages"]["shape"], {k: v for k, v in value.items() if k != "content"}, where)
        for index, item in enumerate(value["content"]):
            check_value(spec["items"], item, f"{where}.content[{index}]", nulls=nulls)
        return
    if kind == "array":
        if not isinstance(value, list):
            raise Refused(400, f"{where}: a JSON array is expected")
        if "max" in spec and len(value) > spec["max"]:
            raise Refused(400, f"{where}: at most {spec['max']} items")
        for index, item in enumerate(value):
            check_value(spec["items"], item, f"{where}[{index}]", nulls=nulls)
        return
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise Refused(400, f"{where}: an integer is expected, not {type(value).__name__}")
        return
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Refused(400, f"{where}: a number is expected")
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            raise Refused(400, f"{where}: true or false is expected")
        return
    if kind == "string":
        if not isinstance(value, str):
            raise Refused(400, f"{where}: a string is expected, not {type(value).__name__}")
        if len(value) < spec.get("min", 0):
            raise Refused(400, f"{where}: size must be at least {spec['min']}")
        if "max" in spec and len(value) > spec["max"]:
            raise Refused(400, f"{where}: size must be at most {spec['max']}")
        enum = spec.get("enum")
        if enum is not None:
            allowed = [e.lower() for e in enum] if spec.get("case") == "insensitive" else enum
            probe = value.lower() if spec.get("case") == "insensitive" else value
            if probe not in allowed:
                raise Refused(400, f"{where}: {value!r} is not one of {', '.join(enum)}" + _cited(spec.get("cite", "")))
        return
    raise ValueError(f"unknown shape type {kind!r} at {where}")


# --- answers ------------------------------------------------------------------------------------------------


def project(shape: Any, value: Any) -> Any:
    """The answer as the generation documents it: undocumented fields of closed objects are left out."""
    spec = _shape(shape)
    kind = spec["type"]
    if value is None or kind == "any":
        return value
    if kind == "object" and isinstance(value, dict):
        if spec.get("open"):
            return value
        fields = spec.get("fields", {})
        return {name: project(fields[name], item) for name, item in value.items() if name in fields}
    if kind == "array" and isinstance(value, list):
        return [project(spec["items"], item) for item in value]
    if kind == "page" and isinstance(value, dict):
        return {**value, "content": [project(spec["items"], item) for item in value.get("content", [])]}
    return value


def answer_shape(ep: Endpoint) -> Any:
    return ep.answer.get("shape")


def error_body(status: int, message: str, now_ms: int) -> dict[str, Any]:
    """The error body TestOps answers with (``conventions.error-body``)."""
    return {"message": message, "status": status, "timestamp": now_ms}
