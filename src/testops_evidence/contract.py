"""The campaign contract: loaded from YAML or JSON, validated by its JSON Schema, then by the rules a
schema cannot say (unique keys, ids and selectors; lanes that exist). Every error names the JSON pointer
of the bad field and what was expected."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.readers import strictjson
from testops_evidence.readers.schemacheck import ecma_pattern, unique_items
from testops_evidence.safeio import canonical_json, read_safe_path, sha256_bytes

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
    from testops_evidence.readers.schemacheck import compile_schema

    return compile_schema(load_schema(name))


@cache
def _strict_validator_class() -> Any:
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, value: str, instance: Any, _schema: Any) -> Any:
        # ECMA-262's `$` ends the text; Python's also matched before a final line break.
        if validator.is_type(instance, "string") and not ecma_pattern(value).search(instance):
            yield ValidationError(f"{instance!r} does not match {value!r}")

    def integer(_checker: Any, instance: Any) -> bool:
        # A JSON integer: 12.0 is a number (jsonschema counts it as an integer; it became "12.0" in URLs).
        return isinstance(instance, int) and not isinstance(instance, bool)

    def unique(validator: Any, value: Any, instance: Any, _schema: Any) -> Any:
        # Linear, by hashing canonical forms: jsonschema's own compares every pair of items that do not sort
        # (mixed types, objects), so explaining a hostile contract's 16,000-item array took minutes.
        if value is True and validator.is_type(instance, "array") and not unique_items(instance):
            yield ValidationError(f"{_preview(instance)} has non-unique elements")

    def max_items(validator: Any, value: int, instance: Any, _schema: Any) -> Any:
        # jsonschema's message quotes the whole array: 100 KB for an oversized list of actors.
        if validator.is_type(instance, "array") and len(instance) > value:
            yield ValidationError(f"{_preview(instance)} is too long: {len(instance)} items, at most {value}")

    return validators.extend(Draft202012Validator, {"pattern": pattern, "uniqueItems": unique,
                                                    "maxItems": max_items},
                             type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", integer))


def _preview(instance: list[Any]) -> str:
    text = repr(instance[:8])
    return text if len(instance) <= 8 else text[:-1] + f", ... ({len(instance)} items)]"


def strict_validator(schema: Any) -> Any:
    """jsonschema's Draft 2020-12 validator with the rules of :mod:`schemacheck`: integers are JSON
    integers, a pattern's ``$`` ends the text, and ``uniqueItems`` is checked in linear time (with the
    exact JSON Schema equality, which jsonschema's neighbour comparison misses on ``[[1], [true], [1]]``)."""
    return _strict_validator_class()(schema)


_ERRORS_READ = 1000


@cache
def _validator(name: str) -> Any:
    return strict_validator(load_schema(name))


def schema_errors(schema_name: str, document: Any) -> Iterator[tuple[str, str, str]]:
    """Yield ``(pointer, message, expected)`` for each schema violation, most specific first.

    A valid document is recognised by the compiled check of :mod:`schemacheck` (exact for the keywords
    our schemas use); jsonschema runs only to explain an invalid one."""
    try:
        fast = _fast_check(schema_name)
        if fast is not None and fast(document):
            return
        # At most _ERRORS_READ errors are gathered: a list of millions of invalid items would otherwise
        # make millions of error objects (gigabytes, minutes) before the first one is reported.
        errors = sorted(itertools.islice(_validator(schema_name).iter_errors(document), _ERRORS_READ),
                        key=lambda e: (list(e.absolute_path), e.validator))
    except RecursionError:  # both checkers recurse with the document; its parser bounds depth loosely
        yield pointer([]), "is nested too deeply to be checked", "fewer levels of nesting"
        return
    from jsonschema.exceptions import best_match  # only once a document is invalid: phases start without it

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
        # jsonschema makes one error per missing property, each naming it in its message only: each row
        # points at its own property, not every row at the first one missing.
        missing = [name for name in error.validator_value if name not in instance]
        named = [name for name in missing if error.message == f"{name!r} is a required property"]
        return path + (named or missing)[:1]
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
class Trials:
    """How many times a case is measured, and the verdict policy that turns its trials into one verdict.

    Every policy is "at least ``required`` of ``count`` trials passed": ``all`` (pass^k) needs every trial,
    ``any`` (pass@k) one, ``at-least: n`` n. ``jobs`` chooses whether every trial gets its own worker job.
    """

    count: int = 1
    verdict: str = "all"  # all | any | at-least
    at_least: int | None = None
    jobs: str = "per-trial"  # per-trial | per-case

    @property
    def required(self) -> int:
        """Passed trials the policy needs."""
        if self.verdict == "any":
            return 1
        if self.verdict == "at-least":
            assert self.at_least is not None
            return self.at_least
        return self.count

    @property
    def repeated(self) -> bool:
        return self.count > 1

    def policy(self) -> str:
        """The policy as the contract spells it: ``all``, ``any`` or ``at-least 3``."""
        return f"at-least {self.at_least}" if self.verdict == "at-least" else self.verdict

    def verdict_json(self) -> str | dict[str, int]:
        return {"at-least": self.required} if self.verdict == "at-least" else self.verdict

    def row(self) -> dict[str, Any]:
        return {"count": self.count, "verdict": self.verdict_json(), "jobs": self.jobs}


