"""The GitHub Actions runtime: outputs, step summary, annotations, masking and log groups.

Inside Actions the environment files (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``) are appended to and
workflow commands are printed. Outside Actions the same calls print readable text, and a summary file
given on the command line receives the Markdown. Everything that is printed or written passes through
the mask, so a registered secret never leaves the process, whatever the caller does.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from testops_evidence.errors import Refusal
from testops_evidence.terminal import plain

if TYPE_CHECKING:
    from testops_evidence.redact import Redactor

# GitHub shows at most 1 MiB of summary per step; above that the upload fails (with an annotation).
SUMMARY_LIMIT_BYTES = 1024 * 1024
_TRUNCATION_NOTICE = (
    "\n\n> [!WARNING]\n> The step summary was truncated at GitHub's 1 MiB limit; "
    "the full details are in the receipts in the state directory.\n"
)


def escape_data(value: str) -> str:
    """Workflow-command message escaping (``%``, CR, LF), as the Actions toolkit does."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Workflow-command property escaping: data escaping plus ``:`` and ``,``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def encodable(text: str) -> str:
    """``text`` with code points UTF-8 cannot encode (lone surrogates) shown as ``\\udXXX`` escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


_TERMINAL_TABLE: dict[int, str] = {}


def inert_lines(text: str) -> str:
    """``text`` for the Actions log with no line the runner would take as a workflow command: a line that starts
    (after spaces) with ``::`` or the legacy ``##[`` gets a WORD JOINER in front, and a carriage return, which
    the runner also splits lines at, is shown as ``␍``. A workflow path, a branch or a server's words logged in
    a line of ours could otherwise set an output (``::set-output``), stop command processing or add a mask."""
    if "::" not in text and "##[" not in text and "\r" not in text:
        return text
    lines = text.replace("\r", "\u240d").split("\n")
    return "\n".join("\u2060" + line if line.lstrip().startswith(("::", "##[")) else line for line in lines)


def for_terminal(text: str) -> str:
    """``text`` as a terminal may receive it: C0 controls but line feed and tab, DEL and the C1 controls shown
    as their Control Pictures (``␛``) or ``�``. An escape sequence in a server's answer, a file name or a
    report (ANSI colours, an OSC 8 link, a title change, a clear-screen) would otherwise act on the terminal of
    whoever reads the log, instead of being read; a carriage return would overwrite the line before it."""
    if text.isascii() and text.replace("\n", "").replace("\t", "").isprintable():  # the common line: no table
        return text
    if not _TERMINAL_TABLE:
        _TERMINAL_TABLE.update({c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)})
        _TERMINAL_TABLE[0x7F] = "\u2421"
        _TERMINAL_TABLE.update({c: "\ufffd" for c in range(0x80, 0xA0)})
    return text.translate(_TERMINAL_TABLE)


def format_output_value(value: Any) -> str:
    """Outputs are strings; structured values become one-line JSON, booleans ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=False, ensure_ascii=False)


