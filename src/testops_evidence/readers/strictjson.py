"""The one reader of untrusted JSON: RFC 8259 and nothing more, with errors a person can act on.

``json.loads`` accepts what JSON does not allow and what our consumers cannot handle: ``NaN`` and
``Infinity`` (written back out as ``NaN``, which no JSON parser reads), duplicate keys (resolved
last-wins, so a first-wins reader sees another document), integers of any size (4,300 digits raise a
``ValueError`` far from the JSON handling; a few hundred overflow every date and every 64-bit consumer),
lone surrogate escapes (text UTF-8 cannot encode). This reader refuses each of them, everywhere:

* :func:`loads` — the value, or :class:`JSONProblem` (message, JSON pointer, line and column).
* :func:`problems` — every problem of a document (up to a cap), for reports that list them all.
* :func:`positions` — the line and column of each JSON pointer, so a schema error can say where it is.
* :func:`load_document` — :func:`loads` that refuses with the caller's area code (``Refusal``).

The fast path is CPython's C scanner with hooks that refuse (no Python per character); when it refuses
or fails, a small pure-Python walker reads the text again to find the first problem exactly and say it
in our words (Python's say "Expecting property name enclosed in double quotes" on the line *after* a
trailing comma). Both agree on what is JSON; the walker alone runs only on a refused document.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

from testops_evidence.errors import Refusal

# 64-bit: TestOps ids are Java longs, Allure times are epoch milliseconds, GitHub ids fit; a value past
# this range has no consumer that reads it as the same number.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
MAX_DEPTH = 512
MAX_PROBLEMS = 20
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")


# The decoder's string scanner (C when available): the same rules as json.loads, with the end offset.
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class JSONProblem(json.JSONDecodeError):
    """One reason a text is not acceptable JSON, with where it is. A ``json.JSONDecodeError`` (and so a
    ``ValueError``), so that code written for ``json.loads`` handles it unchanged."""

    def __init__(self, message: str, *, pointer: str = "/", line: int = 1, column: int = 1) -> None:
        ValueError.__init__(self, message)
        self.msg = self.message = message
        self.doc = ""
        self.pos = 0
        self.pointer = pointer
        self.line = self.lineno = line
        self.column = self.colno = column

    def __reduce__(self) -> Any:
        return (_rebuild, (self.message, self.pointer, self.line, self.column))

    @property
    def where(self) -> str:
        return f"line {self.line}, column {self.column}"

    def __str__(self) -> str:
        return f"{self.message} at {self.where}"


class _Refused(ValueError):
    """Raised by a hook inside the C scanner; the walker then finds the exact problem and its place."""


def _rebuild(message: str, pointer: str, line: int, column: int) -> JSONProblem:
    return JSONProblem(message, pointer=pointer, line=line, column=column)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _Refused
    return document


def _int(text: str) -> int:
    # Up to 18 digits always fit in 64 bits; only longer texts need the exact range check.
    if len(text) > 18:
        value = int(text) if len(text) <= 40 else INT_MAX + 1
        if not INT_MIN <= value <= INT_MAX:
            raise _Refused
        return value
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value - value != 0:  # inf - inf is nan; a finite float minus itself is 0
        raise _Refused
    return value


def _constant(_text: str) -> Any:
    raise _Refused


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int, parse_float=_float,
                            parse_constant=_constant)
# What a reader that admits NaN and Infinity (``constants=True``) uses: the same, the constants read as floats.
_DECODER_CONSTANTS = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int, parse_float=_float,
                                      parse_constant=float)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def decode_text(data: bytes | str) -> str:
    """UTF-8 text, or :class:`JSONProblem` naming where the first invalid byte is."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[: exc.start].decode("utf-8", "replace")
        line, column = _line_column(head, len(head))
        raise JSONProblem(f"the bytes are not UTF-8 (byte 0x{data[exc.start]:02x})", line=line,
                          column=column) from None


def loads(data: bytes | str, *, constants: bool = False) -> Any:
    """The JSON value of ``data``; :class:`JSONProblem` for anything that is not strict JSON. ``constants``
    admits ``NaN``, ``Infinity`` and ``-Infinity`` (as floats), and nothing else beyond strict JSON."""
    text = decode_text(data)
    try:
        value = (_DECODER_CONSTANTS if constants else _DECODER).decode(text)
    except (_Refused, json.JSONDecodeError, ValueError, RecursionError) as exc:
        found = problems(text, limit=1, constants=constants)
        if found:
            raise found[0] from None
        # The walker accepts what the C scanner refused: say what Python said, where it said it.
        if isinstance(exc, json.JSONDecodeError):
            raise JSONProblem(exc.msg, line=exc.lineno, column=exc.colno) from None
        raise JSONProblem(f"not readable as JSON ({type(exc).__name__})") from None
    if ("\\u" in text and _SURROGATE_ESCAPE.search(text)) or _too_deep(text):
        found = problems(text, limit=1, constants=constants)
        if found:
            raise found[0]
    return value


