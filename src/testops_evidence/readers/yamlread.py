"""A strict reader of the YAML that configuration files use, with a budget that bites while it reads.

A contract is untrusted (a fork pull request can change it) and ``guard`` reads it before it admits
anything, so reading it must be cheap whatever the file holds: a general YAML loader builds the whole
document before any limit applies (a 4 MB ``x: [a,a,…]`` took 90 s and 1.2 GB in ruamel.yaml's pure
Python parser), and its pure-Python speed (about 100 KB/s) made a 10,000-case contract cost 25 s.

This reader handles the YAML 1.2 that configuration files are written in, and refuses the rest with a
line, a column and a reason:

* block mappings and sequences (also a sequence at its key's indentation, and ``- key: value`` items),
  flow ``[…]`` and ``{…}`` collections over any number of lines, comments, ``---`` and ``...``;
* plain, single- and double-quoted scalars (all escapes, line folding), literal ``|`` and folded ``>``
  block scalars (chomping ``-``/``+``, indentation indicators);
* anchors and aliases, each alias counted with every value it stands for;
* YAML 1.2 core schema: ``null``/``~``/empty, ``true``/``false`` (``yes``, ``on``, ``y`` are strings),
  decimal, ``0o`` octal and ``0x`` hex integers (within 64 bits), floats (``.inf`` and ``.nan`` are
  refused: JSON has neither); timestamps stay strings. Keys are the text written.

Refused, each with its own reason: tags (``!x``, ``!!str``), directives other than ``%YAML 1.2``,
several documents, complex keys (``? ``), merge keys (``<<``, YAML 1.1), anchors on keys, a mapping
inside a flow sequence (``[a: 1]``), tabs in indentation, duplicate keys, control characters.

**The budget** bites as the text is read: at most :data:`MAX_VALUES` values (aliases count what they
expand to), :data:`MAX_DEPTH` levels, :data:`MAX_SCALAR` characters per scalar,
:data:`MAX_ALIASES` aliases and :data:`MAX_ALIASED` characters repeated by aliases. Memory stays
proportional to the input (no alias is copied: the value is shared; the characters an alias repeats are
bounded because the contract's digest writes the document out in full), and time is linear in the input: any file under the contract's 4 MiB cap is read or refused
in well under a second (benchmarks/yaml_load.py).

:func:`load` returns the value or raises :class:`YAMLProblem`; :func:`problems` lists every problem it
can (up to a cap: duplicate keys and scalar values do not stop the reading, a syntax error does);
:func:`positions` maps each JSON pointer to its line and column, for errors found later (the schema).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, NoReturn

from testops_evidence.readers.strictjson import INT_MAX, INT_MIN, pointer_of

MAX_VALUES = 300_000  # a 10,000-case contract holds about 150,000; 4 MiB of cases, about 250,000
MAX_DEPTH = 64
MAX_SCALAR = 64 * 1024
MAX_ALIASES = 10_000
# The characters all aliases together repeat: one alias of a long value is cheap to write and costly to expand
# (300 aliases of a 64 KiB value made a 70 KB contract a 19 MiB document). A contract that aliases a 300-character
# check map for each of 10,000 cases repeats 3 million.
MAX_ALIASED = 4 * 1024 * 1024
MAX_KEY = 1024  # YAML's own limit on an implicit key
MAX_PROBLEMS = 20

_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))
_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(inf|Inf|INF)\Z|\.(nan|NaN|NAN)\Z")
_ANCHOR = re.compile(r"[^\s,\[\]{}]+")
# Characters YAML does not allow in a stream (c-printable), besides tab, LF and CR.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028",
            "P": "\u2029"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_FLOW_END = ",[]{}"
# Where a plain scalar inside a flow collection ends: an indicator, ": " (or ":" before an indicator or
# the end), or a comment.
# A flow sequence item that is one plain word (no indicator to start it, no quote, colon or comment in it)
# followed by the , or ] that ends it.
_FLOW_SIMPLE_ITEM = re.compile(r"[ \t]*([^\s,\[\]{}#&*!|>'\"%@`?:\-][^\s,\[\]{}:#'\"]{0,200})[ \t]*([,\]])")
_FLOW_PLAIN_END = re.compile(r"[,\[\]{}]|:(?=[ \t,\[\]{}]|$)|(?<=[ \t])#")


# A value that starts with one of these (or with "- ", "? ", ": ") is not a simple one-line plain scalar.
_NOT_SIMPLE = frozenset("&*!|>'\"[{#%@`,]}")


class YAMLProblem(ValueError):
    """One reason a text is not YAML this reader accepts, with where it is (1-based line and column)."""

    def __init__(self, message: str, *, line: int, column: int, pointer: str = "/") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.pointer = pointer

    @property
    def where(self) -> str:
        return f"line {self.line}, column {self.column}"

    def __str__(self) -> str:
        return f"{self.message} at {self.where}"


class _Stop(Exception):
    pass


class _Anchor:
    __slots__ = ("size", "value")

    def __init__(self, value: Any, size: int) -> None:
        self.value = value
        self.size = size


def load(text: str) -> Any:
    """The document's value; :class:`YAMLProblem` for the first problem."""
    value, found = read(text, limit=1)
    if found:
        raise found[0]
    return value


def read(text: str, *, limit: int = MAX_PROBLEMS) -> tuple[Any, list[YAMLProblem]]:
    """``(value, problems)`` in one reading: the value is meaningful only when there is no problem."""
    reader = _Reader(text, limit=limit)
    value = None
    with contextlib.suppress(_Stop):
        value = reader.document()
    return value, reader.found


