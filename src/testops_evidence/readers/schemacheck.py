"""A fast yes/no JSON Schema check for the keyword subset our schemas use; jsonschema explains failures.

Most documents are valid, and a 10,000-case export validates 10,000 cell results (jsonschema was 38x slower
on them: BENCHMARKS.md). So a schema is compiled once into nested closures that answer only "valid or
not"; when the answer is "not", the caller runs jsonschema, which produces the error with its pointer. The closures implement
the Draft 2020-12 semantics of each keyword *exactly* as our jsonschema validator does
(:func:`contract.strict_validator`: booleans are not numbers, ``enum``/``const``/``uniqueItems`` use
jsonschema's equality where ``True != 1``), with two deliberate departures from plain jsonschema that
the validator shares: an ``integer`` is a JSON integer (``12.0`` is a number, not an id: a
``project-id: 12.0`` became ``"12.0"`` in URLs), and a ``pattern``'s ``$`` ends the text (ECMA-262; Python's
also matched before a final line break). So a ``True`` here means the validator reports nothing. A schema with any
keyword outside the subset is not compiled (:func:`compile_schema` returns ``None``) and is left to
jsonschema alone. A property test compares the two on random schemas and documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

Check = Callable[[Any], bool]

# Keywords that only annotate: they never make a document invalid.
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples",
                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"})
_SUPPORTED = frozenset({"type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
                        "properties", "required", "additionalProperties", "propertyNames", "minProperties",
                        "maxProperties", "items", "minItems", "maxItems", "uniqueItems", "oneOf", "anyOf",
                        "allOf", "not", "$ref"}) | _ANNOTATIONS



def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """A JSON Schema ``pattern`` compiled with its ECMA-262 meaning of ``$``: the end of the input.

    Python's ``$`` also matches before a final line break, so ``^[a-z]+$`` admitted ``"name\\n"`` — a key,
    id or file name with a line break that collides with its stripped twin. Every ``$`` outside a
    character class becomes ``\\Z``; ``\\$`` and ``[$]`` keep their meaning."""
    return _ecma_compiled(pattern)


@cache
def _ecma_compiled(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif in_class:
            out.append(char)
            in_class = char != "]"
        elif char == "[":
            out.append(char)
            in_class = True
        else:
            out.append("\\Z" if char == "$" else char)
    return re.compile("".join(out))

_MISSING = object()

# A bare ``type``, as an expression on ``x`` (the checks of _TYPES, written out).
_LEAF_TYPES = {
    "string": "isinstance(x, str)",
    "integer": "isinstance(x, int) and not isinstance(x, bool)",
    "number": "isinstance(x, int | float) and not isinstance(x, bool)",
    "boolean": "isinstance(x, bool)",
    "object": "isinstance(x, dict)",
    "array": "isinstance(x, list)",
    "null": "x is None",
}


class Unsupported(Exception):
    """The schema uses a keyword (or a form of one) this checker does not implement."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def json_equal(one: Any, two: Any) -> bool:
    """jsonschema's equality: booleans are not numbers, 1 == 1.0, containers compared deeply."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    if isinstance(one, list | dict) or isinstance(two, list | dict):
        return False
    return bool(one == two)


def canonical(value: Any) -> Any:
    """A hashable form of a JSON value such that two values are :func:`json_equal` exactly when their forms
    are equal: a boolean is tagged (so ``True`` is not ``1``), a list becomes a tagged tuple, an object a tagged
    frozenset of its (key, form) pairs. Numbers stay themselves: Python already equates (and hashes equally)
    ``1`` and ``1.0``, and strings, numbers and tagged tuples never equal each other."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("list", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, canonical(item)) for key, item in value.items()))
    return value


def unique_items(items: list[Any]) -> bool:
    """``uniqueItems`` in linear time: one hash per item, never a comparison of every pair (16,000 actor ids
    took over 300 s pairwise). jsonschema's own check sorts and compares neighbours, and falls back to every
    pair when the items do not sort (mixed types, objects), which an attacker chooses; its neighbour
    comparison also misses ``[[1], [true], [1]]``. The validator of :mod:`contract` uses this one too."""
    if all(isinstance(item, str) for item in items):
        return len(set(items)) == len(items)
    seen: set[Any] = set()
    for item in items:
        form = canonical(item)
        if form in seen:
            return False
        seen.add(form)
    return True