# Outside its strings, a JSON text holds only brackets and these bytes.
_NOT_BRACKET = b" \t\n\r,:0123456789-+.eEtrufalsnNIiy"  # NaN and Infinity too (constants=True)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _too_deep(text: str) -> bool:
    """Whether a text the C scanner read nests deeper than MAX_DEPTH: the scanner's own limit is the
    interpreter's recursion limit (about 990), so without this the fast path read what the walker refuses.

    A text with fewer brackets than the limit cannot be too deep (the usual case: two ``count`` calls).
    Otherwise the strings are cut out (their brackets are text: escapes dropped, then every other piece
    between quotes is a string's body), what is left is only brackets, and the depth is the highest running
    sum of them."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    if "\\" in text:  # a run of backslashes pairs up from its left, as the escapes do; then \" is no quote
        text = text.replace("\\\\", "").replace('\\"', "")
    brackets = "".join(text.split('"')[::2]).encode().translate(None, _NOT_BRACKET)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def load_document(data: bytes | str, what: str, code: str, *, constants: bool = False) -> Any:
    """:func:`loads`, refusing with ``code``: the message names the problem, its line and column, and
    the field is the problem's JSON pointer."""
    try:
        return loads(data, constants=constants)
    except JSONProblem as problem:
        raise Refusal(code, f"{what} is not valid JSON: {problem}", field=problem.pointer,
                      expected="strict JSON (RFC 8259)", actual=problem.where) from None


def problems(text: str, *, limit: int = MAX_PROBLEMS, constants: bool = False) -> list[JSONProblem]:
    """Every problem of ``text`` (up to ``limit``); a syntax error ends the list (nothing after it can be
    read reliably). Empty for strict JSON (``constants``: with NaN and Infinity admitted)."""
    return _Walker(text, limit, None, constants).run()


def positions(text: str) -> dict[str, tuple[int, int]]:
    """``{json pointer: (line, column)}`` of every value of a strict JSON text (keys point at their value).

    Pointers follow RFC 6901 here: the root is ``""`` (``"/"`` is the member named by the empty key)."""
    where: dict[str, int] = {}
    _Walker(text, 1, where).run()
    return {pointer: _line_column(text, offset) for pointer, offset in where.items()}


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def pointer_of(parts: list[Any]) -> str:
    if not parts:
        return "/"
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class _Stop(Exception):
    pass


_STRING_ERRORS = (
    ("Unterminated string", "a string is not closed"),
    ("Invalid control character", "a control character inside a string (escape it, e.g. \\n or \\t)"),
    ("Invalid \\uXXXX escape", "an invalid \\u escape in a string (it needs four hex digits)"),
    ("Invalid \\escape", "an invalid escape in a string (JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)"),
)


