"""Parser of ``allurectl job-run env`` output: the manual-mode alternative to the REST job-run lookup.

allurectl prints ``KEY=VALUE`` lines (so that ``export $(allurectl job-run env)`` works); older versions
and some scripts show ``KEY = VALUE`` (people parse them with ``awk '{print $3}'``), so both are read.
The text is untrusted (it passed through a file or a step output), hence the strict rules:

* at most 16 KiB, UTF-8, no control characters other than newlines and tabs;
* blank lines and ``#`` comments are skipped; every other line must be ``NAME=VALUE`` or ``NAME = VALUE``
  with ``NAME`` in ``[A-Z_][A-Z0-9_]*`` (an optional leading ``export `` is accepted);
* a name twice is refused (which of the two would be the truth?);
* ``ALLURE_JOB_RUN_ID``, ``ALLURE_LAUNCH_ID`` and ``ALLURE_PROJECT_ID`` must be positive integers;
* ``ALLURE_TOKEN`` lines are dropped: their value is never kept, returned or echoed. Refusals name a
  line by its number, never by its content, so a secret on a malformed line cannot leak either.

Every problem is a ``selection.job_run_env`` refusal (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from testops_evidence.errors import Refusal

CODE = "selection.job_run_env"
MAX_BYTES = 16 * 1024
SECRET_NAMES = frozenset({"ALLURE_TOKEN"})
ID_NAMES = ("ALLURE_JOB_RUN_ID", "ALLURE_LAUNCH_ID", "ALLURE_PROJECT_ID")

_LINE = re.compile(r"^(?:export[ \t]+)?(?P<name>[A-Z_][A-Z0-9_]{0,127})(?:=|[ \t]+=[ \t]*)(?P<value>.*)$")
_ID = re.compile(r"^[1-9][0-9]{0,17}\Z")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class JobRunEnv:
    """What ``allurectl job-run env`` said, minus the token."""

    variables: Mapping[str, str] = field(default_factory=dict)
    token_seen: bool = False

    def _id(self, name: str) -> int | None:
        value = self.variables.get(name)
        return int(value) if value is not None else None

    @property
    def job_run_id(self) -> int | None:
        return self._id("ALLURE_JOB_RUN_ID")

    @property
    def launch_id(self) -> int | None:
        return self._id("ALLURE_LAUNCH_ID")

    @property
    def project_id(self) -> int | None:
        return self._id("ALLURE_PROJECT_ID")

    @property
    def endpoint(self) -> str | None:
        return self.variables.get("ALLURE_ENDPOINT")

    @property
    def job_run_url(self) -> str | None:
        return self.variables.get("ALLURE_JOB_RUN_URL")

    @property
    def launch_url(self) -> str | None:
        return self.variables.get("ALLURE_LAUNCH_URL")


def parse_job_run_env(data: bytes | str) -> JobRunEnv:
    """Parse the output; refuse ``selection.job_run_env`` on anything doubtful."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise Refusal(CODE, f"the job-run env output is {len(raw)} bytes, over the {MAX_BYTES}-byte cap",
                      field="size", expected=f"<= {MAX_BYTES} bytes", actual=len(raw))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(CODE, "the job-run env output is not UTF-8", field="encoding", expected="UTF-8",
                      actual="undecodable bytes") from None
    variables: dict[str, str] = {}
    seen: set[str] = set()
    token_seen = False
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _CONTROL.search(line):
            raise Refusal(CODE, f"line {number} of the job-run env output has a control character",
                          field=f"line {number}", expected="printable text", actual="a control character")
        match = _LINE.match(stripped)
        if match is None:
            raise Refusal(CODE, f"line {number} of the job-run env output is not NAME=VALUE",
                          field=f"line {number}", expected="NAME=VALUE or NAME = VALUE",
                          actual="an unreadable line (not shown: it may hold a secret)")
        name = match.group("name")
        if name in seen:
            raise Refusal(CODE, f"{name} appears twice in the job-run env output", field=name,
                          expected="each name once", actual=f"again on line {number}")
        seen.add(name)
        if name in SECRET_NAMES:
            token_seen = True
            continue
        value = match.group("value").strip()
        if name in ID_NAMES and not _ID.match(value):
            raise Refusal(CODE, f"{name} must be a positive integer", field=name,
                          expected="a positive integer", actual=value[:40])
        variables[name] = value
    return JobRunEnv(variables=variables, token_seen=token_seen)