class Runtime:
    """Talks to the runner. One instance per process; construct it from the environment."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        summary_file: str | None = None,
        json_output: bool = False,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self._out = stdout if stdout is not None else sys.stdout
        # A test that captures stdout alone sees the diagnostics in the same stream.
        self._err = stderr if stderr is not None else (stdout if stdout is not None else sys.stderr)
        self.in_actions = self.env.get("GITHUB_ACTIONS") == "true"
        # --json: stdout carries one JSON document (cli.py writes it); what a person reads goes to stderr.
        self.json_output = json_output
        self._output_path = self.env.get("GITHUB_OUTPUT") or None
        self._summary_path = summary_file or self.env.get("GITHUB_STEP_SUMMARY") or None
        self._summary_used = 0
        self._summary_truncated = False
        self._masks: list[str] = []
        self._redactor: Redactor | None = None
        self.outputs: dict[str, str] = {}
        # The refusal this process reported, as failure.json holds it (scrubbed), for `--json`.
        self.refusal: dict[str, Any] | None = None
        # What this process wrote to the step summary (scrubbed): the runner keeps a copy in the state dir,
        # because the runner's own summary files are gone with the runner.
        self.summary_written: list[str] = []

    # --- masking ---------------------------------------------------------------------------------
    def mask(self, value: str | None) -> None:
        """Register a secret: printed as ``::add-mask::`` in Actions, and scrubbed from all we emit."""
        if not value or value in self._masks:
            return
        self._masks.append(value)
        self._masks.sort(key=len, reverse=True)
        self._redactor = None  # built again, with this secret, when text is next scrubbed
        if self.in_actions:
            # The mask command itself must not be scrubbed, or the runner would never learn the value.
            self._out.write(f"::add-mask::{escape_data(value)}\n")
            self._out.flush()

    def scrub(self, text: str) -> str:
        """What may leave the process: masks applied, and text that UTF-8 can encode. A lone surrogate
        (``"\\ud800"`` in a JSON input) would otherwise raise while the output, summary or failure.json
        is written, and the refusal that names the bad value would crash instead of being reported."""
        if self._masks:
            if self._redactor is None:
                from testops_evidence.redact import Redactor

                self._redactor = Redactor(self._masks)
            # Whole secrets and any piece of one a cut elsewhere left behind (redact.FRAGMENT characters).
            text = self._redactor(text)
        return encodable(text)

    # --- logging -----------------------------------------------------------------------------------
    def log(self, message: str) -> None:
        stream = self._err if self.json_output else self._out
        message = self.scrub(message)
        stream.write((inert_lines(message) if self.in_actions else for_terminal(message)) + "\n")
        stream.flush()

    def annotate(self, level: str, message: str, *, title: str | None = None) -> None:
        if level not in ("notice", "warning", "error"):
            raise ValueError(level)
        message = self.scrub(message)
        if self.in_actions:
            props = f" title={escape_property(self.scrub(title))}" if title else ""
            self._out.write(f"::{level}{props}::{escape_data(message)}\n")
            self._out.flush()
        else:  # a diagnostic: stderr, as a terminal user (and a shell pipe) expects
            head = f"{level}" + (f" [{self.scrub(title)}]" if title else "")
            self._err.write(for_terminal(f"{head}: {message}") + "\n")
            self._err.flush()

    def debug(self, message: str) -> None:
        if self.in_actions:
            self._out.write(f"::debug::{escape_data(self.scrub(message))}\n")
            self._out.flush()

    @contextlib.contextmanager
    def group(self, title: str) -> Iterator[None]:
        """``with runtime.group(title):`` — a collapsible log group in Actions, a heading elsewhere."""
        title = self.scrub(title)
        self._out.write(f"::group::{escape_data(title)}\n" if self.in_actions else f"== {for_terminal(title)}\n")
        self._out.flush()
        try:
            yield
        finally:
            if self.in_actions:
                self._out.write("::endgroup::\n")
                self._out.flush()

    # --- outputs -----------------------------------------------------------------------------------
    def set_output(self, name: str, value: Any) -> None:
        text = self.scrub(format_output_value(value))
        self.outputs[name] = text
        if self._output_path is None:
            # Outside Actions an output is for `--json` (cli.py prints them all at the end), not a line of the
            # terminal's text; a runner without GITHUB_OUTPUT still gets them in its log.
            if self.in_actions:
                self._out.write(f"output {name}={text}\n" if "\n" not in text else f"output {name}:\n{text}\n")
                self._out.flush()
            return
        if "\n" in text or "\r" in text:
            # A random delimiter that cannot occur on its own line in the value (toolkit behaviour).
            while True:
                delim = f"ghadelimiter_{secrets.token_hex(16)}"
                if delim not in text:
                    break
            record = f"{name}<<{delim}\n{text}\n{delim}\n"
        else:
            record = f"{name}={text}\n"
        try:
            with open(self._output_path, "a", encoding="utf-8") as handle:
                handle.write(record)
        except OSError as exc:
            # A later step would miss this output (a digest, the error code): the step must fail, with a code,
            # not with a traceback and Python's exit code 1 ("cases failed").
            raise Refusal("io.write_failed", f"the step output {name} could not be written to GITHUB_OUTPUT "
                          f"({exc.strerror or type(exc).__name__})", field="GITHUB_OUTPUT",
                          expected="a file the step can append to", actual=self._output_path) from None

    @property
    def prints_summary(self) -> bool:
        """Whether the summary goes to the terminal as plain text (outside Actions, no summary file)."""
        return self._summary_path is None and not self.in_actions

    # --- step summary -------------------------------------------------------------------------------
    def summary(self, markdown: str, *, refusal: bool = False) -> None:
        """Append Markdown to the step summary, never exceeding 1 MiB; never raises on I/O errors. Without a
        summary file, outside Actions, it is printed as plain text (terminal.py): to stdout, or to stderr for
        a ``refusal`` and under ``--json``."""
        markdown = self.scrub(markdown)
        if not markdown.endswith("\n"):
            markdown += "\n"
        self.summary_written.append(markdown)
        if self._summary_path is None:
            if self.in_actions:
                self._out.write(markdown)
                self._out.flush()
                return
            stream = self._err if refusal or self.json_output else self._out
            stream.write(for_terminal(plain(markdown)))
            stream.flush()
            return
        if self._summary_truncated:
            return
        if self._summary_used == 0:
            try:  # the step may already have written part of its summary (several phases in one step)
                self._summary_used = os.stat(self._summary_path).st_size
            except OSError:
                self._summary_used = 0
        data = markdown.encode("utf-8")
        notice = _TRUNCATION_NOTICE.encode("utf-8")
        if self._summary_used + len(data) > SUMMARY_LIMIT_BYTES:
            room = SUMMARY_LIMIT_BYTES - self._summary_used - len(notice)
            cut = data[: max(room, 0)]
            # Cut on a line boundary so a table is not left with half a row, and keep valid UTF-8.
            cut = cut[: cut.rfind(b"\n") + 1] if b"\n" in cut else b""
            # When even the notice does not fit (an earlier step filled the file), write nothing: one
            # byte over the limit and GitHub drops the whole summary of the step.
            data = cut + notice if room >= 0 else b""
            self._summary_truncated = True
        try:
            with open(self._summary_path, "ab") as handle:
                handle.write(data)
            self._summary_used += len(data)
        except OSError as exc:  # a summary must never fail the step
            self.annotate("warning", f"could not write the step summary: {exc.strerror}")
            self._summary_path = None