def problems(text: str, *, limit: int = MAX_PROBLEMS) -> list[YAMLProblem]:
    """Every problem found (up to ``limit``); empty when :func:`load` would return a value."""
    reader = _Reader(text, limit=limit)
    with contextlib.suppress(_Stop):
        reader.document()
    return reader.found


def positions(text: str) -> dict[str, tuple[int, int]]:
    """``{json pointer: (line, column)}`` of every value (RFC 6901 pointers: the root is ``""``)."""
    reader = _Reader(text, limit=1, where={})
    with contextlib.suppress(_Stop):
        reader.document()
    assert reader.where is not None
    return reader.where


class _Reader:
    def __init__(self, text: str, *, limit: int, where: dict[str, tuple[int, int]] | None = None) -> None:
        if text.startswith("\ufeff"):
            text = text[1:]
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if len(self.lines) > 1 and self.lines[-1] == "":
            self.lines.pop()  # the text's final line break ends the last line; it starts no new one
        self.count = len(self.lines)
        self.row = 0
        self.limit = limit
        self.found: list[YAMLProblem] = []
        self.where = where
        self.path: list[Any] = []
        self.values = 0
        self.aliases = 0
        self.aliased = 0  # characters the aliases so far repeat
        self.weights: dict[int, int] = {}  # id of an anchored container (alive in the document) -> its weight
        self.anchors: dict[str, _Anchor] = {}
        self.text = text
        # significant() per line, computed once: the block reader asks about each line several times.
        # Each line's indentation, -1 when it holds nothing (blank, a comment), -2 until asked: the block
        # reader asks about each line several times. Ints only: a 900,000-line file costs 7 MB here.
        self.cache: list[int] = [-2] * self.count
        self.last: Any = None

    def set_line(self, row: int, text: str) -> None:
        self.lines[row] = text
        self.cache[row] = -2

    # --- problems -------------------------------------------------------------------------------------

    def problem(self, message: str, row: int, col: int, *, fatal: bool = True, path: list[Any] | None = None) -> None:
        self.found.append(YAMLProblem(message, line=row + 1, column=col + 1,
                                      pointer=pointer_of(self.path if path is None else path)))
        if fatal or len(self.found) >= self.limit:
            raise _Stop

    def fail(self, message: str, row: int, col: int) -> NoReturn:
        self.problem(message, row, col)
        raise AssertionError("unreachable")

    def count_values(self, n: int, row: int, col: int) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            self.fail(f"more than {MAX_VALUES:,} values (aliases count every value they repeat)", row, col)

    def count_alias(self, target: _Anchor, row: int, col: int) -> None:
        """An alias: one more of :data:`MAX_ALIASES`, every value it repeats, and every character (the
        document is shared in memory, but its digest and its compiled form are written out in full)."""
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            self.fail(f"more than {MAX_ALIASES:,} aliases", row, col)
        self.count_values(target.size, row, col)
        self.aliased += self.weight(target.value)
        if self.aliased > MAX_ALIASED:
            self.fail(f"aliases that repeat more than {MAX_ALIASED:,} characters", row, col)

    def weight(self, value: Any) -> int:
        """The characters a value is written with (keys and strings; 1 for any other scalar), each container's
        once: an anchored node is complete, and a node under several aliases is weighed once."""
        if isinstance(value, str):
            return len(value)
        if not isinstance(value, (dict, list)):
            return 1
        known = self.weights.get(id(value))
        if known is None:
            known = (sum(len(key) + self.weight(item) for key, item in value.items()) if isinstance(value, dict)
                     else sum(self.weight(item) for item in value))
            self.weights[id(value)] = known
        return known

    def mark(self, row: int, col: int) -> None:
        if self.where is not None:
            self.where[pointer_of(self.path) if self.path else ""] = (row + 1, col + 1)

    # --- lines ----------------------------------------------------------------------------------------

    def significant(self, row: int) -> tuple[int, str] | None:
        """``(indent, content)`` of a line that holds something (not blank, not only a comment)."""
        indent = self.cache[row]
        if indent == -2:
            indent = self.cache[row] = self._indent(row)
        return None if indent < 0 else (indent, self.lines[row][indent:])

    def indent_of(self, row: int) -> int:
        """The line's indentation, or -1 when it holds nothing."""
        indent = self.cache[row]
        if indent == -2:
            indent = self.cache[row] = self._indent(row)
        return indent

    def _indent(self, row: int) -> int:
        line = self.lines[row]
        content = line.lstrip(" ")
        if not content or content[0] == "#":
            return -1
        if content[0] == "\t":
            stripped = content.lstrip(" \t")
            if not stripped or stripped[0] == "#":
                return -1
            self.fail("a tab in the indentation (YAML indents with spaces only)", row, len(line) - len(content))
        return len(line) - len(content)

    def next_significant(self, row: int) -> int:
        cache, count = self.cache, self.count
        while row < count:
            indent = cache[row]
            if indent == -2:
                indent = cache[row] = self._indent(row)
            if indent >= 0:
                return row
            row += 1
        return row

    # --- document -------------------------------------------------------------------------------------

    def document(self) -> Any:
        match = _FORBIDDEN.search(self.text)
        if match is not None:
            head = self.text[: match.start()]
            row = head.count("\n")
            self.fail(f"a control character U+{ord(match.group()):04X} (not allowed in YAML text)", row,
                      match.start() - (head.rfind("\n") + 1))
        row = self.next_significant(0)
        directives = 0
        while row < self.count and self.lines[row].startswith("%"):
            if self.lines[row].split("#")[0].split() not in (["%YAML", "1.2"], ["%YAML", "1.2.2"]):
                self.fail("a directive other than %YAML 1.2", row, 0)
            directives += 1
            if directives > 1:
                self.fail("the %YAML directive is given twice", row, 0)
            row = self.next_significant(row + 1)
        if directives and not (row < self.count and _is_marker(self.lines[row], "---")):
            self.fail("a directive must be followed by the --- marker", min(row, self.count - 1), 0)
        if row < self.count and _is_marker(self.lines[row], "---"):
            line = self.lines[row]
            rest = line[3:].lstrip(" \t")
            if rest and not rest.startswith("#"):
                # "--- value" on the marker line: read it as the document's first line
                if rest[0] not in "\"'" and _colon(rest) >= 0 and not rest.startswith(("[", "{")):
                    self.fail("a mapping cannot start on the --- line", row, 4)
                self.set_line(row, " " * (len(line) - len(rest)) + rest)
            else:
                row = self.next_significant(row + 1)
        self.row = row
        if row >= self.count or _is_marker(self.lines[row], "..."):
            value = None
            self.mark(row if row < self.count else max(self.count - 1, 0), 0)
        else:
            value = self.block_node(-1, row)
        row = self.next_significant(self.row)
        if row < self.count and _is_marker(self.lines[row], "..."):
            rest = self.lines[row][3:].lstrip(" \t")
            if rest and not rest.startswith("#"):
                self.fail("text after the ... marker", row, len(self.lines[row]) - len(rest))
            row = self.next_significant(row + 1)
        if row < self.count:
            if _is_marker(self.lines[row], "---"):
                self.fail("a second document (a contract is one document)", row, 0)
            sig = self.significant(row)
            self.fail("more text after the document's value (check the indentation)", row, sig[0] if sig else 0)
        return value

    # --- block nodes ----------------------------------------------------------------------------------

    def block_node(self, parent: int, row: int) -> Any:
        """The node starting at significant line ``row``, indented more than ``parent``."""
        if len(self.path) >= MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels", row, 0)
        sig = self.significant(row)
        assert sig is not None
        indent, content = sig
        if _is_marker(self.lines[row], "---") or _is_marker(self.lines[row], "..."):
            self.fail("a document marker where a value is expected", row, 0)
        if content[0] == "!":
            self.fail("a tag (YAML tags are not supported; write the plain value)", row, indent)
        if content[0] == "&":
            match = _ANCHOR.match(content, 1)
            if match is None:
                self.fail("an anchor without a name", row, indent)
            assert match is not None
            rest = content[match.end():].lstrip(" \t")
            if rest.startswith("-") and (len(rest) == 1 or rest[1] in " \t"):
                self.fail("an anchor before a sequence item on the same line", row, indent)
            if not rest or rest[0] == "#":
                # "&name" alone on its line: it anchors the node on the lines below
                below = self.next_significant(row + 1)
                if below >= self.count:
                    self.fail("an anchor with no value after it", row, indent)
                before = self.values
                value = self.block_node(parent, below)
                return self.anchored(match.group(), value, self.values - before)
        if content[0] == "-" and (len(content) == 1 or content[1] in " \t"):
            return self.block_sequence(indent, row)
        if self.mapping_key(row, indent, content) is not None:
            return self.block_mapping(indent, row)
        return self.inline_value(parent, row, indent)

    def mapping_key(self, row: int, indent: int, content: str) -> tuple[str, int] | None:
        """``(key, column after the colon)`` when the line starts a ``key: …`` entry, else None."""
        first = content[0]
        if first == "?" and (len(content) == 1 or content[1] in " \t"):
            self.fail("a complex key (? …); write the key as a plain or quoted scalar", row, indent)
        if first in "\"'":
            end = _quoted_end(content, first)
            if end < 0:
                return None
            after = content[end + 1:].lstrip(" \t")
            if not after.startswith(":") or (len(after) > 1 and after[1] not in " \t"):
                return None
            key = self.quoted_text(content[: end + 1], row, indent)
            return key, indent + len(content) - len(after) + 1
        if first in "[{&*!|>%@`#,":
            if first == "&" and _colon(content) >= 0:
                self.fail("an anchor on a key (anchor the value instead)", row, indent)
            if first == "!" and _colon(content) >= 0:
                self.fail("a tag (YAML tags are not supported; write the plain value)", row, indent)
            return None
        colon = _colon(content)
        if colon < 0:
            return None
        comment = content.find(" #")
        if 0 <= comment < colon:
            return None
        key = content[:colon].rstrip(" \t")
        if len(key) > MAX_KEY:
            self.fail(f"a key longer than {MAX_KEY} characters", row, indent)
        return key, indent + colon + 1

    def block_mapping(self, indent: int, row: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, int] = {}  # key -> the row it was first given on
        if len(self.path) >= MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels", row, indent)
        self.count_values(1, row, indent)
        self.mark(row, indent)
        count, path, lines = self.count, self.path, self.lines
        while True:
            line_indent = self.indent_of(row)
            content = lines[row][line_indent:]
            entry = self.mapping_key(row, line_indent, content)
            if entry is None:
                self.fail("expected a `key: value` entry of the mapping here (check the indentation)", row,
                          line_indent)
            key, after = entry
            if key == "<<":
                self.fail("a merge key (<<, YAML 1.1); write the keys out", row, line_indent)
            path.append(key)
            if key in seen:
                first = seen[key]
                self.problem(f"the key {key!r} appears twice in one mapping (first at line {first + 1}, column "
                             f"{line_indent + 1})", row, line_indent, fatal=False)
            else:
                seen[key] = row
            # The common case: `key: value` on one line, the next entry below it.
            below = self.simple_value(indent, row, after)
            if below < 0:
                result[key] = self.value_after(indent, row, after, sequence_may_align=True)
                row = self.next_significant(self.row)
            else:
                result[key] = self.last
                row = below
            path.pop()
            if row >= count:
                break
            next_indent = self.indent_of(row)
            if next_indent != indent:
                if next_indent < indent:
                    break
                self.fail("more indented than the mapping's keys (a missing `key:`, or a stray indent?)", row,
                          next_indent)
            line = lines[row]
            if indent == 0 and (_is_marker(line, "---") or _is_marker(line, "...")):
                break
            if line[indent] == "-" and (len(line) == indent + 1 or line[indent + 1] in " \t"):
                self.fail("a sequence item where a `key: value` entry of the mapping is expected", row, indent)
        self.row = row
        return result

    def simple_value(self, indent: int, row: int, after: int) -> int:
        """For ``key: value`` with a one-line plain scalar value (most values): sets ``self.last`` to the
        value and returns the next significant row; else -1 (the general path reads the value)."""
        line = self.lines[row]
        stripped = line[after:].lstrip(" \t")
        if len(stripped) == len(line) - after or not stripped or stripped[0] in _NOT_SIMPLE or (
                stripped[0] in "-?:" and (len(stripped) == 1 or stripped[1] in " \t")):
            return -1
        col = len(line) - len(stripped)
        text = _plain_on_line(line, col)
        if text is None:
            return -1
        below = self.next_significant(row + 1)
        if below < self.count and self.indent_of(below) > indent:
            return -1  # a continuation line (or an error the general path reports)
        if len(text) > MAX_SCALAR:
            self.fail(f"a value longer than {MAX_SCALAR:,} characters", row, col)
        self.values += 1
        if self.values > MAX_VALUES:
            self.count_values(0, row, col)
        if self.where is not None:
            self.mark(row, col)
        self.last = _resolve(text, self, row, col)
        self.row = row + 1
        return below

    def block_sequence(self, indent: int, row: int) -> list[Any]:
        result: list[Any] = []
        if len(self.path) >= MAX_DEPTH:
            self.fail(f"nested deeper than {MAX_DEPTH} levels", row, indent)
        self.count_values(1, row, indent)
        self.mark(row, indent)
        while True:
            self.path.append(len(result))
            below = self.simple_value(indent, row, indent + 1)
            if below < 0:
                result.append(self.value_after(indent, row, indent + 1, sequence_may_align=False, item=True))
                row = self.next_significant(self.row)
            else:
                result.append(self.last)
                row = below
            self.path.pop()
            if row >= self.count:
                break
            sig = self.significant(row)
            assert sig is not None
            if sig[0] < indent or _is_marker(self.lines[row], "---") or _is_marker(self.lines[row], "..."):
                break
            if sig[0] > indent:
                self.fail("more indented than the sequence's items", row, sig[0])
            if not (sig[1][0] == "-" and (len(sig[1]) == 1 or sig[1][1] in " \t")):
                break  # a mapping key at the indentation of an aligned sequence ends it
        self.row = row
        return result

    def value_after(self, indent: int, row: int, col: int, *, sequence_may_align: bool, item: bool = False) -> Any:
        """The value that follows ``key:`` or ``-`` at (``row``, ``col``); it may go on below."""
        line = self.lines[row]
        rest = line[col:]
        stripped = rest.lstrip(" \t")
        start = len(line) - len(stripped)
        anchor = None
        if stripped.startswith("&"):
            match = _ANCHOR.match(stripped, 1)
            if match is None:
                self.fail("an anchor without a name", row, start)
            anchor = match.group()
            stripped = stripped[match.end():].lstrip(" \t")
            start = len(line) - len(stripped)
            if stripped.startswith("*"):
                self.fail("an anchor on an alias", row, start)
            if stripped.startswith("-") and (len(stripped) == 1 or stripped[1] in " \t"):
                self.fail("an anchor before a sequence item on the same line", row, start)
        if stripped.startswith("!"):
            self.fail("a tag (YAML tags are not supported; write the plain value)", row, start)
        if not stripped or stripped[0] == "#":
            # The value is on the following lines, or empty (null).
            below = self.next_significant(row + 1)
            value: Any = None
            if below < self.count and not _is_marker(self.lines[below], "---") and not _is_marker(
                    self.lines[below], "..."):
                sig = self.significant(below)
                assert sig is not None
                child_indent = sig[0]
                is_item = sig[1][0] == "-" and (len(sig[1]) == 1 or sig[1][1] in " \t")
                if child_indent > indent or (sequence_may_align and child_indent == indent and is_item):
                    before = self.values
                    value = self.block_node(indent, below)
                    return self.anchored(anchor, value, self.values - before)
            self.count_values(1, row, start)
            self.mark(row, start)
            self.row = row + 1
            return self.anchored(anchor, value, 1)
        if item and stripped[0] == "-" and (len(stripped) == 1 or stripped[1] in " \t") and anchor is None:
            # "- - a": a compact nested sequence; its items are indented at the inner dash.
            if "\t" in line[col:start]:
                self.fail("a tab before a nested sequence item (indentation is spaces only)", row, col)
            self.set_line(row, " " * start + stripped)
            return self.block_sequence(start, row)
        if item and anchor is None and self.mapping_key(row, start, stripped) is not None:
            # "- key: value": a compact mapping whose keys are indented at the first key.
            self.set_line(row, " " * start + stripped)
            return self.block_mapping(start, row)
        if not item and self.mapping_key(row, start, stripped) is not None and stripped[0] not in "\"'":
            self.fail("a `key: value` on the same line as its parent key (nest it on the next line, or quote "
                      "the value)", row, start)
        before = self.values
        value = self.inline_value(indent, row, start)
        return self.anchored(anchor, value, self.values - before)

    def anchored(self, anchor: str | None, value: Any, size: int) -> Any:
        if anchor is not None:
            self.anchors[anchor] = _Anchor(value, max(size, 1))
        return value

    # --- inline values ----------------------------------------------------------------------------------

    def inline_value(self, parent: int, row: int, col: int) -> Any:
        """A scalar, alias or flow collection starting at (``row``, ``col``); may continue on later lines
        indented more than ``parent``. Sets ``self.row`` to the line after it."""
        line = self.lines[row]
        first = line[col]
        if first == "*":
            match = _ANCHOR.match(line, col + 1)
            if match is None:
                self.fail("an alias without a name", row, col)
            name = match.group()
            target = self.anchors.get(name)
            if target is None:
                self.fail(f"the alias *{name} names no anchor defined before it", row, col)
            self.count_alias(target, row, col)
            self.mark(row, col)
            self.end_of_line(row, match.end(), "after an alias")
            self.row = row + 1
            return target.value
        if first in "[{":
            return self.flow(parent, row, col)
        if first in "\"'":
            return self.quoted(parent, row, col)
        if first in "|>":
            return self.block_scalar(parent, row, col)
        if first == "!":
            self.fail("a tag (YAML tags are not supported; write the plain value)", row, col)
        if first in "-?:" and (col + 1 >= len(line) or line[col + 1] in " \t"):
            self.fail(f"expected a value, found {first!r} (a sequence item must start its own line)", row, col)
        if first in "%@`":
            self.fail(f"a plain value cannot start with {first!r} (quote it)", row, col)
        if first in ",]}":
            self.fail(f"unexpected {first!r}", row, col)
        return self.plain(parent, row, col)

    def end_of_line(self, row: int, col: int, what: str) -> None:
        rest = self.lines[row][col:]
        stripped = rest.lstrip(" \t")
        if stripped and not (stripped[0] == "#" and (len(stripped) != len(rest) or col == 0)):
            self.fail(f"unexpected text {what}", row, len(self.lines[row]) - len(stripped))

    def scalar(self, value: str, row: int, col: int) -> None:
        if len(value) > MAX_SCALAR:
            self.fail(f"a value longer than {MAX_SCALAR:,} characters", row, col)
        self.count_values(1, row, col)
        self.mark(row, col)

    def plain(self, parent: int, row: int, col: int) -> Any:
        line = self.lines[row]
        text = _plain_on_line(line, col)
        if text is None:
            self.fail("a colon followed by a space inside a plain value (quote the value)", row,
                      line.find(": ", col))
        pieces = [text]
        last = row
        below = row + 1
        commented = _has_comment(line, col)
        # Continuation lines: indented more than the parent, not a comment, not a new entry.
        blank_run = 0
        while below < self.count:
            raw = self.lines[below]
            content = raw.lstrip(" ")
            if not content.strip(" \t"):
                blank_run += 1
                below += 1
                continue
            indent = len(raw) - len(content)
            if indent <= parent or content[0] == "#" or _is_marker(raw, "---") or _is_marker(raw, "..."):
                break
            if commented:
                self.fail("a plain value goes on after a comment (a comment ends it)", below, indent)
            content = content.lstrip(" \t")
            start = len(raw) - len(content)
            more = _plain_on_line(raw, start)
            if more is None or (_colon(content) >= 0):
                self.fail("a `key: value` inside a multi-line plain value (check the indentation)", below, indent)
            commented = _has_comment(raw, start)
            pieces.append("\n" * blank_run if blank_run else " ")
            pieces.append(more)
            blank_run = 0
            last = below
            below += 1
            if len(pieces) > 2 * MAX_SCALAR:
                break
        joined = "".join(pieces)
        self.scalar(joined, row, col)
        self.row = last + 1
        if last == row:
            return _resolve(joined, self, row, col)
        return joined

    def quoted(self, parent: int, row: int, col: int) -> str:
        quote = self.lines[row][col]
        # Gather lines until the closing quote (double-quoted text may escape it).
        chunks: list[str] = []
        cur, start = row, col + 1
        size = 0
        while True:
            line = self.lines[cur]
            end = _quoted_end(line, quote, start=col + 1 if cur == row else 0)
            if end >= 0:
                chunks.append(line[start:end])
                break
            chunks.append(line[start:])
            size += len(line)
            if size > MAX_SCALAR + 1024:
                self.fail(f"a value longer than {MAX_SCALAR:,} characters", row, col)
            cur += 1
            start = 0
            if cur >= self.count:
                self.fail("a quoted value is not closed", row, col)
            nxt = self.lines[cur]
            if nxt.strip() and (len(nxt) - len(nxt.lstrip(" ")) <= parent):
                self.fail("a quoted value is not closed before the next entry", row, col)
            if _is_marker(nxt, "---") or _is_marker(nxt, "..."):
                self.fail("a quoted value is not closed before the document marker", row, col)
        text = _fold_quoted(chunks, quote, self, row, col)
        self.scalar(text, row, col)
        self.end_of_line(cur, end + 1, "after a quoted value")
        self.row = cur + 1
        return text

    def quoted_text(self, token: str, row: int, col: int) -> str:
        return _fold_quoted([token[1:-1]], token[0], self, row, col)

    def block_scalar(self, parent: int, row: int, col: int) -> str:
        line = self.lines[row]
        style = line[col]
        header = line[col + 1:].split(" #")[0].rstrip(" \t")
        chomp, explicit = "clip", None
        for char in header:
            if char == "-" and chomp == "clip":
                chomp = "strip"
            elif char == "+" and chomp == "clip":
                chomp = "keep"
            elif char in "123456789" and explicit is None:
                explicit = int(char)
            else:
                self.fail(f"an unknown block scalar indicator {char!r}", row, col + 1)
        body: list[str] = []
        below = row + 1
        indent = parent + explicit if explicit is not None and parent >= 0 else explicit
        if explicit is not None and parent < 0:
            indent = explicit
        # Without an indicator, the first non-empty line sets the indentation.
        if indent is None:
            probe = below
            leading_max = 0
            while probe < self.count and not self.lines[probe].strip(" "):
                leading_max = max(leading_max, len(self.lines[probe]))
                probe += 1
            if probe < self.count:
                found = len(self.lines[probe]) - len(self.lines[probe].lstrip(" "))
                indent = found if found > parent else parent + 1
                if leading_max > indent and found > parent:
                    self.fail("a leading empty line is indented more than the block's first line", row + 1, 0)
            else:
                indent = max(leading_max, parent + 1)
        size = 0
        while below < self.count:
            raw = self.lines[below]
            if raw.strip(" ") == "":
                # Spaces past the indentation are the line's content; an emptier line is an empty line.
                body.append(raw[indent:])
                below += 1
                continue
            lead = len(raw) - len(raw.lstrip(" "))
            if lead < indent:
                if raw[lead] == "\t":
                    self.fail("a tab in the indentation of a block scalar (indentation is spaces only)", below,
                              lead)
                break
            body.append(raw[indent:])
            size += len(raw)
            if size > MAX_SCALAR + 1024:
                self.fail(f"a value longer than {MAX_SCALAR:,} characters", row, col)
            below += 1
        # Trailing empty lines belong to chomping; they are not lines of the value.
        trailing = 0
        while body and body[-1] == "":
            body.pop()
            trailing += 1
        text = "\n".join(body) if style == "|" else _fold_block(body)
        if body:
            text += {"strip": "", "clip": "\n", "keep": "\n" * (trailing + 1)}[chomp]
        elif chomp == "keep" and trailing:
            text = "\n" * trailing
        self.scalar(text, row, col)
        self.row = below - 0
        # Leave trailing blank lines for the caller to skip.
        return text

    # --- flow collections ---------------------------------------------------------------------------------

    def flow(self, parent: int, row: int, col: int) -> Any:
        scanner = _Flow(self, row, col, parent)
        value = scanner.node(0)
        self.end_of_line(scanner.row, scanner.col, "after a flow collection")
        self.row = scanner.row + 1
        return value


