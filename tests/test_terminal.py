"""A step summary at a terminal: what md makes of untrusted text reads back as that text, without Markdown."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from testops_evidence import md, summary
from testops_evidence.terminal import plain

# Printable text without line breaks or controls (md shows those as Control Pictures, tested in test_md.py).
printable = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), max_size=80)


@settings(max_examples=300, deadline=None)
@given(printable)
def test_text_reads_back_as_itself(value: str) -> None:
    shown = plain(f"Message: {md.text(value, limit=None)}\n")
    assert shown.split() == f"Message: {value}".split()


@settings(max_examples=300, deadline=None)
@given(printable.filter(lambda v: v.strip() != ""))
def test_a_code_span_reads_back_as_its_value(value: str) -> None:
    assert plain(f"{md.code(value, limit=None)}\n").strip() == value.strip()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(printable, printable), min_size=1, max_size=5))
def test_a_table_keeps_every_cell_on_its_row(rows: list[tuple[str, str]]) -> None:
    shown = plain(summary.table(("key", "note"), rows)).splitlines()
    assert shown[0].split() == ["key", "note"] and set(shown[1].replace(" ", "")) == {"─"}
    body = [line for line in shown[2:] if line]
    assert len(body) == len(rows)
    for line, (key, note) in zip(body, rows, strict=True):
        assert line.split() == f"{key} {note}".split()


def test_a_summary_becomes_plain_text() -> None:
    markdown = (f"## testops-evidence · {md.code('export')}\n\n✅ Exported **3** results; "
                f"{md.link('run 7', 'https://github.com/o/r/actions/runs/7')}.\n\n"
                "<details><summary>digests</summary>\n\n"
                + summary.table(("file", "sha256"), [(md.code("a|b.json"), md.code("ab" * 4))])
                + "\n</details>\n")
    assert plain(markdown) == (
        "testops-evidence · export\n─────────────────────────\n\n"
        "✅ Exported 3 results; run 7 <https://github.com/o/r/actions/runs/7>.\n\n"
        "digests\n\n"
        "  file      sha256\n  ────────  ────────\n  a|b.json  abababab\n")
