"""The reference docs are generated from the code (scripts/gen_docs.py) and kept current by this test;
the generator itself is tested against registries and schemas it has never seen."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from testops_evidence import errors, interface
from testops_evidence.contract import contract_from_document, load_schema, parse_contract_bytes

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = load_generator()


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_generated_docs_are_current(hash_seed: str) -> None:
    # Two hash seeds: the output must not depend on set or dict iteration order of one process.
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_docs.py"), "--check"], capture_output=True,
                          text=True, check=False, env=env)
    assert done.returncode == 0, ("docs are stale: run `python scripts/gen_docs.py` and commit the result\n"
                                  + done.stdout + done.stderr)


# --- what the generated docs say --------------------------------------------------------------------------------


def table_rows(text: str) -> dict[str, list[str]]:
    """First-column code span -> the row's cells, for every table row in ``text``."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\| `([^`]+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [c.strip() for c in re.split(r"(?<!\\)\|", match.group(2))]
    return rows


def test_errors_md_lists_every_code_with_its_exit_code() -> None:
    rows = table_rows((DOCS / "errors.md").read_text())
    for code, spec in errors.REGISTRY.items():
        assert code in rows, code
        assert rows[code][0] == str(spec.exit_code), code
    for exit_code in errors.EXIT_MEANINGS:
        assert str(exit_code) in rows


def test_errors_md_gives_every_code_a_specific_next_step() -> None:
    rows = table_rows((DOCS / "errors.md").read_text())
    for code, spec in errors.REGISTRY.items():
        assert rows[code][2] == gen.cell(spec.hint), code
        assert rows[code][2] not in ("", "—"), code


def test_troubleshooting_md_explains_every_code_meaning_cause_and_fix() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    sections = dict(re.findall(r"^#### `([^`]+)`\n(.*?)(?=^#{2,4} |\Z)", text, flags=re.MULTILINE | re.DOTALL))
    assert set(sections) == set(errors.REGISTRY)
    for code, spec in errors.REGISTRY.items():
        body = sections[code]
        assert f"Exit {spec.exit_code} " in body, code
        assert f"- **What it means:** {spec.meaning}." in body, code
        assert f"- **Usual cause:** {spec.cause}" in body, code
        assert f"- **Fix:** {spec.hint}" in body, code
        assert f"(#{gen._anchor(code)})" in text, code  # the index links to it
    guide = text.split("<!-- BEGIN GENERATED: error codes", 1)[0]
    assert "## Problems without an error code" in guide


def test_the_troubleshooting_reference_is_replaced_and_the_guide_kept() -> None:
    fresh = gen.render_troubleshooting(None, errors.REGISTRY, errors.EXIT_MEANINGS)
    assert fresh.startswith(gen.TROUBLESHOOTING_GUIDE)
    edited = fresh.replace(gen.TROUBLESHOOTING_GUIDE, "# Mine\n\nHand-written.\n") + "\nA footer.\n"
    stale = edited.replace("#### `io.exists`", "#### `io.gone`")
    again = gen.render_troubleshooting(stale, errors.REGISTRY, errors.EXIT_MEANINGS)
    assert again.startswith("# Mine\n\nHand-written.\n") and again.endswith("\nA footer.\n")
    assert "#### `io.exists`" in again and "io.gone" not in again
    assert gen.render_troubleshooting(again, errors.REGISTRY, errors.EXIT_MEANINGS) == again


def test_inputs_md_lists_every_input_and_every_output_of_every_mode() -> None:
    text = (DOCS / "inputs.md").read_text()
    sections = re.split(r"^### ", text, flags=re.MULTILINE)
    by_mode = {s.split("\n", 1)[0].strip("`"): s for s in sections[1:]}
    common = table_rows(text.split("## Modes", 1)[0])
    for mode in interface.MODES:
        section = table_rows(by_mode[mode])
        for spec in interface.inputs_for(mode):
            assert spec.name in section or spec.name in common, (mode, spec.name)
        for out in interface.outputs_for(mode):
            assert out.name in section, (mode, out.name)
    assert "mode" in common


def test_contract_md_lists_every_schema_property() -> None:
    text = (DOCS / "contract.md").read_text()
    documented = set(re.findall(r"^\| `(/[^`]*)` \|", text, flags=re.MULTILINE))

    def pointers(node: dict, prefix: str) -> list[str]:  # type: ignore[type-arg]
        node = gen._resolve(node, load_schema("contract"))
        out = []
        for name, sub in node.get("properties", {}).items():
            out += [f"{prefix}/{name}", *pointers(sub, f"{prefix}/{name}")]
        items = gen._resolve(node.get("items", {}), load_schema("contract"))
        if "properties" in items:
            out += pointers(items, f"{prefix}/*")
        return out

    expected = pointers(load_schema("contract"), "")
    assert len(expected) > 40
    assert set(expected) <= documented