class _Flow:
    """A scanner over ``[…]`` and ``{…}`` that may span lines."""

    def __init__(self, reader: _Reader, row: int, col: int, parent: int) -> None:
        self.reader = reader
        self.row = row
        self.col = col
        self.parent = parent

    @property
    def line(self) -> str:
        return self.reader.lines[self.row]

    def at_end_of_line(self) -> bool:
        rest = self.line[self.col:].lstrip(" \t")
        return not rest or rest[0] == "#"

    def skip(self) -> None:
        """Skip spaces, tabs, comments and line breaks (inside a flow collection)."""
        while True:
            line = self.line
            while self.col < len(line) and line[self.col] in " \t":
                self.col += 1
            if self.col < len(line) and line[self.col] == "#" and (self.col == 0 or line[self.col - 1] in " \t"):
                self.col = len(line)
            if self.col < len(line):
                return
            if self.row + 1 >= self.reader.count:
                return
            self.row += 1
            self.col = 0
            line = self.line
            if _is_marker(line, "---") or _is_marker(line, "..."):
                self.reader.fail("a flow collection is not closed before the document marker", self.row, 0)
            content = line.lstrip(" \t")
            if content and content[0] != "#":
                lead = line[: len(line) - len(content)]
                if "\t" in lead:
                    self.reader.fail("a tab in the indentation of a flow collection's line", self.row, lead.index("\t"))
                if len(lead) <= self.parent:
                    self.reader.fail("a line of a flow collection must be indented more than its key", self.row,
                                     len(lead))

    def peek(self) -> str:
        line = self.line
        return line[self.col] if self.col < len(line) else ""

    def node(self, depth: int) -> Any:
        reader = self.reader
        if len(reader.path) >= MAX_DEPTH:
            reader.fail(f"nested deeper than {MAX_DEPTH} levels", self.row, self.col)
        self.skip()
        char = self.peek()
        row, col = self.row, self.col
        if char == "[":
            return self.sequence()
        if char == "{":
            return self.mapping()
        if char == "":
            reader.fail("a flow collection is not closed", row, col)
        if char in "\"'":
            line = self.line
            end = _quoted_end(line, char, start=col + 1)
            if end < 0:
                reader.fail("a quoted value inside a flow collection must end on its line", row, col)
            text = _fold_quoted([line[col + 1: end]], char, reader, row, col)
            reader.scalar(text, row, col)
            self.col = end + 1
            return text
        if char == "*":
            match = _ANCHOR.match(self.line, col + 1)
            if match is None or match.group() not in reader.anchors:
                reader.fail("an alias that names no anchor defined before it", row, col)
            assert match is not None
            target = reader.anchors[match.group()]
            reader.count_alias(target, row, col)
            reader.mark(row, col)
            self.col = match.end()
            return target.value
        if char == "&":
            match = _ANCHOR.match(self.line, col + 1)
            if match is None:
                reader.fail("an anchor without a name", row, col)
            assert match is not None
            self.col = match.end()
            before = reader.values
            value = self.node(depth)
            reader.anchors[match.group()] = _Anchor(value, max(reader.values - before, 1))
            return value
        if char == "!":
            reader.fail("a tag (YAML tags are not supported; write the plain value)", row, col)
        following = self.line[col + 1: col + 2]
        if char in ",]}#" or (char in "-?:" and (following in ("", " ", "\t") or following in _FLOW_END)):
            reader.fail(f"expected a value, found {char!r}", row, col)
        return self.plain()

    def plain(self) -> Any:
        reader = self.reader
        row, col = self.row, self.col
        line = self.line
        found = _FLOW_PLAIN_END.search(line, col)
        end = found.start() if found else len(line)
        if end - col > MAX_SCALAR:
            reader.fail(f"a value longer than {MAX_SCALAR:,} characters", row, col)
        text = line[col:end].rstrip(" \t")
        # A plain value may continue on the next lines inside a flow collection.
        self.col = end
        while True:
            if not _rest_is_blank(line, self.col):
                break
            if self.row + 1 >= reader.count:
                break
            nxt = reader.lines[self.row + 1].strip(" \t")
            if not nxt or nxt[0] in _FLOW_END or nxt[0] == "#" or nxt.startswith(":"):
                break
            self.row += 1
            line = self.line
            start = len(line) - len(line.lstrip(" \t"))
            found = _FLOW_PLAIN_END.search(line, start)
            end = found.start() if found else len(line)
            text += " " + line[start:end].rstrip(" \t")
            self.col = end
        reader.scalar(text, row, col)
        if "\n" in text or self.row != row:
            return text
        return _resolve(text, reader, row, col)

    def sequence(self) -> list[Any]:
        reader = self.reader
        reader.count_values(1, self.row, self.col)
        reader.mark(self.row, self.col)
        self.col += 1
        items: list[Any] = []
        simple = _FLOW_SIMPLE_ITEM.match
        while True:
            # The common item: a one-word plain scalar followed by , or ] on the same line.
            found = simple(self.line, self.col)
            if found is not None:
                text = found.group(1)
                reader.values += 1
                if reader.values > MAX_VALUES:
                    reader.count_values(0, self.row, found.start(1))
                reader.path.append(len(items))
                if reader.where is not None:
                    reader.mark(self.row, found.start(1))
                items.append(_resolve(text, reader, self.row, found.start(1)))
                reader.path.pop()
                self.col = found.end()
                if found.group(2) == "]":
                    return items
                continue
            self.skip()
            char = self.peek()
            if char == "]":
                self.col += 1
                return items
            reader.path.append(len(items))
            row, col = self.row, self.col
            item = self.node(1)
            self.skip()
            if self.peek() == ":":
                # "[key: value]": a single-pair mapping, as emitters write one in a flow sequence.
                if isinstance(item, dict | list):
                    reader.fail("a collection as a key", row, col)
                if self.row != row:
                    reader.fail("the : of a key in a flow sequence must be on the key's line", self.row, self.col)
                key = _key_text(reader.lines[row], col, item)
                reader.count_values(1, row, col)
                self.col += 1
                self.skip()
                reader.path.append(key)
                if self.peek() in (",", "]"):
                    reader.count_values(1, self.row, self.col)
                    value: Any = None
                else:
                    value = self.node(1)
                reader.path.pop()
                item = {key: value}
            items.append(item)
            reader.path.pop()
            self.skip()
            char = self.peek()
            if char == ",":
                self.col += 1
                continue
            if char == "]":
                self.col += 1
                return items
            reader.fail("expected , or ] in a flow sequence" if char else "a flow sequence is not closed",
                        self.row, self.col)

    def mapping(self) -> dict[str, Any]:
        reader = self.reader
        reader.count_values(1, self.row, self.col)
        reader.mark(self.row, self.col)
        self.col += 1
        result: dict[str, Any] = {}
        seen: dict[str, tuple[int, int]] = {}
        while True:
            self.skip()
            char = self.peek()
            if char == "}":
                self.col += 1
                return result
            following = self.line[self.col + 1: self.col + 2]
            if char == "?" and (following in ("", " ", "\t") or following in _FLOW_END):
                reader.fail("a complex key (? …)", self.row, self.col)
            row, col = self.row, self.col
            key_value = self.node(1)
            if isinstance(key_value, dict | list):
                reader.fail("a collection as a key", row, col)
            key = _key_text(self.reader.lines[row], col, key_value)
            if key == "<<":
                reader.fail("a merge key (<<, YAML 1.1); write the keys out", row, col)
            if key in seen:
                first = seen[key]
                reader.problem(f"the key {key!r} appears twice in one mapping (first at line {first[0]}, column "
                               f"{first[1]})", row, col, fatal=False, path=[*reader.path, key])
            else:
                seen[key] = (row + 1, col + 1)
            self.skip()
            reader.path.append(key)
            if self.peek() == ":":
                self.col += 1
                self.skip()
                if self.peek() in (",", "}"):
                    reader.count_values(1, self.row, self.col)
                    value: Any = None
                else:
                    value = self.node(1)
            else:
                reader.count_values(1, self.row, self.col)
                value = None
            reader.path.pop()
            result[key] = value
            self.skip()
            char = self.peek()
            if char == ",":
                self.col += 1
                continue
            if char == "}":
                self.col += 1
                return result
            reader.fail("expected , or } in a flow mapping" if char else "a flow mapping is not closed",
                        self.row, self.col)


