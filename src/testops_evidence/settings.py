"""One typed settings object, built from CLI options and ``INPUT_*`` variables, one validator per kind.

Resolution order for each input: the CLI option, then ``INPUT_<NAME>`` (hyphenated, as the runner sets
it, or with underscores), then the input's documented environment fallbacks, then its default. An empty
string counts as unset, because the runner sets every declared input, empty or not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testops_evidence.errors import input_error
from testops_evidence.interface import INPUTS_BY_NAME, InputSpec
from testops_evidence.readers.integers import ascii_int

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def env_input(env: Mapping[str, str], name: str) -> str | None:
    """Read an action input from the environment, in both the hyphen and underscore spellings."""
    upper = name.upper()
    for key in (f"INPUT_{upper}", f"INPUT_{upper.replace('-', '_')}"):
        value = env.get(key)
        if value is not None and value.strip() != "":
            return value.strip()
    return None


def parse_bool(name: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise input_error(name, f"input {name} must be true or false", expected="true | false", actual=raw)


def parse_int(name: str, raw: str, *, minimum: int = 0) -> int:
    value = ascii_int(raw.strip(), maximum=10**16 - 1)
    if value is None:
        raise input_error(name, f"input {name} must be a whole number", expected="digits", actual=raw)
    if value < minimum:
        raise input_error(name, f"input {name} must be at least {minimum}", expected=f">= {minimum}", actual=raw)
    return value


@dataclass
class Settings:
    mode: str
    raw: dict[str, str] = field(default_factory=dict)  # resolved, non-empty string values
    sources: dict[str, str] = field(default_factory=dict)  # where each value came from (never the value)
    extras: dict[str, str] = field(default_factory=dict)  # command-specific CLI options (rehearse)

    @classmethod
    def resolve(cls, mode: str, cli_values: Mapping[str, Any], env: Mapping[str, str]) -> Settings:
        raw: dict[str, str] = {}
        sources: dict[str, str] = {}
        for name, spec in INPUTS_BY_NAME.items():
            if name == "mode":
                continue
            value, source = _resolve_one(spec, cli_values, env)
            if value is not None:
                raw[name] = value
                sources[name] = source
            # Typed inputs of this mode are validated up front: a bad value is a usage error (exit 2)
            # before the phase does anything, not a crash after it (fail-on-failed-cases is read last).
            if value is not None and spec.applies_to(mode):
                if spec.kind == "bool":
                    parse_bool(name, value)
                elif spec.kind == "int":
                    parse_int(name, value)
        extras = {k: str(v) for k, v in cli_values.items() if k not in INPUTS_BY_NAME and v is not None}
        return cls(mode=mode, raw=raw, sources=sources, extras=extras)

    def is_set(self, name: str) -> bool:
        return name in self.raw

    def string(self, name: str) -> str | None:
        self._known(name)
        return self.raw.get(name)

    def boolean(self, name: str) -> bool:
        self._known(name)
        value = self.raw.get(name)
        return parse_bool(name, value) if value is not None else False

    def integer(self, name: str, *, minimum: int = 0) -> int | None:
        self._known(name)
        value = self.raw.get(name)
        return parse_int(name, value, minimum=minimum) if value is not None else None

    def path(self, name: str) -> Path | None:
        self._known(name)
        value = self.raw.get(name)
        if value is None:
            return None
        if "\x00" in value:
            raise input_error(name, f"input {name} is not a valid path", actual=value)
        return Path(value)

    def require(self, name: str) -> str:
        value = self.string(name)
        if value is None:
            raise input_error(name, f"input {name} is required for mode {self.mode}")
        return value

    def _known(self, name: str) -> None:
        if name not in INPUTS_BY_NAME:
            raise KeyError(name)


def _resolve_one(spec: InputSpec, cli_values: Mapping[str, Any], env: Mapping[str, str]) -> tuple[str | None, str]:
    cli = cli_values.get(spec.name)
    if cli is not None and str(cli).strip() != "":
        return str(cli).strip(), "option"
    from_env = env_input(env, spec.name)
    if from_env is not None:
        return from_env, "input"
    for var in spec.env_fallbacks:
        value = env.get(var)
        if value is not None and value.strip() != "":
            return value.strip(), f"env {var}"
    if spec.default is not None and spec.default != "" and not spec.default.startswith("${{"):
        return spec.default, "default"
    return None, "unset"


def resolve_value(name: str, cli_values: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """One input's value by the same rules as :meth:`Settings.resolve`, without validating the others."""
    return _resolve_one(INPUTS_BY_NAME[name], cli_values, env)[0]


def default_state_dir(env: Mapping[str, str]) -> Path:
    """:func:`default_state_location` as a ``Path``."""
    return Path(default_state_location(env))


def default_state_location(env: Mapping[str, str]) -> str:
    """Where receipts, once-markers and failure.json go when ``state-dir`` is not set.

    A Docker action sees ``RUNNER_TEMP`` as a *host* path that is not mounted into its container, so a
    state dir there would vanish with the container (and later steps could not read its once-markers).
    Inside the container the runner mounts ``/github/runner_temp`` (newer runners) and
    ``/github/workspace``; those are used instead, in that order.
    """
    runner_temp = env.get("RUNNER_TEMP")
    if runner_temp and (os.path.isdir(runner_temp) or env.get("GITHUB_WORKSPACE") != "/github/workspace"):
        return os.path.join(runner_temp, "testops-evidence")
    if env.get("GITHUB_WORKSPACE") == "/github/workspace":
        mounted = "/github/runner_temp"
        if os.path.isdir(mounted):
            return os.path.join(mounted, "testops-evidence")
        return "/github/workspace/.testops-evidence/state"
    return os.path.join(os.getcwd(), ".testops-evidence", "state")