def test_contract_md_keeps_its_guide_above_the_generated_section() -> None:
    text = (DOCS / "contract.md").read_text()
    begin = text.index("<!-- BEGIN GENERATED: contract reference")
    assert "## Rules beyond the schema" in text[:begin]
    assert "## Reference (every field)" in text[begin:]


def test_yaml_contracts_in_the_docs_are_valid() -> None:
    text = (DOCS / "contract.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
    contracts = [b for b in blocks if re.search(r"^version: 1$", b, flags=re.MULTILINE)]
    assert len(contracts) >= 2  # the minimal one and the complete example
    for block in contracts:
        contract_from_document(parse_contract_bytes(block.encode(), "docs.yml"))


def test_the_refusal_shown_in_contract_md_is_what_check_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from testops_evidence import cli

    monkeypatch.chdir(tmp_path)  # the page's refusal names the contract by the path given, as a user types it
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):  # a terminal, as the page shows
        monkeypatch.delenv(name, raising=False)

    text = (DOCS / "contract.md").read_text()
    shown = re.search(r"```text\n(⛔ check refused: contract\.invalid\n.*?)\n```", text, flags=re.DOTALL)
    assert shown is not None
    minimal = re.findall(r"```yaml\n(version: 1\n.*?)```", text, flags=re.DOTALL)[0]
    document = parse_contract_bytes(minimal.encode(), "c.yml")
    case = document["cases"][0]
    document["cases"] = [dict(case, key=k, **{"full-name": k}) for k in "abc"] + [
        dict(case, key="d", lane="cloud", **{"full-name": "d"})]
    (tmp_path / "contract.json").write_text(json.dumps(document, indent=2))
    assert cli.main(["check", "--contract", "contract.json"]) == errors.EXIT_USAGE
    assert capsys.readouterr().err == shown.group(1) + "\n"


# --- the generator is robust to what others add --------------------------------------------------------------------


def test_errors_render_handles_new_areas_and_awkward_text() -> None:
    registry = dict(errors.REGISTRY)
    registry["zeta.new_thing"] = errors.CodeSpec("zeta.new_thing", errors.EXIT_INTEGRITY,
                                                 "a | pipe,\nnew line and `backticks`", "Do `x | y`.")
    text = gen.render_errors(registry, errors.EXIT_MEANINGS)
    assert "### zeta" in text
    assert "[`zeta`](#zeta)" in text
    row = next(line for line in text.splitlines() if "zeta.new_thing" in line)
    assert row == "| `zeta.new_thing` | 3 | a \\| pipe, new line and `backticks` | Do `x \\| y`. |"
    assert row.count(" | ") == 3  # still four cells


def test_schema_rows_follow_refs_combinators_and_free_keys() -> None:
    schema = {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"description": "A thing.", "$ref": "#/$defs/thing"},
            "b": {"type": "array", "items": {"type": "object", "properties": {"c": {"type": "integer",
                                                                                    "minimum": 0}}}},
            "d": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"e": {"const": True}}}]},
            "f": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
            "g": {"type": "object", "patternProperties": {"^x": {"enum": [1, 2]}}},
            "h": {"unknownKeyword": {"weird": True}},
            "i": {"$ref": "#/$defs/loop"},
        },
        "$defs": {"thing": {"type": "string", "pattern": "^a|b$", "default": "a", "description": "Shadowed."},
                  "loop": {"$ref": "#/$defs/loop"}},
    }
    rows = {r[0]: r for r in gen.schema_rows(schema)}
    assert rows["`/a`"] == ("`/a`", "string", "yes", "`a`", "matches `^a|b$`", "A thing.")
    assert rows["`/b/*/c`"][1:5] == ("integer", "", "", "at least 0")
    assert rows["`/d`"][1] == "string | object"
    assert "`/d/e`" in rows and rows["`/d/e`"][4] == "exactly `true`"
    assert rows["`/f/<name>`"][1] == "string | null"
    assert rows["`/g/<name>`"][4] == "one of `1`, `2`"
    assert rows["`/h`"][1:5] == ("", "", "", "")
    assert "`/i`" in rows  # a self-referencing $ref ends instead of recursing forever
    rendered = "\n".join(gen.table(("f", "t", "r", "d", "a", "m"), gen.schema_rows(schema)))
    assert "`^a\\|b$`" in rendered  # pipes escaped inside the table