# --- helpers ---------------------------------------------------------------------------------------------


def _rest_is_blank(line: str, col: int) -> bool:
    """Whether ``line`` from ``col`` holds only spaces, tabs or a comment (without copying the rest)."""
    end = len(line)
    while col < end and line[col] in " \t":
        col += 1
    return col >= end or line[col] == "#"


def _is_marker(line: str, marker: str) -> bool:
    return line.startswith(marker) and (len(line) == 3 or line[3] in " \t")


def _colon(content: str) -> int:
    """Index of the ``:`` that ends a plain key (followed by a space, a tab or the end), else -1."""
    at = content.find(":")
    while at >= 0:
        if at + 1 == len(content) or content[at + 1] in " \t":
            return at
        at = content.find(":", at + 1)
    return -1


def _quoted_end(text: str, quote: str, start: int = 1) -> int:
    """Index of the closing quote of a quoted scalar opened at ``text[0]`` (or continuing at ``start``)."""
    i = start
    while True:
        j = text.find(quote, i)
        if j < 0:
            return -1
        if quote == "'":
            if j + 1 < len(text) and text[j + 1] == "'":
                i = j + 2
                continue
            return j
        backslashes = 0
        k = j - 1
        while k >= 0 and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j
        i = j + 1


def _has_comment(line: str, col: int) -> bool:
    text = line[col:]
    return " #" in text or "\t#" in text


