"""One refusal type and one registry of stable error codes.

Every refusal the action can produce is a :class:`Refusal` whose ``code`` is registered here with its
exit code and a one-line meaning. ``docs/errors.md`` is generated from :data:`REGISTRY` and a test keeps
the two equal, so the documentation cannot drift from the code.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Imported by every start (`--version`, worker phases): no dataclasses, typing or re at import time;
# benchmarks/run.py --only startup and tests/test_startup_imports.py keep it so.

# Exit codes (design.md, "Errors and exit codes").
EXIT_OK = 0
EXIT_CASES_FAILED = 1
EXIT_USAGE = 2
EXIT_INTEGRITY = 3
EXIT_REMOTE = 4

EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "phase done; for evaluating phases, everything passed",
    EXIT_CASES_FAILED: "phase done and recorded, but some cases did not pass (`fail-on-failed-cases: false` makes it 0)",
    EXIT_USAGE: "usage or configuration error (bad input, invalid contract)",
    EXIT_INTEGRITY: "integrity refusal (binding mismatch, digest mismatch, foreign case, token in a worker, unsafe path)",
    EXIT_REMOTE: "remote failure (TestOps or GitHub unreachable, HTTP error, timeout, uncertain mutation)",
}

# What an operator does about an exit code in general (docs/errors.md, and the step summary's "Next step" when a
# code has no hint of its own — a refusal must always say what to do next).
EXIT_ADVICE: dict[int, str] = {
    EXIT_OK: "nothing",
    EXIT_CASES_FAILED: "read the failed cases in the summary; the evidence is recorded",
    EXIT_USAGE: "fix the input or contract field the refusal names, then run again",
    EXIT_INTEGRITY: "do not work around it: compare *expected* and *actual* in the step summary and find out "
                    "why the evidence does not bind",
    EXIT_REMOTE: "check that the service is reachable and the credentials valid, then re-run the job "
                 "(after an uncertain mutation: `mode: reconcile`)",
}


class CodeSpec:
    """One registered code: its exit code, its meaning (docs/errors.md) and the operator's next step."""

    __slots__ = ("code", "exit_code", "hint", "meaning")

    def __init__(self, code: str, exit_code: int, meaning: str, hint: str = "") -> None:
        self.code = code
        self.exit_code = exit_code
        self.meaning = meaning
        self.hint = hint

    def _key(self) -> tuple[str, int, str, str]:
        return (self.code, self.exit_code, self.meaning, self.hint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CodeSpec) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"CodeSpec(code={self.code!r}, exit_code={self.exit_code!r}, meaning={self.meaning!r}, "
                f"hint={self.hint!r})")


def _spec(code: str, exit_code: int, meaning: str, hint: str = "") -> tuple[str, CodeSpec]:
    return code, CodeSpec(code, exit_code, meaning, hint)


_U, _I, _R = EXIT_USAGE, EXIT_INTEGRITY, EXIT_REMOTE