ONE_TRIAL = Trials()


def trials_from(document: Mapping[str, Any] | None) -> Trials:
    if document is None:
        return ONE_TRIAL
    verdict = document.get("verdict", "all")
    at_least = verdict.get("at-least") if isinstance(verdict, dict) else None
    return Trials(count=int(document["count"]), verdict="at-least" if at_least is not None else str(verdict),
                  at_least=at_least, jobs=document.get("jobs", "per-trial"))


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
    trials: Trials = ONE_TRIAL
    remote: bool = False  # measured by another workflow: its cells come from the ledger, it has no worker job
    cluster: str | None = None  # cases sharing a fixture: one group for the campaign's standard errors
    deterministic: bool = False  # a verdict change from the baseline is a regression even with one trial

    @property
    def cluster_name(self) -> str:
        """The group the campaign's standard errors cluster this case in: its cluster, else itself."""
        return f"cluster:{self.cluster}" if self.cluster is not None else f"case:{self.key}"

    def row(self) -> dict[str, Any]:
        """The canonical case row bound into selections and evidence (``trials`` only when repeated: one
        trial is the single measurement every policy agrees on)."""
        row = {
            "key": self.key,
            "testops-id": self.testops_id,
            "full-name": self.full_name,
            "title": self.title,
            "lane": self.lane,
            "timeout-minutes": self.timeout_minutes,
            "credentials": list(self.credentials),
            "checks": dict(sorted(self.checks.items())),
        }
        if self.trials.repeated:
            row["trials"] = self.trials.row()
        if self.remote:
            row["measured-by"] = "remote"
        return row


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
class StatisticsPolicy:
    """How the comparison with the baseline judges change (campaign/stats.py): the per-case flags' error rate
    ``q`` and correction, and the campaign-level change the contract wants to be able to detect."""

    q: float = 0.05
    correction: str = "benjamini-hochberg"  # benjamini-hochberg | holm
    detect: float | None = None


@dataclass(frozen=True)
class Budget:
    """Caps on usage counters: for the campaign (shared out between the worker jobs) and for each trial."""

    campaign: Mapping[str, int] = field(default_factory=dict)
    trial: Mapping[str, int] = field(default_factory=dict)

    @property
    def counters(self) -> tuple[str, ...]:
        return tuple(sorted({*self.campaign, *self.trial}))


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
    budget: Budget | None = None
    statistics: StatisticsPolicy = field(default_factory=StatisticsPolicy)

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
    """The contract document from the file's bytes: the one place a contract is parsed (strict JSON for
    ``*.json``, the strict YAML reader otherwise). Every problem the parser finds is reported at once
    (up to :data:`MAX_PROBLEMS`), each with its line, column and JSON pointer."""
    text = _decode(data, name)
    kind = "JSON" if name.endswith(".json") else "YAML"
    found: list[Any]
    if kind == "JSON":
        try:
            return strictjson.loads(text)
        except strictjson.JSONProblem:
            found = strictjson.problems(text)
    else:
        # Imported here: a phase that builds the contract from select's compiled form never loads the YAML
        # reader (campaign/compiled.py).
        from testops_evidence.readers import yamlread

        # One reading gives the value or every problem: a hostile file is not read twice.
        value, found = yamlread.read(text, limit=MAX_PROBLEMS)
        if not found:
            return value
    raise contract_refusal(name, [Problem(p.pointer, p.message, line=p.line, column=p.column) for p in found],
                           syntax=kind)