def _plain_on_line(line: str, col: int) -> str | None:
    """The plain scalar text on a line from ``col``: up to a comment; None if it holds ``: ``."""
    text = line[col:]
    hash_at = text.find(" #")
    tab_hash = text.find("\t#")
    if tab_hash >= 0 and (hash_at < 0 or tab_hash < hash_at):
        hash_at = tab_hash
    if hash_at >= 0:
        text = text[:hash_at]
    text = text.rstrip(" \t")
    if ": " in text or ":\t" in text or text.endswith(":"):
        return None
    return text


def _fold_quoted(chunks: list[str], quote: str, reader: _Reader, row: int, col: int) -> str:
    """The value of a quoted scalar from its raw lines: escapes (double quotes), line folding."""
    if len(chunks) == 1:
        return _unescape(chunks[0], quote, reader, row, col)
    out: list[str] = []
    blank = 0
    for index, raw in enumerate(chunks):
        piece = raw
        if index > 0:
            piece = piece.lstrip(" \t")
        escaped_break = False
        if index < len(chunks) - 1:
            if quote == '"' and piece.endswith("\\") and _ends_with_escape(piece):
                escaped_break = True
                piece = piece[:-1]
            else:
                trimmed = piece.rstrip(" \t")
                if quote == '"' and trimmed != piece and _ends_with_escape(trimmed):
                    trimmed = piece[: len(trimmed) + 1]  # an escaped space or tab is kept
                piece = trimmed
        if index > 0 and not piece and index < len(chunks) - 1:
            blank += 1
            continue
        if index > 0:
            if out and out[-1] == "\x00escaped":
                out.pop()
            elif blank:
                out.append("\n" * blank)
            else:
                out.append(" ")
        blank = 0
        out.append(_unescape(piece, quote, reader, row, col))
        if escaped_break:
            out.append("\x00escaped")
    if out and out[-1] == "\x00escaped":
        out.pop()
    return "".join(out)