# The registry. Keep codes in `<area>.<reason>` form; group by area. Codes ending in `<...>` are families
# whose last part is filled at run time (an input name, an HTTP status).
REGISTRY: dict[str, CodeSpec] = dict(
    [
        # --- usage and configuration -------------------------------------------------------------
        _spec("input.<name>", _U, "an input is missing or has an invalid value", "Fix the named input."),
        _spec("mode.unknown", _U, "the `mode` input names no phase", "Use one of the modes in the README."),
        _spec("mode.not_built", _U, "the phase is listed in the design but not available in this version",
              "Use a release of the action that has this mode."),
        _spec("contract.missing", _U, "the contract file does not exist", "Create it or set `contract:`."),
        _spec("contract.invalid", _U, "the contract does not match its schema",
              "Fix the contract where the refusal points: the field's JSON pointer, or the line a YAML error "
              "names."),
        _spec("contract.unknown_case", _U, "a case key is not in the contract"),
        _spec("internal.error", _R, "an unexpected error; the message names its type (please report it)",
              "Re-run with debug logging (ACTIONS_STEP_DEBUG) for the traceback, and report it."),
        # --- guard ---------------------------------------------------------------------------------
        _spec("guard.event_file", _I, "the event file is missing, unsafe, too large or not JSON"),
        _spec("guard.event", _I, "the triggering event is not one the trust policy admits"),
        _spec("guard.repository", _I, "the run belongs to another repository"),
        _spec("guard.visibility", _I, "the repository is private but the policy requires a public one"),
        _spec("guard.branch", _I, "the run's branch or ref is not admitted"),
        _spec("guard.workflow", _I, "the run's workflow file is not admitted"),
        _spec("guard.run_attempt", _I, "a re-run attempt where the policy admits only the first",
              "Dispatch a new run instead of re-running, or set `run-attempts: any`."),
        _spec("guard.actor", _I, "the actor or triggering actor is not on the allow-list"),
        _spec("guard.run_mismatch", _I, "the event, environment and REST run object disagree"),
        _spec("guard.local_context", _I, "a local (rehearsal) context cannot publish to TestOps"),
        _spec("guard.outside_actions", _U, "guard ran outside GitHub Actions without `local: true`",
              "Inside a workflow, check the step runs the action; for a rehearsal set `local: true` (`--local true`)."),
        # --- selection -----------------------------------------------------------------------------
        _spec("selection.job_run_binding", _I, "the TestOps job run does not belong to this run"),
        _spec("selection.job_binding", _I, "the TestOps job is not this workflow's job"),
        _spec("selection.launch_binding", _I, "the launch is in another project, closed, or not the job run's"),
        _spec("selection.plan_binding", _I, "the test plan's id, name, project or size differ from the contract"),
        _spec("selection.foreign_case", _I, "a planned case does not match a contract case on both id and selector"),
        _spec("selection.duplicate_case", _I, "a case is planned twice"),
        _spec("selection.empty", _I, "nothing was selected"),
        _spec("selection.digest", _I, "the selection bytes do not hash to the expected digest"),
        _spec("selection.context", _I, "the selection was made for another run, repository or contract"),
        _spec("selection.standing_plan", _U, "the standing testplan.json is invalid or does not cover the contract"),
        _spec("selection.mode", _U, "job-run id inputs disagree (`job-run-id` versus `ALLURE_JOB_RUN_ID`)"),
        _spec("selection.matrix_too_large", _I, "a matrix output would exceed GitHub's output limits",
              "Split the campaign into several selections of the same plan (`cases:`)."),
        _spec("selection.job_run_env", _U, "the `allurectl job-run env` output is invalid"),
        _spec("selection.invalid", _I, "the selection document does not match its schema"),
        _spec("selection.not_planned", _I, "a requested case is not in the plan this selection narrows"),
        _spec("selection.catalog", _U, "the catalog is invalid or has no entry for a selected case"),
        _spec("worker.token_present", _I, "a TestOps token variable exists in a worker job",
              "Remove ALLURE_TOKEN / TESTOPS_TOKEN from the worker job's env."),
        # --- the shipped action and templates (composite/setup.sh, the campaign's case loop) ------------
        _spec("setup.python", _U, "the composite action found no Python 3.11 or newer on the runner",
              "Add actions/setup-python before the step, or use the Docker action."),
        _spec("setup.platform", _U, "the composite action runs on Linux and macOS runners, not on Windows",
              "Run the job on a Linux or macOS runner (runs-on / worker-runs-on)."),
        _spec("case.credentials", _U, "case-secrets lacks a credential the case's contract entry lists",
              "Add it to the JSON of the template's case-secrets secret."),
        _spec("case.no_cell_result", _I, "the case command wrote no cell result; export records the case as broken",
              "Make the case command write TESTOPS_EVIDENCE_CELL_RESULT, even when the case fails."),
        # --- export --------------------------------------------------------------------------------
        _spec("export.cell_binding", _I, "a cell result belongs to another case, run, commit or profile"),
        _spec("export.check_binding", _I, "a cell result's checks differ from the contract's checks"),
        _spec("export.unsupported_pass", _I, "a cell says passed without complete passing evidence"),
        _spec("export.cell_invalid", _I, "a cell result does not match the cell-result/v1 schema"),
        _spec("export.duplicate_cell", _I, "two cell results for the same case"),
        _spec("export.adapter", _U, "a JUnit XML or allure-results input cannot be adapted"),
        _spec("export.receipt", _I, "the export receipt is invalid or does not match the selection"),
        # --- upload and verify ---------------------------------------------------------------------
        _spec("upload.already_started", _I, "a once-marker shows this upload already started",
              "Run `mode: reconcile` to observe TestOps before anything is re-sent."),
        _spec("upload.results_invalid", _I, "the results directory does not match its receipt"),
        _spec("upload.binding", _I, "TestOps attached the upload to another project, job run or launch than the "
              "selection's"),
        _spec("verify.missing", _R, "a receipt row did not appear in TestOps before the deadline"),
        _spec("verify.duplicate", _I, "a receipt row appears more than once in TestOps"),
        _spec("verify.mismatch", _I, "a published result differs from its receipt row"),
        _spec("rehearse.harness", _U, "the example harness of the rehearsal could not run"),
        _spec("rehearse.report", _U, "the rehearsal could not generate the Allure Report"),
        _spec("rehearse.inconsistent", _I, "the rehearsal's phases (or Allure Report) disagree on the counts"),
        # --- bootstrap / launch / reconcile --------------------------------------------------------
        _spec("bootstrap.case_conflict", _I, "a TestOps test case conflicts with the contract (same id, other name, ...)"),
        _spec("bootstrap.plan_conflict", _I, "the TestOps test plan conflicts with the contract"),
        _spec("bootstrap.case_missing", _U, "a contract case's testops-id names no live test case in the project",
              "Create (or restore) the test case in TestOps and put its id in the contract's `testops-id`."),
        _spec("bootstrap.plan_missing", _U, "the contract's plan id names no test plan",
              "Fix `testops.plan.id`, or remove it so that bootstrap finds the plan by name or creates it."),
        _spec("once.already_started", _I, "a once-marker shows this mutation already started",
              "Run `mode: reconcile` to observe TestOps before anything is re-sent."),
        _spec("reconcile.unresolved", _R, "an uncertain mutation could not be resolved by observation"),
        # --- import and ledger ---------------------------------------------------------------------
        _spec("import.foreign_workflow", _I, "the source run is not from an admitted repository, workflow or ref"),
        _spec("import.rerun", _I, "the source run is a re-run attempt the policy does not admit"),
        _spec("import.digest", _I, "the archive or a document does not hash to its recorded digest"),
        _spec("import.unsafe_archive", _I, "the archive has an unsafe entry (absolute, `..`, link, too many, too large)"),
        _spec("import.host", _I, "the host document does not meet the contract's host requirements"),
        _spec("import.definition", _I, "the definition document does not match the result"),
        _spec("import.not_selected", _I, "the cell is not (uniquely) selected by the intent"),
        _spec("import.changed_measurement", _I, "a re-import differs from the measurement already recorded"),
        _spec("import.intent", _U, "the import intent is invalid"),
        _spec("import.document", _I, "a document in the archive is missing, outside the prefix or invalid"),
        _spec("import.artifact", _I, "no artifact of the source run matches `artifact-name`, or a matching one expired"),
        _spec("ledger.locked", _R, "another process holds the ledger lock", "Wait for it, then run again."),
        _spec("ledger.invalid", _I, "the ledger file does not match its schema"),
        _spec("ledger.foreign_campaign", _I, "the ledger file belongs to another campaign",
              "Point `ledger:` at this campaign's ledger."),
        _spec("ledger.conflict", _I, "a ledger change breaks its rules (ordinal taken, attempt not reserved)"),
        _spec("import.not_configured", _U, "the contract has no `remote` section, so nothing may be imported",
              "Add a `remote:` policy to the contract."),
        # --- safe IO -------------------------------------------------------------------------------
        _spec("io.unsafe_path", _I, "a path escapes its root, names a link, or is not a regular file",
              "Name a regular file or directory inside its root, without `..`, links, FIFOs or devices; if "
              "another job left a link there, find out why before running again."),
        _spec("io.too_large", _I, "a file is larger than its cap"),
        _spec("io.exists", _I, "a write-once file already exists",
              "Receipts, selections and exports are written once: use a fresh `state-dir` and output path "
              "per run."),
        _spec("io.state_dir", _I, "the state directory cannot be created, is a link or not a directory, or "
              "belongs to another user",
              "Point `state-dir` at a directory of the job's own user that is not a link (it is created with "
              "mode 0700), or leave it empty for the default."),
        _spec("io.missing", _U, "an input file does not exist"),
        _spec("io.invalid_json", _I, "a file is not valid UTF-8 JSON"),
        # --- remote services -----------------------------------------------------------------------
        _spec("testops.auth", _R, "TestOps refused the credentials (401/403) or the token exchange failed",
              "Check that the secret passed as `testops-token` is a valid API token for this endpoint, with "
              "access to the contract's project."),
        _spec("testops.http_<status>", _R, "TestOps answered with this HTTP status"),
        _spec("testops.transport", _R, "TestOps could not be reached, or the request timed out"),
        _spec("testops.response_invalid", _R, "a TestOps response is not JSON of the expected shape"),
        _spec("testops.response_too_large", _R, "a TestOps response is larger than the size cap"),
        _spec("testops.uncertain", _R, "a mutation may or may not have happened",
              "Run `mode: reconcile`; it observes TestOps and never re-sends blindly."),
        _spec("testops.deadline", _R, "the overall deadline for TestOps requests ran out"),
        _spec("testops.not_configured", _U, "the TestOps backend needs an endpoint, project id and token"),
        _spec("github.http_<status>", _R, "the GitHub REST API answered with this HTTP status"),
        _spec("github.transport", _R, "the GitHub REST API could not be reached"),
        _spec("github.response_invalid", _R, "a GitHub response lacks a field the action needs"),
    ]
)