@dataclass(frozen=True)
class Problem:
    """One problem of a contract: where (JSON pointer, and line and column when the text is known)."""

    pointer: str
    message: str
    expected: Any = None
    actual: Any = None
    line: int | None = None
    column: int | None = None

    def where(self) -> str:
        return f"line {self.line}, column {self.column}" if self.line is not None else ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer, "message": self.message}
        if self.line is not None:
            out["line"], out["column"] = self.line, self.column
        if self.expected is not None:
            out["expected"] = self.expected
        if self.actual is not None:
            out["actual"] = self.actual
        return out


MAX_PROBLEMS = 20


def contract_refusal(name: str, problems: list[Problem], *, syntax: str | None = None) -> Refusal:
    """``contract.invalid`` naming every problem (up to :data:`MAX_PROBLEMS`): the first in the message and
    the field, all of them in ``problems`` (the step summary lists them; failure.json holds them)."""
    shown = problems[:MAX_PROBLEMS]
    first = shown[0]
    where = f" at {first.where()}" if first.line is not None else ""
    what = f"not valid {syntax}" if syntax else "invalid"
    head = f"{name} is {what}" + (f" at {first.pointer}" if syntax is None else "") + f": {first.message}{where}"
    if len(problems) > 1:
        more = len(problems) - 1
        head += f"; and {more} more problem{'s' if more > 1 else ''}" + (
            f" (the first {MAX_PROBLEMS} are listed)" if len(problems) > MAX_PROBLEMS else "")
    actual = first.actual if first.actual is not None or first.line is None else first.where()
    return Refusal("contract.invalid", head, field=first.pointer, expected=first.expected or syntax, actual=actual,
                   problems=[p.to_json() for p in shown] if len(shown) > 1 else None)


def _located(found: list[Problem], text: str | None, name: str) -> list[Problem]:
    """The problems with the line and column of their pointer in the file's text, where it can be found."""
    if text is None:
        return found
    if name.endswith(".json"):
        places = strictjson.positions(text)
    else:
        from testops_evidence.readers import yamlread

        places = yamlread.positions(text)
    located = []
    for problem in found:
        pointer = problem.pointer if problem.pointer != "/" else ""
        # A missing property has no place of its own: its object's is the nearest one.
        while pointer and pointer not in places:
            pointer = pointer.rsplit("/", 1)[0]
        line, column = places.get(pointer, (None, None))
        located.append(Problem(problem.pointer, problem.message, expected=problem.expected, actual=problem.actual,
                               line=line, column=column))
    return located


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start].decode("utf-8", "replace")
        line = head.count("\n") + 1
        column = len(head) - (head.rfind("\n") + 1) + 1
        raise Refusal("contract.invalid", f"{name} is not UTF-8 (byte 0x{data[exc.start]:02x} at line {line}, "
                      f"column {column})", field="/", expected="UTF-8 text",
                      actual=f"line {line}, column {column}") from None


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
    # Messages name the file by the path as given (`.github/testops-evidence.yml`), never its base name alone.
    return contract_from_document(parse_contract_bytes(data, str(p)), str(p), file_sha256=sha256_bytes(data),
                                  text=data.decode("utf-8"), name=str(p))


def contract_from_document(document: Any, source: str = "<contract>", *, file_sha256: str | None = None,
                           text: str | None = None, name: str = "the contract") -> Contract:
    """A validated :class:`Contract`; ``contract.invalid`` listing every schema violation (or, on a valid
    schema, every broken rule), each with its line and column when ``text`` (the file) is given."""
    found = [Problem(where, message, expected=expected, actual=_actual_at(document, where))
             for where, message, expected in schema_errors("contract", document)]
    if not found:
        found = _semantic_problems(document)
    if found:
        raise contract_refusal(name, _located(found, text, name))
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
    default_trials = trials_from(document.get("trials"))
    stats_doc = document.get("statistics", {})
    deterministic = bool(stats_doc.get("deterministic", False))
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
            trials=trials_from(c["trials"]) if "trials" in c else default_trials,
            remote=c.get("measured-by", "worker") == "remote",
            cluster=c.get("cluster"),
            deterministic=bool(c.get("deterministic", deterministic)),
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
        budget=None if "budget" not in document else Budget(dict(document["budget"].get("campaign", {})),
                                                             dict(document["budget"].get("trial", {}))),
        statistics=StatisticsPolicy(q=float(stats_doc.get("q", 0.05)),
                                    correction=stats_doc.get("correction", "benjamini-hochberg"),
                                    detect=float(stats_doc["detect"]) if "detect" in stats_doc else None),
    )


