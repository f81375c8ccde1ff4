"""The compiled schema check agrees with jsonschema exactly: on random schemas of the keyword subset with
random instances, and on our own schemas with valid documents mutated at random places."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_support import actions_env, cell, example_contract, small_contract
from import_builders import Cell, definition_document, host_document, intent_document, result_document
from testops_evidence.campaign.selection import build_selection
from testops_evidence.context import env_context
from testops_evidence.contract import load_schema, schema_errors, strict_validator
from testops_evidence.readers.schemacheck import compile_schema, json_equal, unique_items

# --- random schemas and instances ------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.0, 1.0, 1.5, -2.0]),
                    st.sampled_from(["", "a", "ab", "A1", "a.b", "-", "x" * 5]))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), inner, max_size=4)),
    max_leaves=12)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])
small_int = st.integers(0, 3)


def keyword_values(inner: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    """A value of each keyword of the subset, its subschemas drawn from ``inner``."""
    return {
        "type": st.one_of(type_names, st.lists(type_names, min_size=1, max_size=3, unique=True)),
        "enum": st.lists(scalars, min_size=1, max_size=4),
        "const": json_values,
        "pattern": st.sampled_from(["^a", "b$", "[0-9]", "^[a-z.]{1,3}$", "^$"]),
        "minLength": small_int, "maxLength": small_int,
        "minimum": st.sampled_from([0, 1, 1.5, -1]), "maximum": st.sampled_from([0, 1, 2.5]),
        "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
        "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
        "additionalProperties": st.one_of(st.booleans(), inner),
        "propertyNames": inner,
        "minProperties": small_int, "maxProperties": small_int,
        "items": inner,
        "minItems": small_int, "maxItems": small_int,
        "uniqueItems": st.booleans(),
        "oneOf": st.lists(inner, min_size=1, max_size=3),
        "anyOf": st.lists(inner, min_size=1, max_size=3),
        "allOf": st.lists(inner, min_size=1, max_size=2),
        "not": inner,
        "description": st.just("annotations never invalidate"),
    }


def keyword_schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    keywords = keyword_values(inner)
    return st.lists(st.sampled_from(sorted(keywords)), min_size=1, max_size=4, unique=True).flatmap(
        lambda names: st.fixed_dictionaries({name: keywords[name] for name in names}))


schemas = st.recursive(st.one_of(st.booleans(), st.fixed_dictionaries({"type": type_names})),
                       keyword_schemas, max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas, instance=json_values)
def test_random_schemas_agree_with_jsonschema(schema: Any, instance: Any) -> None:
    check = compile_schema(schema) if isinstance(schema, dict) else compile_schema({"allOf": [schema]})
    assert check is not None
    assert check(instance) == strict_validator(schema).is_valid(instance)


def _family(kind: str, names: list[str], inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    values = keyword_values(inner)
    return st.lists(st.sampled_from(names), max_size=len(names), unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({"type": st.just(kind), **{name: values[name] for name in chosen}}))


# The leaves an object's generated check writes out as expressions: bare types, string consts and enums (and the
# string and integer families above); anything else is called.
leaves = st.one_of(st.fixed_dictionaries({"type": type_names}), st.fixed_dictionaries({"const": scalars}),
                   st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=3)}),
                   st.fixed_dictionaries({"enum": st.lists(st.sampled_from(["", "a", "ab", "A1"]), min_size=1,
                                                           max_size=3)}))
fused_schemas = st.recursive(leaves, lambda inner: st.one_of(
    _family("string", ["pattern", "minLength", "maxLength"], inner),
    _family("integer", ["minimum", "maximum"], inner),
    _family("array", ["items", "minItems", "maxItems", "uniqueItems"], inner),
    _family("object", ["properties", "required", "additionalProperties", "propertyNames", "minProperties",
                       "maxProperties"], inner)), max_leaves=6)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=fused_schemas, instance=json_values)
def test_the_fused_forms_agree_with_jsonschema(schema: dict[str, Any], instance: Any) -> None:
    # A string with a pattern and lengths, an integer with bounds, an object with properties: each is checked
    # by one closure (schemacheck._Compiler._fused), which must answer exactly what jsonschema answers.
    check = compile_schema(schema)
    assert check is not None
    assert check(instance) == strict_validator(schema).is_valid(instance)
    if isinstance(instance, dict):  # and on an object built to pass the shape's own keys, not only random ones
        shaped = {name: instance.get(name, "a") for name in ("a", "b", "c")}
        assert check(shaped) == strict_validator(schema).is_valid(shaped)


@given(one=json_values, two=json_values)
def test_equality_is_jsonschemas(one: Any, two: Any) -> None:
    from jsonschema._utils import equal

    assert json_equal(one, two) == equal(one, two)


# --- uniqueItems: JSON Schema equality, in linear time ------------------------------------------------------

# Values that are equal in JSON Schema but not the same Python value, and values Python equates that JSON Schema
# does not (a boolean is not a number): the cases a hash of the wrong form would get wrong.
tricky = st.sampled_from([0, 1, 1.0, 0.0, -0.0, True, False, None, "1", "", [], {}, [1], [1.0], [True],
                          {"a": 1}, {"a": 1.0}, {"a": True}, {"a": [1, {"b": 0}]}, {"a": [1.0, {"b": 0.0}]},
                          [[1], [True]], [None], {"b": 1, "a": 2}, {"a": 2, "b": 1}, 2**53, float(2**53)])
mixed_lists = st.lists(st.one_of(tricky, json_values), max_size=8)


def _pairwise_unique(items: list[Any]) -> bool:
    from jsonschema._utils import equal

    return not any(equal(items[i], items[j]) for i in range(len(items)) for j in range(i + 1, len(items)))


@settings(max_examples=800, deadline=None)
@given(items=mixed_lists)
def test_unique_items_is_pairwise_json_schema_equality(items: list[Any]) -> None:
    # The definition (no two items equal, by jsonschema's own equality) checked pair by pair, against the
    # hashed check, the compiled schema and the validator that explains errors.
    expected = _pairwise_unique(items)
    assert unique_items(items) == expected
    assert compile_schema({"type": "array", "uniqueItems": True})(items) == expected  # type: ignore[misc]
    assert compile_schema({"uniqueItems": True})(items) == expected  # type: ignore[misc]
    assert strict_validator({"uniqueItems": True}).is_valid(items) == expected


def test_unique_items_finds_the_duplicate_jsonschemas_neighbour_comparison_misses() -> None:
    # jsonschema sorts and compares neighbours: [1] and [true] sort as equal, so the two [1] are never
    # neighbours and it reports these items unique.
    from jsonschema import Draft202012Validator

    items = [[1], [True], [1]]
    assert Draft202012Validator({"uniqueItems": True}).is_valid(items)
    assert not unique_items(items)
    assert not strict_validator({"uniqueItems": True}).is_valid(items)


def _hundred_thousand(kind: str, seed: int) -> list[Any]:
    count = 100_000
    if kind == "integers":
        return [seed + i for i in range(count)]
    if kind == "strings":
        return [f"s{seed}-{i}" for i in range(count)]
    if kind == "objects":
        return [{"id": i, "seed": seed} for i in range(count)]
    return [[i] if i % 4 == 0 else {"i": i} if i % 4 == 1 else float(i) + 0.5 if i % 4 == 2 else str(i)
            for i in range(count)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                          HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["integers", "strings", "objects", "mixed"]), seed=st.integers(0, 1000),
       duplicate=st.one_of(st.none(), st.tuples(st.integers(0, 99_999), st.integers(0, 99_999))),
       twin=st.booleans())
def test_unique_items_on_100000_items_hashes_each_once(monkeypatch_equal: dict[str, int], kind: str, seed: int,
                                                       duplicate: tuple[int, int] | None, twin: bool) -> None:
    # 10^5 items of every kind, with or without one duplicate placed anywhere (as an equal but different
    # Python value where there is one: 3 and 3.0, an object with its keys in another order). The answer is
    # checked against the construction, and the work is counted: no pair of items is ever compared (the
    # pairwise check took 5 * 10^9 comparisons here, and 300 s for 16,000 actor ids).
    items = _hundred_thousand(kind, seed)
    expected = True
    if duplicate is not None and duplicate[0] != duplicate[1]:
        source = items[duplicate[0]]
        if twin and isinstance(source, int):
            source = float(source)
        elif twin and isinstance(source, dict):
            source = dict(reversed(list(source.items())))
        items[duplicate[1]] = copy.deepcopy(source)
        expected = False
    monkeypatch_equal.clear()
    assert unique_items(items) == expected
    check = compile_schema({"type": "array", "uniqueItems": True, "items": True})
    assert check is not None and check(items) == expected
    errors = list(strict_validator({"uniqueItems": True}).iter_errors(items))
    assert (errors == []) == expected
    assert monkeypatch_equal == {}
    if kind in ("integers", "strings"):  # items jsonschema sorts: its own check is fast here, and agrees
        from jsonschema import Draft202012Validator

        assert Draft202012Validator({"uniqueItems": True}).is_valid(items) == expected


@pytest.fixture
def monkeypatch_equal(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts every call of the pairwise equalities (ours and jsonschema's) during a test."""
    from jsonschema import _utils

    from testops_evidence.readers import schemacheck

    calls: dict[str, int] = {}

    def counted(name: str, real: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args)
        return wrapper

    monkeypatch.setattr(schemacheck, "json_equal", counted("schemacheck.json_equal", schemacheck.json_equal))
    monkeypatch.setattr(_utils, "equal", counted("jsonschema equal", _utils.equal))
    return calls