_AREA_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_")
_REASON_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def _is_code_form(code: str) -> bool:
    """``<area>.<reason>``: ``[a-z_]+`` dot ``[a-z0-9_-]+`` (a string test: no regex engine at start-up)."""
    area, dot, reason = code.partition(".")
    return bool(dot and area and reason) and set(area) <= _AREA_CHARS and set(reason) <= _REASON_CHARS


def lookup(code: str) -> CodeSpec:
    """Return the spec of ``code``, resolving families such as ``testops.http_503``."""
    spec = REGISTRY.get(code)
    if spec is not None:
        return spec
    if not _is_code_form(code):  # a family member must still be `<area>.<reason>` ("input." is not)
        raise KeyError(f"unregistered error code {code!r}")
    if code.startswith("input."):
        return REGISTRY["input.<name>"]
    for family in ("testops.http_", "github.http_"):
        if code.startswith(family) and code[len(family):].isdigit():
            return REGISTRY[family + "<status>"]
    raise KeyError(f"unregistered error code {code!r}")


def is_registered(code: str) -> bool:
    try:
        lookup(code)
    except KeyError:
        return False
    return _is_code_form(code)


class Refusal(Exception):
    """A refusal with a stable code. ``expected``/``actual`` must never hold a secret."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        expected: Any = None,
        actual: Any = None,
        hint: str | None = None,
        http_status: int | None = None,
    ) -> None:
        spec = lookup(code)  # unregistered codes are a programming error, caught by tests
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.expected = expected
        self.actual = actual
        self.hint = hint if hint is not None else spec.hint
        self.http_status = http_status
        self.exit_code = spec.exit_code

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "exit-code": self.exit_code}
        if self.field is not None:
            out["field"] = self.field
            out["expected"] = self.expected
            out["actual"] = self.actual
        if self.hint:
            out["hint"] = self.hint
        if self.http_status is not None:
            out["http-status"] = self.http_status
        return out

    def __str__(self) -> str:
        text = f"{self.code}: {self.message}"
        if self.field is not None:
            text += f" (field {self.field}: expected {_shown(self.expected)}, actual {_shown(self.actual)})"
        return text


def _shown(value: Any) -> str:
    """A value as the operator reads it in an annotation: a quoted string, anything else as JSON (``["A"]``,
    ``null``, ``true``), not a Python repr of a list, dict, None or bool."""
    if isinstance(value, str):
        return repr(value)  # quoted with newlines escaped; JSON would escape the quotes a message often holds
    import json  # only when a refusal is shown: errors is imported at every start

    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def binding(code: str, field: str, expected: Any, actual: Any, message: str | None = None) -> None:
    """Refuse with ``code`` unless ``expected == actual``."""
    if expected != actual:
        raise Refusal(code, message or f"{field} does not match", field=field, expected=expected, actual=actual)


def input_error(name: str, message: str, *, actual: Any = None, expected: Any = None) -> Refusal:
    return Refusal(f"input.{name}", message, field=name if expected is not None else None,
                   expected=expected, actual=actual)