def _trials_problems(block: Mapping[str, Any] | None, where: str) -> list[Problem]:
    verdict = block.get("verdict") if block is not None else None
    if block is not None and isinstance(verdict, dict) and verdict["at-least"] > block["count"]:
        return [Problem(f"{where}/verdict/at-least", f"{where} asks for at least {verdict['at-least']} passed "
                        f"trials of {block['count']}", expected=f"at most count ({block['count']})",
                        actual=verdict["at-least"])]
    return []


def worker_job_names(key: str, lane: str, trials: Mapping[str, Any] | None) -> list[str]:
    """Every worker job name a case can get in a matrix plan (campaign/matrix.py names them)."""
    if trials is not None and trials["count"] > 1 and trials.get("jobs", "per-trial") == "per-trial":
        return [f"{lane}-{key}-t{n}" for n in range(1, trials["count"] + 1)]
    return [f"{lane}-{key}"]


def _semantic_problems(document: dict[str, Any]) -> list[Problem]:
    """The rules a schema cannot say (run on a schema-valid document), every violation listed."""
    found: list[Problem] = []
    seen: dict[str, dict[Any, int]] = {"key": {}, "testops-id": {}, "full-name": {}}
    lanes = document["lanes"]
    found += _trials_problems(document.get("trials"), "/trials")
    jobs: dict[str, str] = {}
    for index, case in enumerate(document["cases"]):
        found += _trials_problems(case.get("trials"), f"/cases/{index}/trials")
        # A worker job's name is its artifact's name: two cases must never be able to share one, or one
        # case's worker could upload the other's cells under a name the plan assigns to it.
        for name in worker_job_names(case["key"], case["lane"], case.get("trials", document.get("trials"))):
            other = jobs.setdefault(name, case["key"])
            if other != case["key"]:
                found.append(Problem(f"/cases/{index}/key", f"cases {other!r} and {case['key']!r} would both have "
                                     f"a worker job named {name!r} (a trial's job is <lane>-<key>-t<n>): rename "
                                     "one of them", expected="worker job names unique among cases",
                                     actual=case["key"]))
        for name, values in seen.items():
            value = case.get(name)
            if value is None:
                continue
            if value in values:
                found.append(Problem(f"/cases/{index}/{name}", f"cases {values[value]} and {index} share the {name} "
                                     f"{value!r}", expected=f"a {name} unique among cases", actual=value))
            else:
                values[value] = index
        if case["lane"] not in lanes:
            found.append(Problem(f"/cases/{index}/lane", f"case {case['key']!r} uses lane {case['lane']!r}, which "
                                 "/lanes does not declare", expected="one of " + ", ".join(sorted(lanes)),
                                 actual=case["lane"]))
        if "testops" in document and "testops-id" not in case:
            found.append(Problem(f"/cases/{index}/testops-id", f"case {case['key']!r} has no testops-id, which the "
                                 "testops section requires", expected="a TestOps test case id"))
    testops = document.get("testops")
    if testops is not None:
        from testops_evidence.endpoints import check_endpoint

        try:
            check_endpoint(testops["endpoint"], code="contract.invalid", field="/testops/endpoint")
        except Refusal as refusal:
            found.append(Problem("/testops/endpoint", refusal.message, expected=refusal.expected,
                                 actual=refusal.actual))
        boot = testops.get("bootstrap-case")
        if testops.get("standing-plan") == "bootstrap" and boot is None:
            found.append(Problem("/testops/bootstrap-case", "standing-plan bootstrap needs a bootstrap-case",
                                 expected="a contract case key"))
        if boot is not None and boot not in seen["key"]:
            found.append(Problem("/testops/bootstrap-case", f"bootstrap-case {boot!r} is not a contract case",
                                 expected="a contract case key", actual=boot))
    return found