def test_a_schema_outside_the_subset_is_left_to_jsonschema() -> None:
    assert compile_schema({"type": "string", "format": "date-time"}) is None
    assert compile_schema({"patternProperties": {"^a": {}}}) is None
    assert compile_schema({"$ref": "https://example.com/other.json"}) is None


def test_a_recursive_reference_is_followed() -> None:
    schema = {"$defs": {"node": {"type": "object", "additionalProperties": False,
                                 "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}}}},
              "$ref": "#/$defs/node"}
    check = compile_schema(schema)
    assert check is not None
    assert check({"v": 1, "next": {"v": 2, "next": {}}})
    assert not check({"v": 1, "next": {"v": "2"}})


# --- our schemas, on valid documents mutated at random ---------------------------------------------------

def _documents() -> list[tuple[str, Any]]:
    contract = example_contract()
    small = small_contract()
    selection = build_selection(small, env_context(actions_env()), list(small.cases), backend="files",
                                source="contract")
    cells = [Cell("exec-1")]
    return [
        ("contract", dict(contract.document)),
        ("selection", selection),
        ("cell-result", cell(small, "get-task-context", selection_sha256="5e1ec7" + "0" * 58)),
        ("cell-result-v1", result_document(cells[0])["cell"]),
        ("import-intent", intent_document(cells)),
        ("remote-result", result_document(cells[0])),
        ("remote-host", host_document(cells)),
        ("remote-definition", definition_document(cells[0])),
    ]


DOCUMENTS = _documents()
CHECKS = {name: compile_schema(load_schema(name)) for name, _ in DOCUMENTS}
VALIDATORS = {name: strict_validator(load_schema(name)) for name, _ in DOCUMENTS}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += _paths(item, (*prefix, index))
    return found


def test_every_schema_of_ours_compiles_and_accepts_its_example() -> None:
    for name, document in DOCUMENTS:
        check = CHECKS[name]
        assert check is not None, name
        assert check(document) and VALIDATORS[name].is_valid(document), name
        assert list(schema_errors(name, document)) == []


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_mutated_documents_agree_with_jsonschema(data: st.DataObject) -> None:
    name, original = data.draw(st.sampled_from(DOCUMENTS))
    document = copy.deepcopy(original)
    path = data.draw(st.sampled_from(_paths(document)[1:]))
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "replace":
        parent[path[-1]] = data.draw(json_values)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.sampled_from(["extra", "x-field", "key"]))] = data.draw(json_values)
    else:
        parent.append(data.draw(json_values))
    check = CHECKS[name]
    assert check is not None
    valid = VALIDATORS[name].is_valid(document)
    assert check(document) == valid
    assert (list(schema_errors(name, document)) == []) == valid


def test_every_array_of_the_contract_has_a_maximum_length() -> None:
    # Issue 24 (7): trust.actors had none, and a 106 KB contract of 16,000 ids stalled check and guard. Every
    # list an operator writes is bounded (docs/contract.md shows each bound in its reference table).
    unbounded: list[str] = []

    def visit(node: Any, where: str) -> None:
        if isinstance(node, dict):
            kinds = node.get("type")
            if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds) or "items" in node) \
                    and not isinstance(node.get("maxItems"), int):
                unbounded.append(where)
            for key, value in node.items():
                visit(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                visit(value, f"{where}/{index}")

    visit(load_schema("contract"), "")
    assert unbounded == []