def _ends_with_escape(text: str) -> bool:
    count = len(text) - len(text.rstrip("\\"))
    return count % 2 == 1


def _unescape(text: str, quote: str, reader: _Reader, row: int, col: int) -> str:
    if quote == "'":
        return text.replace("''", "'")
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(text):
            reader.fail("a backslash at the end of a double-quoted value", row, col)
        code = text[i + 1]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code in _HEX_ESCAPES:
            width = _HEX_ESCAPES[code]
            digits = text[i + 2: i + 2 + width]
            if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
                reader.fail(f"an invalid \\{code} escape (it needs {width} hex digits)", row, col)
            point = int(digits, 16)
            if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
                reader.fail(f"the escape \\{code}{digits} is not a character (a lone UTF-16 surrogate?)", row, col)
            out.append(chr(point))
            i += 2 + width
        else:
            reader.fail(f"an unknown escape \\{code} in a double-quoted value", row, col)
    return "".join(out)


def _fold_block(lines: list[str]) -> str:
    """Folded (``>``) block scalar lines: breaks between normal lines become spaces (YAML 1.2 8.1.3)."""
    out: list[str] = []
    previous_normal = False
    pending_blank = 0
    for index, line in enumerate(lines):
        if line == "":
            pending_blank += 1
            continue
        normal = not line.startswith((" ", "\t"))
        if index > 0 and out:
            if previous_normal and normal:
                out.append("\n" * pending_blank if pending_blank else " ")
            else:
                out.append("\n" * (pending_blank + 1))
        elif pending_blank:
            out.append("\n" * pending_blank)
        pending_blank = 0
        out.append(line)
        previous_normal = normal
    return "".join(out)