def test_the_contract_section_is_replaced_and_the_guide_kept() -> None:
    schema = load_schema("contract")
    fresh = gen.render_contract(None, schema, "version: 1\n")
    assert fresh.startswith(gen.DEFAULT_CONTRACT_GUIDE)
    edited = fresh.replace(gen.DEFAULT_CONTRACT_GUIDE, "# Mine\n\nHand-written.\n") + "\nA footer.\n"
    stale = edited.replace("| `/version` |", "| `/old` |")
    again = gen.render_contract(stale, schema, "version: 1\n")
    assert again.startswith("# Mine\n\nHand-written.\n")
    assert again.endswith("\nA footer.\n")
    assert "| `/version` |" in again and "| `/old` |" not in again
    assert gen.render_contract(again, schema, "version: 1\n") == again  # idempotent


def test_check_mode_reports_a_stale_file_and_write_mode_fixes_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "contract.yml").write_bytes((REPO / "examples" / "contract.yml").read_bytes())
    assert gen.main(["--check"], root=tmp_path) == 1  # nothing written yet
    assert not (tmp_path / "docs").exists()
    assert gen.main([], root=tmp_path) == 0
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["contract.md", "errors.md", "inputs.md",
                                                                      "troubleshooting.md"]
    assert gen.main(["--check"], root=tmp_path) == 0
    errors_md = tmp_path / "docs" / "errors.md"
    errors_md.write_text(errors_md.read_text().replace("| `io.exists` |", "| `io.gone` |"))
    capsys.readouterr()
    assert gen.main(["--check"], root=tmp_path) == 1
    diff = capsys.readouterr().out
    assert "-| `io.gone` |" in diff and "+| `io.exists` |" in diff


def test_cell_and_code_helpers() -> None:
    assert gen.cell("a|b\nc  d") == "a\\|b c d"
    assert gen.cell(None) == ""
    assert gen.code("x") == "`x`"
    assert gen.code("a`b") == "``a`b``"
    assert gen.code("`x`") == "`` `x` ``"


# --- the pages a new user reads ---------------------------------------------------------------------------------

USER_PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_of_a_user_page_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"


def test_the_pages_a_new_user_looks_for_exist_and_are_linked_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("docs/install.md", "docs/troubleshooting.md", "CHANGELOG.md", "CONTRIBUTING.md", "LICENSE"):
        assert (REPO / name).is_file(), name
        assert f"]({name})" in readme, f"the README does not link {name}"


def test_every_caller_example_names_the_same_secret_for_case_secrets() -> None:
    names = set()
    for page in USER_PAGES:
        names |= set(re.findall(r"case-secrets: \$\{\{ secrets\.([A-Z0-9_]+) \}\}", page.read_text(encoding="utf-8")))
    assert len(names) == 1, f"the docs name different secrets for case-secrets: {sorted(names)}"


@pytest.mark.parametrize("phrase", ["never checked against a registry", "no registry is reachable",
                                    "this project's development machines", "TODO", "FIXME", "the landed main"])
def test_user_docs_hold_no_internal_notes(phrase: str) -> None:
    for page in USER_PAGES:
        assert phrase.casefold() not in page.read_text(encoding="utf-8").casefold(), (page.name, phrase)


def test_user_docs_name_no_tracker_issue_of_this_project() -> None:
    """Users have no access to the tracker the work was planned in: "(#14)" in a user page points nowhere."""
    for page in USER_PAGES:
        assert not re.findall(r"\(#\d+\)", page.read_text(encoding="utf-8")), page.name


def test_the_act_command_in_local_md_maps_every_action_the_templates_pin() -> None:
    """docs/local.md's command must map exactly the actions the templates and the composite action use (act
    cannot fetch them), each to a stand-in this repository ships; the act test runs that command as written."""
    from testops_evidence import __version__

    text = (DOCS / "local.md").read_text(encoding="utf-8")
    mapped = dict(re.findall(r"--local-repository (\S+?)=(\$A\S*)", text))
    used = set()
    for path in [*sorted((REPO / "workflows-templates").glob("*.yml")), REPO / "composite" / "action.yml"]:
        used |= set(re.findall(r"uses: (actions/(?!checkout)[\w-]+@[0-9a-f]{40})", path.read_text(encoding="utf-8")))
    assert set(mapped) == used | {f"testops-evidence/testops-evidence@v{__version__}"}
    for reference, target in mapped.items():
        local = REPO / target.removeprefix("$A").lstrip("/")
        assert (local / "action.yml").is_file(), f"{reference} is mapped to {target}, which has no action.yml"