def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """A predicate equal to "jsonschema reports no error", or ``None`` if the schema is outside the subset."""
    try:
        return _Compiler(schema).compile(schema)
    except Unsupported:
        return None


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}
        self.resolving: set[str] = set()  # $refs being compiled: a use inside one must look it up when called

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return lambda _v: True
        if schema is False:
            return lambda _v: False
        if not isinstance(schema, Mapping):
            raise Unsupported(repr(schema))
        unknown = set(schema) - _SUPPORTED
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        fused = self._fused(schema)
        if fused is not None:
            return fused
        checks: list[Check] = []
        for keyword in schema:
            if keyword not in _ANNOTATIONS:
                checks.append(getattr(self, "_k_" + keyword.lstrip("$"))(schema[keyword], schema))
        if not checks:
            return lambda _v: True
        if len(checks) == 1:
            return checks[0]
        if len(checks) == 2:
            first, second = checks
            return lambda v: first(v) and second(v)

        def every(v: Any) -> bool:
            for check in checks:  # noqa: SIM110 - a plain loop: this runs millions of times per export
                if not check(v):
                    return False
            return True
        return every

    # --- fused forms -----------------------------------------------------------------------------
    # The shapes most of our schemas are made of, each as one closure instead of one per keyword chained by
    # every(): a string with a pattern and lengths, an integer with bounds, an object with properties. Each
    # answers exactly what the keyword closures below answer together (the property test checks both against
    # jsonschema); any other combination takes the general path.
    _STRING_KEYS = frozenset({"type", "pattern", "minLength", "maxLength"})
    _INTEGER_KEYS = frozenset({"type", "minimum", "maximum"})
    _OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "propertyNames",
                              "minProperties", "maxProperties"})

    _ARRAY_KEYS = frozenset({"type", "items", "minItems", "maxItems", "uniqueItems"})

    def _fused(self, schema: Mapping[str, Any]) -> Check | None:
        kind = schema.get("type")
        keys = {k for k in schema if k not in _ANNOTATIONS}
        if kind == "string" and keys <= self._STRING_KEYS:
            return self._fused_string(schema)
        if kind == "array" and keys <= self._ARRAY_KEYS and isinstance(schema.get("items", True), Mapping | bool) \
                and all(_is_integer(schema[k]) for k in keys & {"minItems", "maxItems"}):
            return self._fused_array(schema)
        if kind == "integer" and keys <= self._INTEGER_KEYS and all(
                _is_number(schema[k]) for k in keys - {"type"}):
            low, high = schema.get("minimum"), schema.get("maximum")
            if low is not None and high is not None:
                return lambda v: _is_integer(v) and not v < low and not v > high
            if low is not None:
                return lambda v: _is_integer(v) and not v < low
            if high is not None:
                return lambda v: _is_integer(v) and not v > high
            return _is_integer
        if kind == "object" and keys <= self._OBJECT_KEYS and isinstance(schema.get("properties", {}), Mapping):
            return self._fused_object(schema)
        return None

    def _fused_string(self, schema: Mapping[str, Any]) -> Check | None:
        pattern, low, high = schema.get("pattern"), schema.get("minLength"), schema.get("maxLength")
        if (pattern is not None and not isinstance(pattern, str)) or any(
                bound is not None and not _is_integer(bound) for bound in (low, high)):
            return None
        search = ecma_pattern(pattern).search if pattern is not None else None
        lo = 0 if low is None else low
        hi = high

        def check(v: Any) -> bool:
            if not isinstance(v, str):
                return False
            if lo or hi is not None:
                size = len(v)
                if size < lo or (hi is not None and size > hi):
                    return False
            return search is None or search(v) is not None
        return check

    def _fused_array(self, schema: Mapping[str, Any]) -> Check:
        item = self.compile(schema["items"]) if "items" in schema else None
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        unique = schema.get("uniqueItems") is True

        def check(v: Any) -> bool:
            if not isinstance(v, list):
                return False
            size = len(v)
            if size < low or (high is not None and size > high):
                return False
            if item is not None:
                for x in v:
                    if not item(x):
                        return False
            return not unique or unique_items(v)
        return check

    def _fused_object(self, schema: Mapping[str, Any]) -> Check | None:
        """One generated function per object shape: each property's value is looked up once and tested by an
        expression written into the function when its schema is a plain leaf (a string with a pattern and
        lengths, an integer with bounds, a string ``const`` or ``enum``, a bare type), else by its compiled
        check. The values the expressions test against (names, patterns, bounds) are bound in the function's
        namespace, never written into its source."""
        properties = schema.get("properties", {})
        required = schema.get("required")
        names = frozenset(required) if required is not None else frozenset()
        additional = schema.get("additionalProperties", True)
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if any(bound is not None and not _is_number(bound) for bound in (low, high)):
            return None
        space: dict[str, Any] = {"MISSING": _MISSING, "KNOWN": frozenset(properties), "REQUIRED": names,
                                 "LOW": low, "HIGH": high, "_unique": unique_items}
        lines = ["def check(v):", "    if not isinstance(v, dict):", "        return False"]
        if names:
            lines += ["    if not REQUIRED <= v.keys():", "        return False"]
        if low is not None:
            lines += ["    if len(v) < LOW:", "        return False"]
        if high is not None:
            lines += ["    if len(v) > HIGH:", "        return False"]
        if additional is False:
            lines += ["    if not v.keys() <= KNOWN:", "        return False"]
        for index, (name, sub) in enumerate(properties.items()):
            space[f"K{index}"] = name
            test = self._leaf(sub, index, space)
            if test is None:
                space[f"P{index}"] = self.compile(sub)
                test = f"P{index}(x)"
            lines += [f"    x = v.get(K{index}, MISSING)", f"    if x is not MISSING and not ({test}):",
                      "        return False"]
        if additional is not True and additional is not False:
            space["EXTRA"] = self.compile(additional)
            lines += ["    for k, x in v.items():", "        if k not in KNOWN and not EXTRA(x):", "            return False"]
        if "propertyNames" in schema:
            space["NAME"] = self.compile(schema["propertyNames"])
            lines += ["    for k in v:", "        if not NAME(k):", "            return False"]
        lines.append("    return True")
        exec(compile("\n".join(lines), "<schemacheck object>", "exec"), space)  # noqa: S102 - our own source
        check: Check = space["check"]
        return check

    def _leaf(self, schema: Any, index: int, space: dict[str, Any]) -> str | None:
        """A Python expression on ``x`` equal to the compiled check of ``schema``, for the leaf shapes; else None."""
        if not isinstance(schema, Mapping):
            return None
        keys = {k for k in schema if k not in _ANNOTATIONS}
        kind = schema.get("type")
        if keys == {"const"} and isinstance(schema["const"], str):  # json_equal with a string is ==
            space[f"C{index}"] = schema["const"]
            return f"x == C{index}"
        enum = schema.get("enum")
        if keys == {"enum"} and isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
            space[f"E{index}"] = frozenset(enum)
            return f"isinstance(x, str) and x in E{index}"
        if keys == {"type"} and isinstance(kind, str) and kind in _LEAF_TYPES:
            return _LEAF_TYPES[kind]
        if kind == "string" and keys <= self._STRING_KEYS:
            pattern, lo, hi = schema.get("pattern"), schema.get("minLength"), schema.get("maxLength")
            if (pattern is not None and not isinstance(pattern, str)) or any(
                    bound is not None and not _is_integer(bound) for bound in (lo, hi)):
                return None
            parts = ["isinstance(x, str)"]
            if lo is not None:
                space[f"L{index}"] = lo
                parts.append(f"len(x) >= L{index}")
            if hi is not None:
                space[f"H{index}"] = hi
                parts.append(f"len(x) <= H{index}")
            if pattern is not None:
                space[f"S{index}"] = ecma_pattern(pattern).search
                parts.append(f"S{index}(x) is not None")
            return " and ".join(parts)
        if kind == "integer" and keys <= self._INTEGER_KEYS and all(_is_number(schema[k]) for k in keys - {"type"}):
            parts = ["isinstance(x, int)", "not isinstance(x, bool)"]
            if "minimum" in schema:
                space[f"L{index}"] = schema["minimum"]
                parts.append(f"not x < L{index}")
            if "maximum" in schema:
                space[f"H{index}"] = schema["maximum"]
                parts.append(f"not x > H{index}")
            return " and ".join(parts)
        return None

    # --- any type ---------------------------------------------------------------------------------
    def _k_type(self, value: Any, _schema: Any) -> Check:
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
            raise Unsupported(f"type {value!r}")
        tests = [_TYPES[n] for n in names]
        if len(tests) == 1:
            return tests[0]
        if len(tests) == 2:  # a nullable type, mostly: no generator for any() to run at each of 10,000s of values
            first, second = tests
            return lambda v: first(v) or second(v)

        def check(v: Any) -> bool:
            for test in tests:  # noqa: SIM110 - as in every()
                if test(v):
                    return True
            return False
        return check

    def _k_enum(self, value: Any, _schema: Any) -> Check:
        if not isinstance(value, list):
            raise Unsupported("enum")
        strings = frozenset(v for v in value if isinstance(v, str))
        others = [v for v in value if not isinstance(v, str)]
        return lambda v: (v in strings) if isinstance(v, str) else any(json_equal(v, o) for o in others)

    def _k_const(self, value: Any, _schema: Any) -> Check:
        return lambda v: json_equal(v, value)

    def _k_not(self, value: Any, _schema: Any) -> Check:
        inner = self.compile(value)
        return lambda v: not inner(v)

    def _k_oneOf(self, value: Any, _schema: Any) -> Check:
        subs = self._list(value)

        def check(v: Any) -> bool:  # exactly one: stops at the second match
            found = False
            for sub in subs:
                if sub(v):
                    if found:
                        return False
                    found = True
            return found
        return check

    def _k_anyOf(self, value: Any, _schema: Any) -> Check:
        subs = self._list(value)
        return lambda v: any(s(v) for s in subs)

    def _k_allOf(self, value: Any, _schema: Any) -> Check:
        subs = self._list(value)
        return lambda v: all(s(v) for s in subs)

    def _list(self, value: Any) -> list[Check]:
        if not isinstance(value, list) or not value:
            raise Unsupported("empty or non-list combinator")
        return [self.compile(s) for s in value]

    def _k_ref(self, value: Any, _schema: Any) -> Check:
        if not isinstance(value, str) or not value.startswith("#/"):
            raise Unsupported(f"$ref {value!r}")
        if value not in self.refs:
            node: Any = self.root
            for part in value[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(node, Mapping) or part not in node:
                    raise Unsupported(f"$ref {value!r}")
                node = node[part]
            self.refs[value] = lambda _v: False  # placeholder; a recursive $ref resolves through the dict below
            self.resolving.add(value)
            compiled = self.compile(node)
            self.resolving.discard(value)
            self.refs[value] = compiled
        if value not in self.resolving:  # compiled: no indirection left to pay at every use
            return self.refs[value]
        refs = self.refs
        return lambda v: refs[value](v)

    # --- strings ----------------------------------------------------------------------------------
    def _k_pattern(self, value: Any, _schema: Any) -> Check:
        search = ecma_pattern(value).search
        return lambda v: not isinstance(v, str) or search(v) is not None

    def _k_minLength(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, str) or len(v) >= value

    def _k_maxLength(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, str) or len(v) <= value

    # --- numbers ----------------------------------------------------------------------------------
    # Written as jsonschema writes them (``instance < minimum`` fails), so NaN behaves the same.
    def _k_minimum(self, value: Any, _schema: Any) -> Check:
        return lambda v: not _is_number(v) or not v < value

    def _k_maximum(self, value: Any, _schema: Any) -> Check:
        return lambda v: not _is_number(v) or not v > value

    # --- objects ----------------------------------------------------------------------------------
    def _k_properties(self, value: Any, _schema: Any) -> Check:
        if not isinstance(value, Mapping):
            raise Unsupported("properties")
        props = {name: self.compile(sub) for name, sub in value.items()}

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return True
            for name, sub in props.items():  # noqa: SIM110 - as in every()
                if name in v and not sub(v[name]):
                    return False
            return True
        return check

    def _k_required(self, value: Any, _schema: Any) -> Check:
        names = frozenset(value)
        return lambda v: not isinstance(v, dict) or names <= v.keys()

    def _k_additionalProperties(self, value: Any, schema: Any) -> Check:
        known = frozenset(schema.get("properties", {}))
        if value is False:
            return lambda v: not isinstance(v, dict) or v.keys() <= known
        extra = self.compile(value)
        return lambda v: not isinstance(v, dict) or all(extra(x) for k, x in v.items() if k not in known)

    def _k_propertyNames(self, value: Any, _schema: Any) -> Check:
        names = self.compile(value)
        return lambda v: not isinstance(v, dict) or all(names(k) for k in v)

    def _k_minProperties(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, dict) or len(v) >= value

    def _k_maxProperties(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, dict) or len(v) <= value

    # --- arrays -----------------------------------------------------------------------------------
    def _k_items(self, value: Any, _schema: Any) -> Check:
        if not isinstance(value, Mapping | bool):
            raise Unsupported("items as a list (prefixItems)")
        item = self.compile(value)

        def check(v: Any) -> bool:
            if isinstance(v, list):
                for x in v:
                    if not item(x):
                        return False
            return True
        return check

    def _k_minItems(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, list) or len(v) >= value

    def _k_maxItems(self, value: Any, _schema: Any) -> Check:
        return lambda v: not isinstance(v, list) or len(v) <= value

    def _k_uniqueItems(self, value: Any, _schema: Any) -> Check:
        if value is not True:
            return lambda _v: True
        return lambda v: not isinstance(v, list) or unique_items(v)
