"""md: untrusted text reaches a step summary as the characters it is, never as Markdown or HTML.

The judge is cmark-gfm (through cmarkgfm), the renderer GitHub uses for step summaries, with GitHub's
extensions (tables, autolinks, strikethrough, tag filter, task lists) and raw HTML let through (GitHub
sanitises after rendering; letting it through here makes any leaked tag visible). Each generated value
is placed in every context a summary puts untrusted text in, and the rendered HTML must hold exactly
the expected elements and show exactly the value's characters.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from testops_evidence import md, summary

# Pieces that open or close Markdown and HTML constructs, or autolinks; joined with arbitrary text.
HOSTILE_PIECES = [
    "`", "``", "```", "~~~", "*", "**", "_", "__", "~~", "[", "]", "(", ")", "![", "](", "<", ">", "</details>",
    "<details>", "<summary>", "<img src=x onerror=alert(1)>", "<a href='x'>", "<!--", "-->", "<![CDATA[",
    "&amp;", "&#60;", "&lt;", "|", "\\", "\\|", "\n", "\r\n", "\r", "\t", "    ", "  ", " ", "#", "## ", "- ",
    "+ ", "1. ", "1) ", "> ", "=", "---", "***", "[^1]", "[x]: https://evil.example", "[ ] ", "www.",
    "WWW.evil.example", "http://", "https://evil.example/a?b=c", "ftp://x", "mailto:", "xmpp:", "a@b.co",
    "user.name+tag@mail.example", "$", "$$", "\\(", ":smile:", "@mention", "\x00", "\x1b[31m", "\u2028",
    "\u202e", "\u0085", "\ufeff", "é", "😀",
]
HOSTILE = st.lists(st.sampled_from(HOSTILE_PIECES) | st.text(max_size=4), max_size=12).map("".join)
EXTENSIONS = Options.CMARK_OPT_UNSAFE


def render(markdown: str) -> str:
    return str(cmarkgfm.github_flavored_markdown_to_html(markdown, options=EXTENSIONS))


class Elements(HTMLParser):
    """The elements of rendered HTML (start and end tags) and the text of each element by path."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple[str, dict[str, str | None]]] = []
        self.ends: list[str] = []
        self.comments: list[str] = []
        self.stack: list[str] = []
        self.texts: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, dict(attrs)))
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self.ends.append(tag)
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        key = "/".join(self.stack)
        self.texts[key] = self.texts.get(key, "") + data

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_decl(self, decl: str) -> None:
        self.comments.append(decl)

    def unknown_decl(self, data: str) -> None:
        self.comments.append(data)


def elements(markdown: str) -> Elements:
    parser = Elements()
    parser.feed(render(markdown))
    parser.close()
    return parser


def shown(value: str, *, limit: int | None = md.DEFAULT_LIMIT) -> str:
    """What the reader must see: the value (cut at the limit) with controls made visible."""
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + md.ELLIPSIS
    return value.translate(md._CODE_TABLE)


def tags(parsed: Elements) -> list[str]:
    return [tag for tag, _ in parsed.starts]


# --- the contexts a summary puts untrusted text in ----------------------------------------------------------


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(HOSTILE)
@example("</details><img src=x>")
@example("x\n\n</details>\n\n[link](https://evil.example)")
@example("a`b``c")
@example("` leading and trailing `")
@example("  ")
@example("")
def test_code_span_shows_the_value_verbatim_in_every_context(value: str) -> None:
    span = md.code(value)
    assert "\n" not in span and "\r" not in span
    expected = shown(value) or "(empty)"
    for markdown, wrapper in ((span, ["p"]), (f"Intro {span} outro", ["p"]), (f"## Title {span}", ["h2"]),
                              (f"- {span}", ["ul", "li"]), (f"**{span}**", ["p", "strong"])):
        parsed = elements(markdown + "\n")
        if value:
            assert tags(parsed) == [*wrapper, "code"], (markdown, render(markdown))
            assert parsed.texts["/".join([*wrapper, "code"])] == expected
        assert not parsed.comments
    # In a table cell: GFM splits rows at pipes inside code spans too.
    row = elements(f"| h | k |\n|---|---|\n| {md.cell(span)} | end |\n")
    if value:
        assert tags(row) == ["table", "thead", "tr", "th", "th", "tbody", "tr", "td", "code", "td"]
        assert row.texts["table/tbody/tr/td/code"] == expected
    assert row.texts["table/tbody/tr/td"].strip() == "end" if value else True


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(HOSTILE)
@example("www.evil.example and https://evil.example/x and a@b.co and mailto:a@b.co")
@example("1. item")
@example("    indented")
@example("   ")
@example("# heading")
@example("---")
@example("=")
@example("[x]: https://evil.example")
@example("trailing  ")
def test_text_shows_the_value_as_plain_text_in_every_context(value: str) -> None:
    escaped = md.text(value)
    assert "\n" not in escaped and "\r" not in escaped
    expected = shown(value)
    # (Markdown, the elements it must render to, the element holding the text, the text around the value)
    contexts = [
        (f"Intro {escaped} outro", ["p"], "p", "Intro ", " outro"),
        (f"## Title {escaped} end", ["h2"], "h2", "Title ", " end"),
        (f"**Why:** {escaped}.", ["p", "strong"], "p", " ", "."),
        (f"| h | k |\n|---|---|\n| {md.cell(value)} | end |", ["table", "thead", "tr", "th", "th", "tbody", "tr",
                                                               "td", "td"], "table/tbody/tr/td", "", "end"),
    ]
    if value:  # alone, an empty value renders as nothing
        contexts += [
            (escaped, ["p"], "p", "", ""),
            (f"- {escaped}", ["ul", "li"], "ul/li", "", ""),
            (f"### ⛔ refused\n\n{escaped}\n\nExit code 3.", ["h3", "p", "p"], "p", "", "Exit code 3."),
        ]
    for markdown, wanted, where, prefix, suffix in contexts:
        parsed = elements(markdown + "\n")
        assert tags(parsed) == wanted, (markdown, render(markdown))
        assert not parsed.comments
        # The word joiner after "@" is the one invisible addition (it stops e-mail autolinks).
        assert parsed.texts.get(where, "").replace("@\u2060", "@") == prefix + expected + suffix, (
            markdown, render(markdown))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(label=HOSTILE, url=st.sampled_from([
    "https://testops.example/launch/7", "http://[::1]:8080/a b", "https://x.example/p(a)r<e>n|t`s\"'",
    "https://x.example/é?q=`x`", "javascript:alert(1)", "data:text/html,x", "", "//evil.example", "HTTPS://X.EXAMPLE/"]))
