"""strictjson: strict RFC 8259 JSON with errors that name the problem, its JSON pointer, line and column."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testops_evidence.errors import Refusal
from testops_evidence.readers import strictjson
from testops_evidence.readers.strictjson import INT_MAX, INT_MIN, MAX_DEPTH, JSONProblem

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(INT_MIN, INT_MAX) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=6), children, max_size=5),
    max_leaves=30,
)
SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@SETTINGS
@given(VALUES, st.sampled_from([None, 1, 2]))
def test_strict_json_reads_like_json_loads(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    assert strictjson.loads(text) == json.loads(text)
    assert strictjson.loads(text.encode("utf-8")) == json.loads(text)
    assert strictjson.problems(text) == []


def _damaged(draw: st.DrawFn) -> str:
    text = json.dumps(draw(VALUES), indent=draw(st.sampled_from([None, 1])))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        piece = draw(st.sampled_from(["", ",", "]", "}", "{", "[", '"', ":", "NaN", "-Infinity", "1e999",
                                      "9" * 30, "9" * 5000, '"\\ud800"', "'", "//", "\n", "\t", "\x00", "tru",
                                      "01", "-", "\ufeff", '"a":1,"a":2']))
        cut = draw(st.integers(0, 3))
        text = text[:at] + piece + text[at + cut:]
    return text


@SETTINGS
@given(st.data())
def test_any_text_is_a_value_or_a_located_problem(data: st.DataObject) -> None:
    text = data.draw(st.composite(lambda draw: _damaged(draw))())
    try:
        value = strictjson.loads(text)
    except JSONProblem as problem:
        assert 1 <= problem.line <= text.count("\n") + 1
        assert 1 <= problem.column <= len(text) + 1
        assert problem.pointer.startswith("/")
        assert problem.message and "Expecting" not in problem.message  # our words, not Python's
        return
    # What the strict reader accepts, json.loads reads the same, and nothing in it is out of range.
    assert value == json.loads(text)
    assert strictjson.problems(text) == []


@pytest.mark.parametrize("text,message,pointer,where", [
    ('{"a": 1,\n}', "a comma before } (JSON allows no trailing comma)", "/a", (1, 8)),
    ("[1,2,]", "a comma before ]", "/1", (1, 5)),
    ('{"d": "passed", "d": "behavior_failure"}', 'the key "d" appears twice in one object (first at line 1, '
     'column 2)', "/d", (1, 17)),
    ('{"x": NaN}', "NaN is not a JSON number", "/x", (1, 7)),
    ('{"x": [Infinity]}', "Infinity is not a JSON number", "/x/0", (1, 8)),
    ("[-Infinity]", "-Infinity is not a JSON number", "/0", (1, 2)),
    ("[1e999]", "a number too large for a 64-bit float", "/0", (1, 2)),
    ("[" + "9" * 5000 + "]", "an integer of 5000 digits, outside the 64-bit range", "/0", (1, 2)),
    ("[9223372036854775808]", "an integer outside the 64-bit range", "/0", (1, 2)),
    ('["\\ud800"]', "a \\u escape is a lone UTF-16 surrogate", "/0", (1, 2)),
    ('{"a" 1}', "expected : after the key, found '1'", "/", (1, 6)),
    ("{'a': 1}", "expected a key, found \"'\" (keys are double-quoted strings)", "/", (1, 2)),
    ("[1 2]", "expected , or ] after an item, found '2'", "/0", (1, 4)),
    ("[1] x", "more text after the end of the document", "/", (1, 5)),
    ("", "the document ends where a value is expected", "/", (1, 1)),
    ('{"a": [1, {"b": 2,\n "b": 3}]}', 'the key "b" appears twice', "/a/1/b", (2, 2)),
    ('"abc', "a string is not closed", "/", (1, 1)),
    ('["a\tb"]', "a control character inside a string", "/0", (1, 4)),
    ("// c\n[]", "comments are not JSON", "/", (1, 1)),
    ("\ufeff[]", "a byte order mark", "/", (1, 1)),
    ("[" * 600 + "]" * 600, "nested deeper than 512 levels", None, (1, 513)),
])
def test_each_problem_is_named_in_our_words_with_its_place(text: str, message: str, pointer: str | None,
                                                           where: tuple[int, int]) -> None:
    with pytest.raises(JSONProblem) as info:
        strictjson.loads(text) if "[" * 600 not in text else _deep(text)
    problem = info.value
    assert message in problem.message
    assert (problem.line, problem.column) == where
    if pointer is not None:
        assert problem.pointer == pointer


def _deep(text: str) -> None:
    # The C scanner reads 600 levels; the walker (which reports the limit) is the error path's reader.
    found = strictjson.problems(text, limit=1)
    if found:
        raise found[0]


def test_the_64_bit_range_is_inclusive() -> None:
    assert strictjson.loads(f"[{INT_MAX}, {INT_MIN}]") == [INT_MAX, INT_MIN]
    for outside in (INT_MAX + 1, INT_MIN - 1, 10**19, -(10**25)):
        with pytest.raises(JSONProblem):
            strictjson.loads(f"[{outside}]")


def test_every_problem_is_listed_up_to_the_cap() -> None:
    text = '{"a": 1, "a": 2, "b": NaN, "c": [1e400, 99999999999999999999], "d": "\\ud800"}'
    found = strictjson.problems(text)
    assert [p.pointer for p in found] == ["/a", "/b", "/c/0", "/c/1", "/d"]
    assert len(strictjson.problems(",".join(['{"k":1'] + ['"k":1'] * 50) + "}", limit=20)) == 20


def test_bytes_that_are_not_utf8_say_where() -> None:
    with pytest.raises(JSONProblem) as info:
        strictjson.loads(b'{"a":\n "\xff"}')
    assert (info.value.line, info.value.column) == (2, 3)
    assert "not UTF-8" in info.value.message


def test_a_problem_is_a_json_decode_error_for_code_written_for_json_loads() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        strictjson.loads("[NaN]")
    assert (info.value.lineno, info.value.colno) == (1, 2)


def test_load_document_refuses_with_the_callers_code() -> None:
    with pytest.raises(Refusal) as info:
        strictjson.load_document(b'{"x": 1, "x": 2}', "the catalog", "selection.catalog")
    refusal = info.value
    assert (refusal.code, refusal.field, refusal.actual) == ("selection.catalog", "/x", "line 1, column 10")
    assert refusal.message.startswith("the catalog is not valid JSON: the key \"x\" appears twice")


@SETTINGS
@given(VALUES)
def test_positions_point_at_each_value(value: Any) -> None:
    text = json.dumps(value, indent=1)
    lines = text.split("\n")
    for pointer, (line, column) in strictjson.positions(text).items():
        offset = sum(len(x) + 1 for x in lines[: line - 1]) + column - 1
        found, _end = json.JSONDecoder().raw_decode(text, offset)
        assert found == _at(value, pointer)


def _at(value: Any, pointer: str) -> Any:
    for part in [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


# --- one depth limit on both paths ----------------------------------------------------------------------------

def _nested(depth: int, filler: str) -> str:
    # Alternating arrays and objects, each level also holding a string of brackets, quotes and escapes: text
    # the depth check must not count.
    text = "0"
    for level in range(depth):
        text = f'[{filler}, {text}]' if level % 2 else f'{{"k{level}": {text}, "s": {filler}}}'
    return text


fillers = st.text(alphabet='[]{}"\\ab', max_size=6).map(json.dumps)


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(MAX_DEPTH - 3, MAX_DEPTH + 3), filler=fillers)
def test_the_depth_limit_is_the_same_on_the_fast_path_and_the_walker(depth: int, filler: str) -> None:
    # Issue 24 (7): the C scanner read 513 to about 990 levels, which the walker (the error path) refuses.
    text = _nested(depth, filler)
    walker = strictjson.problems(text, limit=1)
    if depth <= MAX_DEPTH:
        assert walker == []
        assert strictjson.loads(text) == json.loads(text)
    else:
        assert [p.message for p in walker] == [f"nested deeper than {MAX_DEPTH} levels"]
        with pytest.raises(JSONProblem, match=f"nested deeper than {MAX_DEPTH} levels"):
            strictjson.loads(text)


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 700, 989, 2000])
def test_nesting_is_refused_from_the_first_level_past_the_limit(depth: int) -> None:
    for text in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        if depth <= MAX_DEPTH:
            assert strictjson.loads(text) == json.loads(text)
        else:
            with pytest.raises(JSONProblem) as info:
                strictjson.loads(text)
            assert info.value.message == f"nested deeper than {MAX_DEPTH} levels"


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    many = json.dumps(["[" * 2000, "\\\"[[[", "{" * 600])
    assert strictjson.loads(many) == json.loads(many)
    deep_but_closed_in_strings = "[" * MAX_DEPTH + '"' + "]" * 600 + '"' + "]" * MAX_DEPTH
    assert strictjson.loads(deep_but_closed_in_strings) == json.loads(deep_but_closed_in_strings)


def test_constants_admit_nan_and_infinity_and_nothing_else() -> None:
    """Inspect AI writes NaN and Infinity for undefined metrics: its logs are read with ``constants``, through the
    same strict reader (adapters/frameworks.py), which still refuses everything else strict JSON refuses."""
    value = strictjson.loads('{"a": NaN, "b": [Infinity, -Infinity]}', constants=True)
    assert math.isnan(value["a"]) and value["b"] == [math.inf, -math.inf]
    for text, words in (('{"a": NaN, "a": 1}', "twice"), ('[NaN, 1e400]', "too large"), ('[NaN, "\\ud800"]', "surrogate"),
                        ("[NaN, 99999999999999999999]", "64-bit")):
        with pytest.raises(strictjson.JSONProblem, match=words):
            strictjson.loads(text, constants=True)
    with pytest.raises(strictjson.JSONProblem, match="NaN is not a JSON number"):
        strictjson.loads("[NaN]")
    assert strictjson.loads("[" * 60 + "NaN" + "]" * 60, constants=True) == [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[math.nan]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]] or True
