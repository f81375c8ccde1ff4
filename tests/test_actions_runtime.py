"""actions.Runtime: what the runner reads (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, workflow commands) and what
a person reads outside Actions."""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import parse_output_file
from testops_evidence.actions import (
    SUMMARY_LIMIT_BYTES,
    Runtime,
    escape_data,
    escape_property,
    format_output_value,
)

NOTICE_MARK = "The step summary was truncated at GitHub's 1 MiB limit"


def actions_runtime(tmp_path: Path, **extra_env: str) -> tuple[Runtime, io.StringIO]:
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        **extra_env,
    }
    out = io.StringIO()
    return Runtime(env, stdout=out), out


def unescape_data(value: str) -> str:
    """The runner's inverse of escape_data (toolkit command.ts)."""
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(value: str) -> str:
    return unescape_data(value.replace("%3A", ":").replace("%2C", ","))


# --- outputs ------------------------------------------------------------------------------------------


def test_single_line_output_is_name_equals_value(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    runtime.set_output("selected-count", 12)
    runtime.set_output("selection-path", "out/selection.json")
    assert (tmp_path / "output").read_text() == "selected-count=12\nselection-path=out/selection.json\n"
    assert runtime.outputs == {"selected-count": "12", "selection-path": "out/selection.json"}


def test_multi_line_output_uses_a_random_heredoc_delimiter(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    value = "first line\nsecond = line\n\nlast"
    runtime.set_output("notes", value)
    runtime.set_output("other", "x")
    text = (tmp_path / "output").read_text()
    first = text.splitlines()[0]
    match = re.fullmatch(r"notes<<(ghadelimiter_[0-9a-f]{32})", first)
    assert match is not None, first
    assert parse_output_file(text) == {"notes": value, "other": "x"}
    # Two writes pick two delimiters: an attacker who knows one cannot close the next heredoc.
    runtime.set_output("notes2", value)
    delimiters = re.findall(r"<<(ghadelimiter_[0-9a-f]{32})", (tmp_path / "output").read_text())
    assert len(set(delimiters)) == 2


def test_carriage_return_alone_also_uses_a_heredoc(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    runtime.set_output("cr", "a\rb")
    assert (tmp_path / "output").read_text().startswith("cr<<ghadelimiter_")


def test_a_value_containing_a_delimiter_lookalike_is_kept_intact(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    value = "ghadelimiter_00000000000000000000000000000000\nname=forged"
    runtime.set_output("tricky", value)
    assert parse_output_file((tmp_path / "output").read_text()) == {"tricky": value}


def test_structured_values_are_one_line_json(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    matrix = {"include": [{"case": "a", "title": "Ünïcode | pipe"}, {"case": "b"}]}
    runtime.set_output("native-matrix", matrix)
    runtime.set_output("reconciled", ["upload", "launch"])
    runtime.set_output("all-passed", True)
    runtime.set_output("published", False)
    text = (tmp_path / "output").read_text()
    assert "<<" not in text  # one line each, no heredoc needed
    outputs = parse_output_file(text)
    assert json.loads(outputs["native-matrix"]) == matrix
    assert outputs["native-matrix"] == '{"include":[{"case":"a","title":"Ünïcode | pipe"},{"case":"b"}]}'
    assert json.loads(outputs["reconciled"]) == ["upload", "launch"]
    assert outputs["all-passed"] == "true"
    assert outputs["published"] == "false"


def test_format_output_value_kinds() -> None:
    assert format_output_value(0) == "0"
    assert format_output_value(1.5) == "1.5"
    assert format_output_value("") == ""
    assert format_output_value(None) == "null"
    assert format_output_value({"a": "line\nbreak"}) == '{"a":"line\\nbreak"}'


@settings(max_examples=60, deadline=None)
@given(values=st.dictionaries(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
                              st.text(st.characters(blacklist_categories=("Cs",)), max_size=60),
                              max_size=5))
def test_outputs_round_trip_through_the_output_file(values: dict[str, str]) -> None:
    # Property: whatever the value, the runner's parser gets exactly the value back.
    with tempfile.TemporaryDirectory() as tmp:
        runtime, _ = actions_runtime(Path(tmp))
        for name, value in values.items():
            runtime.set_output(name, value)
        path = Path(tmp) / "output"
        text = path.read_bytes().decode("utf-8") if path.exists() else ""
    assert parse_output_file(text) == values


def test_outside_actions_outputs_are_kept_for_json_not_printed() -> None:
    out = io.StringIO()
    runtime = Runtime({}, stdout=out)
    runtime.set_output("selected-count", 3)
    runtime.set_output("notes", "a\nb")
    assert out.getvalue() == ""  # cli.py prints them with --json
    assert runtime.outputs == {"selected-count": "3", "notes": "a\nb"}


def test_a_runner_without_an_output_file_still_gets_the_outputs_in_its_log() -> None:
    out = io.StringIO()
    runtime = Runtime({"GITHUB_ACTIONS": "true"}, stdout=out)
    runtime.set_output("selected-count", 3)
    runtime.set_output("notes", "a\nb")
    assert out.getvalue() == "output selected-count=3\noutput notes:\na\nb\n"


# --- step summary ---------------------------------------------------------------------------------------


def test_summary_appends_markdown_with_a_final_newline(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path)
    runtime.summary("## One")
    runtime.summary("| a |\n|---|\n")
    assert (tmp_path / "summary.md").read_text() == "## One\n| a |\n|---|\n"
    assert out.getvalue() == ""


def test_summary_truncates_on_a_line_boundary_with_a_visible_notice(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    row = "| case-" + "x" * 90 + " | passed |\n"
    body = row * (SUMMARY_LIMIT_BYTES // len(row) + 50)
    runtime.summary("## Results\n")
    runtime.summary(body)  # must not raise
    runtime.summary("## After the limit\n")  # silently dropped: the notice already explains
    data = (tmp_path / "summary.md").read_bytes()
    assert len(data) <= SUMMARY_LIMIT_BYTES
    text = data.decode("utf-8")
    assert NOTICE_MARK in text
    assert "After the limit" not in text
    kept = text.split("\n\n> [!WARNING]")[0]
    assert kept.endswith(" |\n")  # the last kept table row is whole
    assert all(line == row.rstrip("\n") for line in kept.splitlines()[1:])


def test_summary_truncation_keeps_utf8_valid(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    line = "✅ " * 300 + "\n"  # 3-byte characters, so a byte cut would land inside one
    runtime.summary(line * (SUMMARY_LIMIT_BYTES // len(line.encode()) + 10))
    data = (tmp_path / "summary.md").read_bytes()
    assert len(data) <= SUMMARY_LIMIT_BYTES
    data.decode("utf-8")  # strict decoding: raises if a character was cut
    assert NOTICE_MARK.encode() in data


def test_summary_accounts_for_a_pre_existing_summary_file(tmp_path: Path) -> None:
    # An earlier phase in the same step already wrote most of the budget.
    earlier = ("e" * 99 + "\n") * ((SUMMARY_LIMIT_BYTES - 2000) // 100)
    (tmp_path / "summary.md").write_text(earlier)
    runtime, _ = actions_runtime(tmp_path)
    runtime.summary(("n" * 99 + "\n") * 100)  # 10 000 bytes: does not fit in the remaining ~2 KB
    data = (tmp_path / "summary.md").read_bytes()
    assert data.startswith(earlier.encode())
    assert len(data) <= SUMMARY_LIMIT_BYTES
    assert NOTICE_MARK.encode() in data[len(earlier):]


def test_summary_writes_nothing_when_even_the_notice_does_not_fit(tmp_path: Path) -> None:
    full = b"f" * (SUMMARY_LIMIT_BYTES - 10)
    (tmp_path / "summary.md").write_bytes(full)
    runtime, _ = actions_runtime(tmp_path)
    runtime.summary("more than ten bytes\n")
    assert (tmp_path / "summary.md").read_bytes() == full


def test_summary_exactly_at_the_limit_is_not_truncated(tmp_path: Path) -> None:
    runtime, _ = actions_runtime(tmp_path)
    body = "x" * (SUMMARY_LIMIT_BYTES - 1) + "\n"
    runtime.summary(body)
    assert (tmp_path / "summary.md").read_text() == body


def test_summary_io_error_becomes_a_warning_not_an_exception(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path, GITHUB_STEP_SUMMARY=str(tmp_path / "no-such-dir" / "summary.md"))
    runtime.summary("## Hello")
    runtime.summary("## Again")  # the path was dropped after the first failure: no second warning
    log = out.getvalue()
    assert log.count("::warning::could not write the step summary") == 1


def test_summary_file_outside_actions_receives_markdown(tmp_path: Path) -> None:
    out = io.StringIO()
    runtime = Runtime({}, stdout=out, summary_file=str(tmp_path / "s.md"))
    runtime.summary("## Title\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert (tmp_path / "s.md").read_text() == "## Title\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert out.getvalue() == ""


def test_summary_without_a_file_is_printed_as_plain_text() -> None:
    out, err = io.StringIO(), io.StringIO()
    runtime = Runtime({}, stdout=out, stderr=err)
    runtime.summary("## Title\n\n| a | b |\n|---|---|\n| `1` | 2\\* |")
    assert out.getvalue() == "Title\n─────\n\n  a  b\n  ─  ──\n  1  2*\n"
    runtime.summary("### ⛔ refused: `x.y`", refusal=True)
    assert err.getvalue() == "⛔ refused: x.y\n"


# --- annotations, debug, groups ------------------------------------------------------------------------


def test_annotation_escapes_data_and_properties(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path)
    message = "100% sure\r\nsecond line: a, b"
    title = "guard.branch: a,b\n%"
    runtime.annotate("error", message, title=title)
    line = out.getvalue()
    assert line.count("\n") == 1  # one workflow command, one line
    match = re.fullmatch(r"::error title=([^:]*)::(.*)\n", line)
    assert match is not None, line
    assert match.group(1) == "guard.branch%3A a%2Cb%0A%25"
    assert unescape_property(match.group(1)) == title
    assert match.group(2) == "100%25 sure%0D%0Asecond line: a, b"
    assert unescape_data(match.group(2)) == message


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_escaping_round_trips_and_never_leaves_a_line_break(value: str) -> None:
    data = escape_data(value)
    prop = escape_property(value)
    assert "\n" not in data and "\r" not in data
    assert "\n" not in prop and "\r" not in prop and ":" not in prop and "," not in prop
    assert unescape_data(data) == value
    assert unescape_property(prop) == value


def test_annotation_levels_and_plain_text_outside_actions() -> None:
    out = io.StringIO()
    runtime = Runtime({}, stdout=out)
    runtime.annotate("warning", "careful", title="io.exists")
    runtime.annotate("notice", "fyi")
    runtime.debug("invisible outside Actions")
    assert out.getvalue() == "warning [io.exists]: careful\nnotice: fyi\n"


def test_unknown_annotation_level_is_a_programming_error() -> None:
    runtime = Runtime({}, stdout=io.StringIO())
    try:
        runtime.annotate("fatal", "x")
    except ValueError as exc:
        assert str(exc) == "fatal"
    else:
        raise AssertionError("annotate accepted an unknown level")


def test_debug_in_actions(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path)
    runtime.debug("trace\nline")
    assert out.getvalue() == "::debug::trace%0Aline\n"


def test_groups_in_and_outside_actions(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path)
    try:
        with runtime.group("Uploading 3 results"):
            runtime.log("1/3")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    # The group is closed even when its body raises, so later log lines are not folded away.
    assert out.getvalue() == "::group::Uploading 3 results\n1/3\n::endgroup::\n"

    plain = io.StringIO()
    with Runtime({}, stdout=plain).group("Polling"):
        pass
    assert plain.getvalue() == "== Polling\n"


# --- masking ---------------------------------------------------------------------------------------------


def test_add_mask_is_emitted_once_and_values_are_scrubbed_everywhere(tmp_path: Path) -> None:
    secret = "tok-SENTINEL-0123456789"
    runtime, out = actions_runtime(tmp_path)
    runtime.mask(secret)
    runtime.mask(secret)
    runtime.mask("")
    runtime.mask(None)
    runtime.log(f"using {secret}")
    runtime.annotate("error", f"refused {secret}", title=f"t {secret}")
    runtime.debug(secret)
    with runtime.group(f"g {secret}"):
        pass
    runtime.set_output("leak", f"value {secret}")
    runtime.set_output("leak-multi", f"a\n{secret}\nb")
    runtime.summary(f"| {secret} |")
    log = out.getvalue()
    assert log.count("::add-mask::") == 1
    assert log.splitlines()[0] == f"::add-mask::{secret}"
    rest = "\n".join(log.splitlines()[1:])
    assert secret not in rest
    assert "***" in rest
    assert secret not in (tmp_path / "output").read_text()
    assert secret not in (tmp_path / "summary.md").read_text()
    assert runtime.outputs["leak"] == "value ***"


def test_longer_secrets_are_scrubbed_before_their_prefixes() -> None:
    runtime = Runtime({}, stdout=io.StringIO())
    runtime.mask("abc")
    runtime.mask("abcdef")
    assert runtime.scrub("x abcdef y abc") == "x *** y ***"


def test_multi_line_secret_mask_command_is_escaped(tmp_path: Path) -> None:
    runtime, out = actions_runtime(tmp_path)
    runtime.mask("line1\nline2%")
    assert out.getvalue() == "::add-mask::line1%0Aline2%25\n"


def test_mask_outside_actions_prints_nothing_but_still_scrubs() -> None:
    out = io.StringIO()
    runtime = Runtime({}, stdout=out)
    runtime.mask("s3cret")
    runtime.log("s3cret")
    assert out.getvalue() == "***\n"