def test_link_is_one_link_to_an_http_url_labelled_with_text(label: str, url: str) -> None:
    made = md.link(label, url)
    parsed = elements(f"| h |\n|---|\n| {md.cell(made)} |\n")
    anchors = [attrs for tag, attrs in parsed.starts if tag == "a"]
    if url.lower().startswith(("http://", "https://")):
        assert len(anchors) == 1 and anchors[0]["href"] is not None
        assert html.unescape(anchors[0]["href"]).lower().startswith(url[:7].lower())
        assert " " not in anchors[0]["href"]
    else:
        assert anchors == []
    assert "img" not in tags(parsed)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(HOSTILE, HOSTILE, HOSTILE), min_size=1, max_size=4))
def test_a_table_of_untrusted_cells_keeps_its_shape(rows: list[tuple[str, str, str]]) -> None:
    made = md.table(("as text", "as code", "as link"), [(a, md.code(b), md.link(c, "https://x.example/")) for a, b, c
                                                       in rows])
    parsed = elements(made)
    assert tags(parsed).count("tr") == len(rows) + 1
    assert tags(parsed).count("td") == 3 * len(rows)
    assert tags(parsed).count("a") == len(rows)
    assert set(tags(parsed)) <= {"table", "thead", "tbody", "tr", "th", "td", "code", "a"}


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(HOSTILE, HOSTILE)
def test_nothing_closes_a_details_block_or_opens_a_tag(first: str, second: str) -> None:
    body = (f"<details><summary>Cases</summary>\n\n{md.text(first)}\n\n{md.table(('a',), [(second,)])}\n"
            f"{md.code(second)}\n\n</details>\n\nAfter.\n")
    parsed = elements(body)
    assert parsed.ends.count("details") == 1 and tags(parsed).count("details") == 1
    assert parsed.ends[-2:] == ["details", "p"]
    assert not {"a", "img", "script", "iframe", "em", "strong", "del", "h1", "h2", "ul", "ol", "pre",
                "blockquote", "hr", "input"} & set(tags(parsed))


# --- specific behaviours --------------------------------------------------------------------------------


def test_code_fence_outgrows_the_longest_backtick_run() -> None:
    assert md.code("a``b") == "```a``b```"
    assert md.code("`x`") == "`` `x` ``"
    assert md.code("") == "(empty)"


def test_values_are_capped_with_a_visible_cut() -> None:
    assert md.code("x" * 1000) == "`" + "x" * 299 + "…`"
    assert md.text("y" * 10, limit=5) == "yyyy…"
    assert md.code("z" * 1000, limit=None) == "`" + "z" * 1000 + "`"


def test_line_breaks_and_controls_become_visible_pictures() -> None:
    assert md.code("export\n# injected") == "`export␤# injected`"
    assert md.text("a\rb\x00c\u202ed") == "a␍b␀c\ufffdd"


def test_cells_keep_markdown_and_escape_text() -> None:
    assert md.cell(md.code("a|b")) == "`a\\|b`"
    assert md.cell("a|b") == "a\\\\|b"
    assert md.cell(None) == "—" and md.cell(True) == "yes" and md.cell(3) == "3"
    assert md.cell({"k": "`v`"}) == "``{\"k\":\"`v`\"}``"


def test_link_falls_back_to_its_label_for_anything_but_http() -> None:
    assert md.link("x", "javascript:alert(1)") == "x"
    assert md.link("#7", "https://h.example/launch/7") == "[\\#7](https://h.example/launch/7)"
    assert md.link(md.code("r"), "https://h.example/a b(c)") == "[`r`](https://h.example/a%20b%28c%29)"


@pytest.mark.parametrize("mode", ["export\n## injected\n<img src=x>", "`x`", "a|b"])
def test_the_phase_and_refusal_headings_show_the_mode_as_code(mode: str) -> None:
    from testops_evidence.errors import Refusal

    heading = summary.render("phase", mode=md.code(mode), headline=md.text("h"))
    parsed = elements(heading)
    assert tags(parsed) == ["h2", "code", "p"]
    section = summary.refusal_section(Refusal("mode.unknown", f"mode {mode!r} is not a phase"), mode)
    parsed = elements(section)
    assert "img" not in tags(parsed) and tags(parsed).count("h2") == 0


@given(st.lists(st.tuples(HOSTILE, HOSTILE), max_size=12), st.integers(min_value=0, max_value=8))
def test_a_table_told_of_rows_left_out_reads_as_one_given_them_all(rows: list[tuple[str, str]], limit: int) -> None:
    # export renders only the rows a summary table shows and says how many more there were
    assert md.table(("a", "b"), rows[:limit], limit=limit, more=max(len(rows) - limit, 0)) == \
        md.table(("a", "b"), rows, limit=limit)
