"""The campaign contract: loaded from YAML or JSON, validated by its JSON Schema, then by the rules a
schema cannot say (unique keys, ids and selectors; lanes that exist). Every error names the JSON pointer
of the bad field and what was expected."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, has_lone_surrogate, loads_json, read_safe_path, sha256_bytes
from testops_evidence.schemacheck import ecma_pattern

CONTRACT_LIMIT = 4 * 1024 * 1024


@cache
def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("testops_evidence").joinpath("schemas", f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def pointer(path: Any) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else "/"


@cache
def _fast_check(name: str) -> Callable[[Any], bool] | None:
    from testops_evidence.schemacheck import compile_schema

    return compile_schema(load_schema(name))


@cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator, ValidationError, validators

    from testops_evidence.schemacheck import ecma_pattern

    def pattern(validator: Any, value: str, instance: Any, _schema: Any) -> Any:
        # The compiled check's meaning of a pattern (ECMA-262: `$` ends the input), so both agree.
        if validator.is_type(instance, "string") and not ecma_pattern(value).search(instance):
            yield ValidationError(f"{instance!r} does not match {value!r}")

    strict = validators.extend(Draft202012Validator, {"pattern": pattern})
    return strict(load_schema(name))


def schema_errors(schema_name: str, document: Any) -> Iterator[tuple[str, str, str]]:
    """Yield ``(pointer, message, expected)`` for each schema violation, most specific first.

    A valid document is recognised by the compiled check of :mod:`schemacheck` (exact for the keywords
    our schemas use, and ~50x faster than jsonschema on them); jsonschema runs only to explain an
    invalid one."""
    fast = _fast_check(schema_name)
    if fast is not None and fast(document):
        return
    from jsonschema.exceptions import best_match

    validator = _validator(schema_name)
    errors = sorted(validator.iter_errors(document), key=lambda e: (list(e.absolute_path), e.validator))
    for error in errors:
        chosen = best_match([error]) if error.context else error
        expected = _expected(chosen)
        yield pointer(_offending_path(chosen)), chosen.message, expected


def _offending_path(error: Any) -> list[Any]:
    """The path of the field at fault. jsonschema reports a missing, extra or badly named property at its
    parent object; the operator wants the property itself (``/trust/events``, not ``/trust``)."""
    path = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        missing = [name for name in error.validator_value if name not in instance]
        return path + missing[:1]
    if error.validator == "additionalProperties" and error.validator_value is False and isinstance(instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = sorted(k for k in instance if k not in known
                       and not any(ecma_pattern(p).search(k) for p in patterns))
        return path + extra[:1]
    if "propertyNames" in error.absolute_schema_path and isinstance(instance, str):
        return [*path, instance]
    return path


def _expected(error: Any) -> str:
    kind = error.validator
    value = error.validator_value
    if kind == "enum":
        return "one of " + ", ".join(json.dumps(v) for v in value)
    if kind == "const":
        return json.dumps(value)
    if kind == "type":
        return f"type {value}"
    if kind == "pattern":
        return f"a string matching {value}"
    if kind == "required":
        return "required properties " + ", ".join(value)
    if kind == "additionalProperties":
        documented = sorted(error.schema.get("properties", {}))
        return "only the properties " + ", ".join(documented) if documented else "no properties"
    if kind in ("minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "minProperties"):
        return f"{kind} {value}"
    return f"{kind}: {json.dumps(value, default=str)[:200]}"


def validate_document(schema_name: str, document: Any, code: str, what: str) -> None:
    """Refuse with ``code`` at the first schema violation, naming its pointer."""
    for where, message, expected in schema_errors(schema_name, document):
        raise Refusal(code, f"{what} is invalid at {where}: {message}", field=where, expected=expected,
                      actual=_actual_at(document, where))


def _actual_at(document: Any, where: str) -> Any:
    node = document
    for part in [p.replace("~1", "/").replace("~0", "~") for p in where.strip("/").split("/") if p]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            return None
    if isinstance(node, dict | list):
        text = json.dumps(node, default=str)
        return text if len(text) <= 200 else text[:197] + "..."
    return node


@dataclass(frozen=True)
class Trust:
    repository: str
    events: tuple[str, ...]
    branches: tuple[str, ...]
    workflows: tuple[str, ...]
    public_only: bool = False
    run_attempts: str = "first-only"
    actors: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TestOpsConfig:
    endpoint: str
    project_id: int
    plan_name: str
    plan_id: int | None = None
    api_prefix: str = "/api"
    auth: str = "api-token"
    standing_plan: str = "all"
    bootstrap_case: str | None = None
    job_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    key: str
    full_name: str
    title: str
    lane: str
    checks: Mapping[str, str]
    testops_id: int | None = None
    timeout_minutes: int = 30
    credentials: tuple[str, ...] = ()

    def row(self) -> dict[str, Any]:
        """The canonical case row bound into selections and evidence."""
        return {
            "key": self.key,
            "testops-id": self.testops_id,
            "full-name": self.full_name,
            "title": self.title,
            "lane": self.lane,
            "timeout-minutes": self.timeout_minutes,
            "credentials": list(self.credentials),
            "checks": dict(sorted(self.checks.items())),
        }


@dataclass(frozen=True)
class RemotePolicy:
    repository: str
    workflows: tuple[str, ...]
    refs: tuple[str, ...]
    artifact_prefix: str
    run_attempts: str = "first-only"
    max_archive_bytes: int = 104857600
    host: Mapping[str, Any] = field(default_factory=dict)
    images: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Contract:
    campaign: str
    trust: Trust
    profile: Mapping[str, str]
    lanes: Mapping[str, int]  # lane -> max-parallel
    cases: tuple[Case, ...]
    testops: TestOpsConfig | None
    remote: RemotePolicy | None
    source_path: str
    digest: str  # SHA-256 of the canonical JSON of the validated document
    document: Mapping[str, Any] = field(repr=False, default_factory=dict)
    _by_key: Mapping[str, Case] = field(repr=False, default_factory=dict)
    # SHA-256 of the file's exact bytes (None when the contract did not come from a file): select records
    # it in the selection, so a worker binds its contract file by hashing it instead of parsing it.
    file_sha256: str | None = None

    def case(self, key: str) -> Case:
        try:
            return self._by_key[key]
        except KeyError:
            raise Refusal("contract.unknown_case", f"case {key!r} is not in the contract", field="case",
                          expected="a contract case key", actual=key) from None

    def has_case(self, key: str) -> bool:
        return key in self._by_key

    def cases_in(self, lane: str) -> list[Case]:
        return [c for c in self.cases if c.lane == lane]


def parse_contract_bytes(data: bytes, name: str) -> Any:
    text = _decode(data, name)
    if name.endswith(".json"):
        # Strict JSON: a duplicate key (a reader would keep one of them silently), NaN, Infinity and
        # integers outside 64 bits are refused like syntax errors, with the line and column.
        try:
            return loads_json(text)
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno}, column {exc.colno}"
            raise Refusal("contract.invalid", f"{name} is not valid JSON: {exc.msg} at {where}",
                          field=getattr(exc, "pointer", "/"), expected="JSON", actual=where) from None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)
    try:
        document = _plain(yaml.load(text), [_PLAIN_NODE_BUDGET])
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "unknown position"
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise Refusal("contract.invalid", f"{name} is not valid YAML: {problem} at {where}", field="/",
                      expected="YAML", actual=where) from None
    except RecursionError:
        raise Refusal("contract.invalid", f"{name} is nested too deeply", field="/") from None
    except _TooManyNodes:
        raise Refusal("contract.invalid", f"{name} expands to more than {_PLAIN_NODE_BUDGET} values (YAML aliases?)",
                      field="/", expected=f"at most {_PLAIN_NODE_BUDGET} values", actual="more") from None
    if has_lone_surrogate(document):
        # A "\ud800" escape: text UTF-8 cannot encode would fail every summary and receipt made from it.
        raise Refusal("contract.invalid", f"{name} holds a lone UTF-16 surrogate escape, which is not a character",
                      field="/", expected="Unicode text", actual="a \\uD800-\\uDFFF escape")
    return document


# YAML aliases share nodes, so a few hundred bytes can stand for billions of values once copied
# ("billion laughs"). Copying is bounded; a real contract has a few thousand values.
_PLAIN_NODE_BUDGET = 1_000_000


class _TooManyNodes(Exception):
    pass


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("contract.invalid", f"{name} is not UTF-8", field="/", expected="UTF-8 text") from None


def _plain(value: Any, budget: list[int]) -> Any:
    """YAML scalars such as dates become strings, so the schema sees only JSON types."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooManyNodes
    if isinstance(value, dict):
        return {str(k): _plain(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, budget) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def load_contract(path: str | Path) -> Contract:
    p = Path(path)
    if not p.exists():
        raise Refusal("contract.missing", f"contract file {p} does not exist", field="contract",
                      expected="an existing YAML or JSON file", actual=str(p))
    try:
        data = read_safe_path(p, limit=CONTRACT_LIMIT)
    except Refusal as exc:
        raise Refusal("contract.invalid", f"contract file {p} cannot be read safely: {exc.message}",
                      field="contract", expected=exc.expected, actual=exc.actual) from None
    return contract_from_document(parse_contract_bytes(data, p.name), str(p), file_sha256=sha256_bytes(data))


def contract_from_document(document: Any, source: str = "<contract>", *, file_sha256: str | None = None) -> Contract:
    validate_document("contract", document, "contract.invalid", "the contract")
    _semantic_checks(document)
    trust_doc = document["trust"]
    trust = Trust(
        repository=trust_doc["repository"],
        events=tuple(trust_doc["events"]),
        branches=tuple(trust_doc["branches"]),
        workflows=tuple(trust_doc["workflows"]),
        public_only=bool(trust_doc.get("public-only", False)),
        run_attempts=trust_doc.get("run-attempts", "first-only"),
        actors=tuple(trust_doc["actors"]) if "actors" in trust_doc else None,
    )
    testops = None
    if "testops" in document:
        t = document["testops"]
        testops = TestOpsConfig(
            endpoint=t["endpoint"].rstrip("/"),
            project_id=t["project-id"],
            plan_name=t["plan"]["name"],
            plan_id=t["plan"].get("id"),
            api_prefix=t.get("api-prefix", "/api"),
            auth=t.get("auth", "api-token"),
            standing_plan=t.get("standing-plan", "all"),
            bootstrap_case=t.get("bootstrap-case"),
            job_urls=tuple(t.get("job-urls", ())),
        )
    cases = tuple(
        Case(
            key=c["key"],
            full_name=c["full-name"],
            title=c["title"],
            lane=c["lane"],
            checks=dict(c["checks"]),
            testops_id=c.get("testops-id"),
            timeout_minutes=c.get("timeout-minutes", 30),
            credentials=tuple(c.get("credentials", ())),
        )
        for c in document["cases"]
    )
    remote = None
    if "remote" in document:
        r = document["remote"]
        remote = RemotePolicy(
            repository=r.get("repository", trust.repository),
            workflows=tuple(r["workflows"]),
            refs=tuple(r["refs"]),
            artifact_prefix=r["artifact-prefix"],
            run_attempts=r.get("run-attempts", "first-only"),
            max_archive_bytes=r.get("max-archive-bytes", 104857600),
            host=dict(r.get("host", {})),
            images={k: tuple(v) for k, v in r.get("images", {}).items()},
        )
    lanes = {name: lane.get("max-parallel", 1) for name, lane in document["lanes"].items()}
    return Contract(
        campaign=document["campaign"],
        trust=trust,
        profile=dict(document["profile"]),
        lanes=lanes,
        cases=cases,
        testops=testops,
        remote=remote,
        source_path=source,
        digest=sha256_bytes(canonical_json(document)),
        document=document,
        _by_key={c.key: c for c in cases},
        file_sha256=file_sha256,
    )


def _semantic_checks(document: dict[str, Any]) -> None:
    seen: dict[str, dict[Any, int]] = {"key": {}, "testops-id": {}, "full-name": {}}
    lanes = document["lanes"]
    for index, case in enumerate(document["cases"]):
        for name, values in seen.items():
            value = case.get(name)
            if value is None:
                continue
            if value in values:
                raise Refusal("contract.invalid", f"cases {values[value]} and {index} share the {name} {value!r}",
                              field=f"/cases/{index}/{name}", expected=f"a {name} unique among cases",
                              actual=value)
            values[value] = index
        if case["lane"] not in lanes:
            raise Refusal("contract.invalid", f"case {case['key']!r} uses lane {case['lane']!r}, which /lanes "
                          "does not declare", field=f"/cases/{index}/lane",
                          expected="one of " + ", ".join(sorted(lanes)), actual=case["lane"])
        if "testops" in document and "testops-id" not in case:
            raise Refusal("contract.invalid", f"case {case['key']!r} has no testops-id, which the testops "
                          "section requires", field=f"/cases/{index}/testops-id",
                          expected="a TestOps test case id", actual=None)
    testops = document.get("testops")
    if testops is not None:
        boot = testops.get("bootstrap-case")
        if testops.get("standing-plan") == "bootstrap" and boot is None:
            raise Refusal("contract.invalid", "standing-plan bootstrap needs a bootstrap-case",
                          field="/testops/bootstrap-case", expected="a contract case key", actual=None)
        if boot is not None and boot not in seen["key"]:
            raise Refusal("contract.invalid", f"bootstrap-case {boot!r} is not a contract case",
                          field="/testops/bootstrap-case", expected="a contract case key", actual=boot)