def _key_text(line: str, col: int, value: Any) -> str:
    """A key as the text written (a plain ``1`` or ``true`` key is the string ``"1"`` or ``"true"``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    end = col
    while end < len(line) and line[end] not in ",:}]#":
        end += 1
    return line[col:end].rstrip(" \t")


def _resolve(text: str, reader: _Reader, row: int, col: int) -> Any:
    """A plain scalar's value by the YAML 1.2 core schema."""
    if text in _NULLS:
        return None
    first = text[0]
    if first in "tTfF":
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        return text
    if first in "0123456789+-.":
        if _INT.match(text):
            return _integer(int(text, 10) if len(text) <= 40 else INT_MAX + 1, text, reader, row, col)
        if _OCT.match(text):
            return _integer(int(text[2:], 8) if len(text) <= 40 else INT_MAX + 1, text, reader, row, col)
        if _HEX.match(text):
            return _integer(int(text[2:], 16) if len(text) <= 40 else INT_MAX + 1, text, reader, row, col)
        if _FLOAT.match(text):
            value = float(text)
            if value - value != 0:
                reader.problem(f"the number {text[:40]} is too large for a 64-bit float", row, col, fatal=False)
            return value
        if _SPECIAL_FLOAT.match(text):
            reader.problem(f"{text} is not a number JSON can hold (quote it to mean the text)", row, col,
                           fatal=False)
            return text
    return text


def _integer(value: int, text: str, reader: _Reader, row: int, col: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        reader.problem(f"the integer {text[:40]}{'…' if len(text) > 40 else ''} is outside the 64-bit range",
                       row, col, fatal=False)
    return value
