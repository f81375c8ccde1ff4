"""The contract: the examples load, and every way a contract can be wrong is refused with
`contract.invalid` (exit 2) naming the JSON pointer of the bad field."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testops_evidence.contract import (
    CONTRACT_LIMIT,
    Contract,
    contract_from_document,
    load_contract,
    parse_contract_bytes,
    pointer,
)
from testops_evidence.errors import EXIT_USAGE, Refusal

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "contract.yml"
# The design card's example (shared/contract-example.yml), copied because CI has no /work/shared.
DESIGN_EXAMPLE = Path(__file__).resolve().parent / "data" / "contract-example.yml"

Doc = dict[str, Any]


def example_document() -> Doc:
    document = parse_contract_bytes(EXAMPLE.read_bytes(), EXAMPLE.name)
    assert isinstance(document, dict)
    return document


BASE = example_document()


def invalid(mutate: Callable[[Doc], object]) -> Refusal:
    document = copy.deepcopy(BASE)
    mutate(document)
    with pytest.raises(Refusal) as caught:
        contract_from_document(document)
    assert caught.value.code == "contract.invalid", str(caught.value)
    assert caught.value.exit_code == EXIT_USAGE
    return caught.value


# --- the examples ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "native", "external"), [(EXAMPLE, 9, 3), (DESIGN_EXAMPLE, 1, 1)],
                         ids=["examples", "design-card"])
def test_the_example_contracts_load(path: Path, native: int, external: int) -> None:
    contract = load_contract(path)
    assert contract.campaign == "agent-protocol"
    assert {lane: len(contract.cases_in(lane)) for lane in contract.lanes} == {"native": native,
                                                                              "external": external}
    assert contract.trust.actors == (1234567, 7654321)
    assert contract.testops is not None and contract.testops.project_id == 12
    assert contract.testops.bootstrap_case == "get-task-context"
    assert contract.remote is not None and contract.remote.repository == "acme/agents"
    assert contract.remote.host["evaluation-admitted"] is False
    assert contract.case("get-task-context").checks["cleanup"] == "infrastructure"
    assert contract.profile == {"id": "sonnet-default", "model": "claude-sonnet-5", "provider": "anthropic",
                                "driver": "runner"}
    assert len(contract.digest) == 64


def test_the_design_example_shape_is_the_shape_of_examples_contract() -> None:
    # examples/contract.yml follows the design card's shape: the same keys at every level.
    def shape(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: shape(v) for k, v in node.items()}
        if isinstance(node, list):
            return shape(node[0]) if node and isinstance(node[0], dict) else "list"
        return type(node).__name__

    design = parse_contract_bytes(DESIGN_EXAMPLE.read_bytes(), DESIGN_EXAMPLE.name)
    assert shape(design) == shape(BASE)


def test_defaults_and_derived_fields() -> None:
    document = copy.deepcopy(BASE)
    del document["testops"], document["remote"]
    for case in document["cases"]:
        case.pop("testops-id")
        case.pop("timeout-minutes")
        case.pop("credentials")
    del document["trust"]["actors"], document["trust"]["run-attempts"], document["lanes"]["native"]["max-parallel"]
    contract = contract_from_document(document)
    assert contract.testops is None and contract.remote is None
    assert contract.trust.actors is None and contract.trust.run_attempts == "first-only"
    assert contract.lanes["native"] == 1
    case = contract.cases[0]
    assert (case.testops_id, case.timeout_minutes, case.credentials) == (None, 30, ())
    assert case.row() == {"key": "get-task-context", "testops-id": None,
                          "full-name": "agents/protocol/get-task-context", "title": "Get task context",
                          "lane": "native", "timeout-minutes": 30, "credentials": [],
                          "checks": {"answer-grounded": "behavior", "cleanup": "infrastructure",
                                     "tool-called": "behavior"}}


def test_unknown_case_lookup_is_refused() -> None:
    contract = contract_from_document(copy.deepcopy(BASE))
    assert contract.has_case("budget-stop") and not contract.has_case("nope")
    with pytest.raises(Refusal) as caught:
        contract.case("nope")
    assert (caught.value.code, caught.value.field, caught.value.actual) == ("contract.unknown_case", "case", "nope")


def test_the_digest_ignores_formatting_but_not_content(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(BASE, indent=4))
    assert load_contract(tmp_path / "c.json").digest == load_contract(EXAMPLE).digest
    changed = copy.deepcopy(BASE)
    changed["cases"][0]["title"] = "Another title"
    assert contract_from_document(changed).digest != load_contract(EXAMPLE).digest


# --- schema errors name the pointer of the bad field ----------------------------------------------------------


def test_missing_required_property_names_the_property() -> None:
    err = invalid(lambda d: d["trust"].pop("events"))
    assert (err.field, err.actual) == ("/trust/events", None)
    assert "required" in err.expected
    assert invalid(lambda d: d.pop("cases")).field == "/cases"
    assert invalid(lambda d: d["cases"][4].pop("checks")).field == "/cases/4/checks"
    assert invalid(lambda d: d["testops"]["plan"].pop("name")).field == "/testops/plan/name"


def test_each_missing_property_has_a_row_that_points_at_it() -> None:
    """Issue 27: with several properties missing, every row pointed at the first (`/cases/3/title` for a
    missing `lane` too)."""
    from testops_evidence.contract import schema_errors

    document = copy.deepcopy(BASE)
    for key in ("title", "lane", "checks"):
        document["cases"][3].pop(key)
    rows = [(where, message) for where, message, _ in schema_errors("contract", document)]
    assert sorted(rows) == [("/cases/3/checks", "'checks' is a required property"),
                            ("/cases/3/lane", "'lane' is a required property"),
                            ("/cases/3/title", "'title' is a required property")]


def test_wrong_type() -> None:
    err = invalid(lambda d: d["testops"].__setitem__("project-id", "12"))
    assert (err.field, err.expected, err.actual) == ("/testops/project-id", "type integer", "12")
    assert invalid(lambda d: d.__setitem__("trust", [])).field == "/trust"
    assert invalid(lambda d: d["cases"][0].__setitem__("timeout-minutes", 1.5)).field == "/cases/0/timeout-minutes"
    assert invalid(lambda d: d["trust"].__setitem__("public-only", "no")).field == "/trust/public-only"


def test_bad_enum() -> None:
    err = invalid(lambda d: d["cases"][3].__setitem__("lane", "cloud"))
    assert (err.field, err.expected, err.actual) == ("/cases/3/lane", 'one of "native", "external"', "cloud")
    assert invalid(lambda d: d["testops"].__setitem__("auth", "basic")).field == "/testops/auth"
    assert invalid(lambda d: d["cases"][0]["checks"].__setitem__("x", "other")).field == "/cases/0/checks/x"


def test_bad_const() -> None:
    err = invalid(lambda d: d.__setitem__("version", 2))
    assert (err.field, err.expected, err.actual) == ("/version", "1", 2)


def test_bad_pattern() -> None:
    err = invalid(lambda d: d["trust"].__setitem__("repository", "acme"))
    assert (err.field, err.actual) == ("/trust/repository", "acme")
    assert err.expected.startswith("a string matching ^")
    assert invalid(lambda d: d["cases"][1].__setitem__("key", "Upper Case")).field == "/cases/1/key"
    assert invalid(lambda d: d["trust"]["workflows"].append("ci.yml")).field == "/trust/workflows/1"
    assert invalid(lambda d: d["remote"]["images"]["postgres"].__setitem__(0, "sha256:xyz")).field == \
        "/remote/images/postgres/0"
    assert invalid(lambda d: d["cases"][0]["credentials"].append("lower")).field == "/cases/0/credentials/1"


def test_additional_property_names_the_extra_property() -> None:
    err = invalid(lambda d: d["trust"].__setitem__("brnaches", ["main"]))
    assert (err.field, err.actual) == ("/trust/brnaches", '["main"]')
    assert "branches" in err.expected
    assert invalid(lambda d: d.__setitem__("extra", 1)).field == "/extra"
    assert invalid(lambda d: d["cases"][7].__setitem__("owner", "me")).field == "/cases/7/owner"
    assert invalid(lambda d: d["lanes"].__setitem__("gpu", {})).field == "/lanes/gpu"


def test_bad_property_name_names_the_property_escaped() -> None:
    err = invalid(lambda d: d["profile"].__setitem__("a/b~c", "x"))
    assert err.field == "/profile/a~1b~0c"  # RFC 6901 escaping
    assert invalid(lambda d: d["cases"][0]["checks"].__setitem__("Bad", "behavior")).field == "/cases/0/checks/Bad"


def test_bounds() -> None:
    assert invalid(lambda d: d.__setitem__("cases", [])).field == "/cases"
    assert invalid(lambda d: d.__setitem__("lanes", {})).field == "/lanes"
    assert invalid(lambda d: d["lanes"]["native"].__setitem__("max-parallel", 0)).field == "/lanes/native/max-parallel"
    assert invalid(lambda d: d["lanes"]["native"].__setitem__("max-parallel", 257)).expected == "maximum 256"
    assert invalid(lambda d: d["trust"].__setitem__("events", [])).field == "/trust/events"
    assert invalid(lambda d: d["trust"].__setitem__("actors", [1, 1])).field == "/trust/actors"
    assert invalid(lambda d: d["profile"].__setitem__("model", "")).field == "/profile/model"


def test_not_an_object_at_all() -> None:
    for document in ([1], "text", None, 3):
        with pytest.raises(Refusal) as caught:
            contract_from_document(document)
        assert (caught.value.code, caught.value.field) == ("contract.invalid", "/")


# --- rules the schema cannot say ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [
    ("key", "get-task-context"),
    ("testops-id", 194),
    ("full-name", "agents/protocol/get-task-context"),
])
def test_duplicates_across_cases(name: str, value: Any) -> None:
    err = invalid(lambda d: d["cases"][2].__setitem__(name, value))
    assert (err.field, err.actual) == (f"/cases/2/{name}", value)
    assert f"is invalid at /cases/2/{name}: cases 0 and 2 share the {name}" in err.message


def test_a_case_key_with_a_trailing_line_break_is_refused() -> None:
    # `key: |` in YAML adds a line break that the schema's `$` lets through; `get-task-context` and
    # `get-task-context\n` would be two cases whose names collide once stripped (the `cell --case` option,
    # shell words, file names), so one case's worker could write the other case's evidence.
    err = invalid(lambda d: d["cases"][2].__setitem__("key", d["cases"][0]["key"] + "\n"))
    assert (err.field, err.actual) == ("/cases/2/key", "get-task-context\n")


def test_a_check_id_with_a_trailing_line_break_is_refused() -> None:
    # The schema's pattern refuses it (a JSON Schema `$` ends the input; Python's also matched before "\n").
    err = invalid(lambda d: d["cases"][0]["checks"].__setitem__("cleanup\n", "behavior"))
    assert err.field == "/cases/0/checks/cleanup\n"


def test_a_yaml_block_scalar_key_is_refused() -> None:
    text = EXAMPLE.read_text().replace("  - key: get-task-context\n", "  - key: |\n      get-task-context\n", 1)
    assert text != EXAMPLE.read_text()
    with pytest.raises(Refusal) as caught:
        contract_from_document(parse_contract_bytes(text.encode(), "contract.yml"))
    assert (caught.value.code, caught.value.field) == ("contract.invalid", "/cases/0/key")


def test_undeclared_lane() -> None:
    err = invalid(lambda d: d["lanes"].pop("external"))
    assert (err.field, err.expected, err.actual) == ("/cases/9/lane", "one of native", "external")


def test_missing_testops_id_with_a_testops_section() -> None:
    err = invalid(lambda d: d["cases"][5].pop("testops-id"))
    assert (err.field, err.actual) == ("/cases/5/testops-id", None)


def test_bootstrap_case_unknown() -> None:
    err = invalid(lambda d: d["testops"].__setitem__("bootstrap-case", "nope"))
    assert (err.field, err.actual) == ("/testops/bootstrap-case", "nope")


def test_bootstrap_standing_plan_needs_a_bootstrap_case() -> None:
    def mutate(d: Doc) -> None:
        d["testops"].pop("bootstrap-case")
        d["testops"]["standing-plan"] = "bootstrap"

    assert invalid(mutate).field == "/testops/bootstrap-case"


# --- the file: formats, encodings, sizes -------------------------------------------------------------------------


def file_refusal(tmp_path: Path, name: str, data: bytes) -> Refusal:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(Refusal) as caught:
        load_contract(tmp_path / name)
    return caught.value


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    err = file_refusal(tmp_path, "c.yml", b"version: 1\ncampaign: x\ntrust: [unclosed\n")
    assert (err.code, err.field, err.actual) == ("contract.invalid", "/trust", "line 3, column 17")
    assert "not valid YAML: a flow sequence is not closed at line 3, column 17" in err.message


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    err = file_refusal(tmp_path, "c.yml", EXAMPLE.read_bytes() + b"campaign: other\n")
    assert err.code == "contract.invalid"
    assert "the key 'campaign' appears twice in one mapping (first at line 5, column 1)" in err.message


def test_duplicate_json_keys_are_refused(tmp_path: Path) -> None:
    # json.loads would keep the last value; a contract must not lose a field silently.
    text = json.dumps(BASE)[:-1] + ', "campaign": "other"}'
    err = file_refusal(tmp_path, "c.json", text.encode())
    assert (err.code, err.field) == ("contract.invalid", "/campaign")
    assert 'the key "campaign" appears twice in one object (first at line 1, column 16)' in err.message


def test_json_contracts_load_and_bad_json_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(BASE, indent=2))
    assert load_contract(tmp_path / "c.json").campaign == "agent-protocol"
    err = file_refusal(tmp_path, "bad.json", b'{\n  "version": 1,\n  "campaign": \n}\n')
    # The line and column of the problem (Python says "Expecting value"), and the pointer of the field.
    assert (err.code, err.field, err.actual) == ("contract.invalid", "/campaign", "line 4, column 1")
    assert "expected a value, found }" in err.message


def test_a_json_contract_with_a_schema_error_names_the_pointer(tmp_path: Path) -> None:
    document = copy.deepcopy(BASE)
    document["cases"][0]["lane"] = "cloud"
    err = file_refusal(tmp_path, "c.json", json.dumps(document).encode())
    assert err.field == "/cases/0/lane"


@pytest.mark.parametrize("data", [b"version: 1\ncampaign: x\ntrust: [unclosed\n", b"version: 1\n",
                                  "campaign: caf\u00e9\n".encode("latin-1")])
def test_a_contract_problem_names_the_file_by_its_whole_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            data: bytes) -> None:
    # Several directories hold a testops-evidence.yml; the base name alone does not say which one is wrong.
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "testops-evidence.yml").write_bytes(data)
    with pytest.raises(Refusal) as caught:
        load_contract(".github/testops-evidence.yml")
    assert caught.value.message.startswith(".github/testops-evidence.yml is "), caught.value.message


@pytest.mark.parametrize("name", ["c.yml", "c.json"])
def test_non_utf8_is_refused(tmp_path: Path, name: str) -> None:
    err = file_refusal(tmp_path, name, "campaign: café\n".encode("latin-1"))
    assert (err.code, err.field, err.expected) == ("contract.invalid", "/", "UTF-8 text")


@pytest.mark.parametrize(("name", "data"), [("c.yml", b"- " * 2_000 + b"x"), ("c.json", b"[" * 50_000)])
def test_deep_nesting_is_refused(tmp_path: Path, name: str, data: bytes) -> None:
    err = file_refusal(tmp_path, name, data)
    assert err.code == "contract.invalid"


def test_yaml_alias_bombs_are_refused_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]  # 10^10 values
    err = file_refusal(tmp_path, "bomb.yml", "\n".join(lines).encode())
    assert err.code == "contract.invalid" and "values" in err.message


def test_yaml_python_tags_are_refused(tmp_path: Path) -> None:
    err = file_refusal(tmp_path, "c.yml", b"campaign: !!python/object/apply:os.system [true]\n")
    assert err.code == "contract.invalid"


def test_yaml_scalars_become_json_types() -> None:
    document = parse_contract_bytes(b"date: 2025-01-31\nnum: 1.5\nflag: yes\n", "c.yml")
    assert document == {"date": "2025-01-31", "num": 1.5, "flag": "yes"}


def test_an_oversized_contract_is_refused(tmp_path: Path) -> None:
    data = b"# padding\n" * (CONTRACT_LIMIT // 10 + 1)
    err = file_refusal(tmp_path, "big.yml", data)
    assert (err.code, err.expected, err.actual) == ("contract.invalid", f"<= {CONTRACT_LIMIT}", len(data))


def test_a_missing_contract_is_contract_missing(tmp_path: Path) -> None:
    with pytest.raises(Refusal) as caught:
        load_contract(tmp_path / "absent.yml")
    assert (caught.value.code, caught.value.exit_code) == ("contract.missing", EXIT_USAGE)


def test_a_symlinked_contract_is_refused(tmp_path: Path) -> None:
    (tmp_path / "link.yml").symlink_to(EXAMPLE)
    with pytest.raises(Refusal) as caught:
        load_contract(tmp_path / "link.yml")
    assert caught.value.code == "contract.invalid"
    assert "cannot be read safely" in caught.value.message


def test_pointer_escaping() -> None:
    assert pointer([]) == "/"
    assert pointer(["cases", 0, "key"]) == "/cases/0/key"
    assert pointer(["a/b", "c~d"]) == "/a~1b/c~0d"


# --- property-based: whatever the input, only a Refusal or a Contract comes out ------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=False),
                     st.text(max_size=20))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=20)
_fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_refusal(data: bytes, name: str) -> None:
    try:
        document = parse_contract_bytes(data, name)
        result = contract_from_document(document)
    except Refusal as exc:
        assert exc.code == "contract.invalid"
        assert exc.field is not None and exc.field.startswith("/")
        return
    assert isinstance(result, Contract)


@_fast
@given(st.binary(max_size=300))
def test_random_bytes_only_refuse(data: bytes) -> None:
    _only_refusal(data, "c.yml")
    _only_refusal(data, "c.json")


@_fast
@given(st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>'\"#%@`,? \n\t0.")), max_size=120))
def test_random_yaml_like_text_only_refuses(text: str) -> None:
    _only_refusal(text.encode(), "c.yml")


@_fast
@given(_json)
def test_random_json_documents_only_refuse(document: Any) -> None:
    _only_refusal(json.dumps(document).encode(), "c.json")


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


_BASE_PATHS = [p for p in _paths(BASE) if p]


@_fast
@given(st.sampled_from(_BASE_PATHS), _json, st.booleans())
def test_mutated_example_contracts_only_refuse_and_name_an_existing_pointer(
        where: tuple[Any, ...], value: Any, delete: bool) -> None:
    document = copy.deepcopy(BASE)
    parent = document
    for part in where[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    try:
        contract_from_document(document)
    except Refusal as exc:
        assert exc.code == "contract.invalid"
        assert exc.field is not None
        # The pointer leads to a field of the document (or to a missing property of an existing object).
        assert _pointer_resolves(document, exc.field), exc.field


def _pointer_resolves(document: Any, where: str) -> bool:
    if where == "/":
        return True
    parts = [p.replace("~1", "/").replace("~0", "~") for p in where[1:].split("/")]
    node = document
    for part in parts[:-1]:
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    last = parts[-1]
    return isinstance(node, dict) or (isinstance(node, list) and last.isdigit() and int(last) < len(node))


@_fast
@given(_json)
def test_random_documents_dumped_as_yaml_only_refuse(document: Any) -> None:
    import io

    from ruamel.yaml import YAML

    buffer = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, buffer)
    _only_refusal(buffer.getvalue().encode(), "c.yaml")


def test_files_named_yaml_or_without_suffix_are_parsed_as_yaml(tmp_path: Path) -> None:
    for name in ("contract.yaml", "contract"):
        (tmp_path / name).write_bytes(EXAMPLE.read_bytes())
        assert load_contract(tmp_path / name).campaign == "agent-protocol"
    assert not os.path.exists(tmp_path / "absent")