class _Walker:
    """A strict JSON reader that finds problems and their places (slow; run only on the error path)."""

    def __init__(self, text: str, limit: int, where: dict[str, int] | None, constants: bool = False) -> None:
        self.constants = constants
        self.text = text
        self.limit = limit
        self.where = where
        self.found: list[JSONProblem] = []
        self.path: list[Any] = []

    def problem(self, message: str, offset: int, *, fatal: bool = False, path: list[Any] | None = None) -> None:
        line, column = _line_column(self.text, offset)
        self.found.append(JSONProblem(message, pointer=pointer_of(self.path if path is None else path), line=line,
                                      column=column))
        if fatal or len(self.found) >= self.limit:
            raise _Stop

    def ws(self, i: int) -> int:
        match = _WS.match(self.text, i)
        return match.end() if match else i

    def run(self) -> list[JSONProblem]:
        with contextlib.suppress(_Stop):
            self._document()
        return self.found

    def _document(self) -> None:
        text = self.text
        i = self.ws(0)
        if text.startswith("\ufeff"):
            self.problem("a byte order mark before the document (save the file as UTF-8 without BOM)", 0,
                         fatal=True)
        # Each frame: [kind, keys seen (object) or index (array), offset of the opening bracket].
        stack: list[list[Any]] = []
        expect_value = True
        while True:
            if expect_value:
                i = self._value(i, stack)
                expect_value = False
                if stack and stack[-1][0] == "open":
                    # _value opened a container: read its first key or item, or its immediate close.
                    frame = stack[-1]
                    frame[0] = frame[1]
                    frame[1] = {} if frame[0] == "object" else 0
                    close = "}" if frame[0] == "object" else "]"
                    i = self.ws(i)
                    if text.startswith(close, i):
                        stack.pop()
                        i += 1
                        continue
                    if frame[0] == "object":
                        i = self._key(i, frame)
                    else:
                        self.path.append(0)
                    expect_value = True
                continue
            i = self.ws(i)
            if not stack:
                if i < len(text):
                    self.problem("more text after the end of the document", i, fatal=True)
                return
            frame = stack[-1]
            close = "}" if frame[0] == "object" else "]"
            if i >= len(text):
                self.problem(f"the document ends inside an {'object' if close == '}' else 'array'} "
                             f"(expected , or {close})", i, fatal=True)
            char = text[i]
            if char == ",":
                comma = i
                i = self.ws(i + 1)
                if text.startswith(close, i) or (i < len(text) and text[i] in "}]"):
                    self.problem(f"a comma before {text[i]} (JSON allows no trailing comma)", comma, fatal=True)
                if frame[0] == "object":
                    self.path.pop()
                    i = self._key(i, frame)
                else:
                    frame[1] += 1
                    self.path[-1] = frame[1]
                expect_value = True
            elif char == close:
                stack.pop()
                self.path.pop()
                i += 1
            else:
                what = "member" if close == "}" else "item"
                self.problem(f"expected , or {close} after an {what}, found {_shown(char)}", i, fatal=True)

    def _key(self, i: int, frame: list[Any]) -> int:
        text = self.text
        if not text.startswith('"', i):
            if i >= len(text):
                self.problem("the document ends where a key is expected", i, fatal=True)
            hint = " (keys are double-quoted strings)" if text[i] in "'" or text[i].isalpha() else ""
            self.problem(f"expected a key, found {_shown(text[i])}{hint}", i, fatal=True)
        key, end = self._string(i)
        seen: dict[str, int] = frame[1]
        if key in seen:
            line, column = _line_column(text, seen[key])
            self.problem(f"the key {json.dumps(key, ensure_ascii=False)} appears twice in one object (first at "
                         f"line {line}, column {column})", i, path=[*self.path, key])
        else:
            seen[key] = i
        i = self.ws(end)
        if not text.startswith(":", i):
            found = _shown(text[i]) if i < len(text) else "the end of the document"
            self.problem(f"expected : after the key, found {found}", i, fatal=True)
        self.path.append(key)
        return self.ws(i + 1)

    def _string(self, i: int) -> tuple[str, int]:
        try:
            value, end = scanstring(self.text, i + 1, True)
        except json.JSONDecodeError as exc:
            message = next((ours for theirs, ours in _STRING_ERRORS if exc.msg.startswith(theirs)), exc.msg)
            self.problem(message, exc.pos, fatal=True)
            raise AssertionError("unreachable") from None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            self.problem("a \\u escape is a lone UTF-16 surrogate, not a character", i)
        return value, end

    def _value(self, i: int, stack: list[list[Any]]) -> int:
        text = self.text
        i = self.ws(i)
        if self.where is not None:
            self.where[pointer_of(self.path) if self.path else ""] = i
        if i >= len(text):
            self.problem("the document ends where a value is expected", i, fatal=True)
        char = text[i]
        if char in "{[":
            if len(stack) >= MAX_DEPTH:
                self.problem(f"nested deeper than {MAX_DEPTH} levels", i, fatal=True)
            stack.append(["open", "object" if char == "{" else "array", i])
            return i + 1
        if char == '"':
            return self._string(i)[1]
        if char == "-" or char.isdigit():
            return self._number(i)
        for literal in ("true", "false", "null"):
            if text.startswith(literal, i):
                return i + len(literal)
        for constant in ("NaN", "Infinity", "-Infinity"):
            if text.startswith(constant, i):
                if not self.constants:
                    self.problem(f"{constant} is not a JSON number (use null, or a finite number)", i)
                return i + len(constant)
        if char in "}]":
            self.problem(f"expected a value, found {char}", i, fatal=True)
        if char in "'":
            self.problem("strings are double-quoted in JSON", i, fatal=True)
        if text.startswith(("//", "/*"), i):
            self.problem("comments are not JSON", i, fatal=True)
        self.problem(f"expected a value, found {_shown(char)}", i, fatal=True)
        raise AssertionError("unreachable")

    def _number(self, i: int) -> int:
        text = self.text
        if text.startswith("-Infinity", i):
            if not self.constants:
                self.problem("-Infinity is not a JSON number (use null, or a finite number)", i)
            return i + len("-Infinity")
        match = _NUMBER.match(text, i)
        if match is None:
            self.problem("a number is malformed", i, fatal=True)
            raise AssertionError("unreachable")
        token = match.group()
        if match.group(1) is None and match.group(2) is None:
            digits = len(token.lstrip("-"))
            if digits > 19 and (digits > 40 or not INT_MIN <= int(token) <= INT_MAX):
                self.problem(f"an integer of {digits} digits, outside the 64-bit range "
                             f"({INT_MIN} to {INT_MAX})", i)
            elif digits == 19 and not INT_MIN <= int(token) <= INT_MAX:
                self.problem(f"an integer outside the 64-bit range ({INT_MIN} to {INT_MAX})", i)
        elif float(token) - float(token) != 0:
            self.problem("a number too large for a 64-bit float", i)
        return match.end()


def _shown(char: str) -> str:
    if char.isprintable() and not char.isspace():
        return repr(char)
    return f"U+{ord(char):04X}"
