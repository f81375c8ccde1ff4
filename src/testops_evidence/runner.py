"""Runs one phase: masks secrets, enforces token rules, turns the result or refusal into outputs,
a step summary, annotations, ``failure.json`` and an exit code."""

from __future__ import annotations

import contextlib
import importlib
import os
import time
import traceback
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testops_evidence import summary
from testops_evidence.actions import Runtime
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal
from testops_evidence.interface import INPUTS_BY_NAME, MODES, TOKEN_VARIABLES, WORKER_PHASES
from testops_evidence.phases import PHASE_MODULES
from testops_evidence.safeio import StateDir
from testops_evidence.settings import Settings, default_state_location, env_input, resolve_value

if TYPE_CHECKING:
    from testops_evidence.backends import Backend
    from testops_evidence.context import RunContext
    from testops_evidence.contract import Contract
    from testops_evidence.md import Markdown
    from testops_evidence.testops.client import TestOpsClient


def _new_uuid() -> str:
    return str(uuid.uuid4())


@dataclass
class PhaseResult:
    """What a phase returns: the headline sentence, outputs, the summary body and the exit code.

    ``brief``: the step summary is one line (the headline) with the body folded into ``<details>`` — for the
    steps a campaign repeats or that only confirm a binding (workers, upload), so the run page leads with the
    campaign's verdict rather than with their digests."""

    headline: str
    outputs: dict[str, Any] = field(default_factory=dict)
    summary: str = ""
    exit_code: int = EXIT_OK
    brief: bool = False


class PhaseContext:
    """Everything a phase may touch. Time, sleep and UUIDs are injected so tests never sleep."""

    def __init__(
        self,
        mode: str,
        settings: Settings,
        runtime: Runtime,
        env: Mapping[str, str],
        state: StateDir,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        new_uuid: Callable[[], str] = _new_uuid,
        _contract: Contract | None = None,
    ) -> None:
        self.mode = mode
        self.settings = settings
        self.runtime = runtime
        self.env = env
        self.state = state
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.new_uuid = new_uuid
        self._contract = _contract
        # The phase whose compiled form contract() built the contract from ("guard" or "select"), for the
        # summaries; None when it parsed the contract file.
        self.contract_compiled_by: str | None = None

    def contract_row(self, contract: Contract) -> Markdown:
        """The summary row that says how this phase obtained the contract: select's compiled form, or a parse."""
        from testops_evidence.md import Markdown, code

        if self.contract_compiled_by is not None:
            return Markdown(f"compiled by {self.contract_compiled_by}, bound by digest")
        return Markdown("parsed from " + code(contract.source_path))

    def contract(self) -> Contract:
        if self._contract is None:
            from testops_evidence.contract import load_contract

            path = self.settings.path("contract") or Path(".github/testops-evidence.yml")
            compiled = self._compiled_contract(path)
            self.contract_compiled_by = None if compiled is None else ("guard" if self.mode == "select" else "select")
            self._contract = compiled if compiled is not None else load_contract(path)
        return self._contract

    def _compiled_contract(self, path: Path) -> Contract | None:
        """The contract ``select`` compiled, when this phase reads a selection whose digest travelled and every
        digest binds it (:mod:`campaign.compiled`); for ``select``, the contract ``guard`` compiled earlier in this
        job, bound by its ``guard-sha256``; else ``None``, and the contract file is parsed."""
        if self.mode == "select":
            return self._guarded_contract(path)
        if not INPUTS_BY_NAME["selection-sha256"].applies_to(self.mode):
            return None
        from testops_evidence.campaign.compiled import load_compiled

        travelled = self.settings.string("selection-sha256")
        if travelled is not None and self.mode == "pages":
            # Optional to pages, whose phase never reads it: a typo is refused, not silently a parse. The phases
            # that require it refuse a malformed one themselves.
            from testops_evidence.campaign.selection import check_sha256

            check_sha256(travelled)
        if travelled is None and self.mode == "cell":  # the variable the campaign template gives every case
            travelled = (self.env.get("TESTOPS_EVIDENCE_SELECTION_SHA256") or "").strip() or None
        try:
            selection_path = self.settings.path("selection-path") or Path("testops-evidence-selection.json")
        except Refusal:
            return None  # the phase refuses the input itself
        contract, why = load_compiled(path, selection_path, travelled)
        self.runtime.log(f"contract: {why}" if contract is not None
                         else f"contract: parsed from {path} (compiled form not used: {why})")
        return contract

    def _guarded_contract(self, path: Path) -> Contract | None:
        from testops_evidence.campaign.compiled import load_guarded
        from testops_evidence.campaign.selection import check_sha256

        given = self.settings.string("guard-sha256")
        if given is None:
            return None
        contract, why = load_guarded(path, self.state.path, check_sha256(given, "guard-sha256"))
        self.runtime.log(f"contract: {why}" if contract is not None
                         else f"contract: parsed from {path} (compiled form not used: {why})")
        return contract

    def backend(self) -> str:
        """The backend's name: the ``backend`` input, else ``testops`` when the contract names a TestOps (but
        ``files`` for a ``local`` run, whose evidence may never reach TestOps)."""
        from testops_evidence.backends import choose

        explicit = self.settings.string("backend")
        # The contract is read only when it decides (an explicit backend needs no contract to be named).
        return choose(explicit, contract_names_testops=explicit is None and not self.settings.boolean("local")
                      and self.contract().testops is not None)

    def testops_token(self) -> str:
        token = self.settings.string("testops-token")
        if not token:
            raise Refusal("testops.not_configured", f"mode {self.mode} needs a TestOps token "
                          "(input testops-token, or ALLURE_TOKEN)", field="testops-token",
                          expected="a token", actual="(unset)")
        return token

    def github_token(self) -> str | None:
        return self.settings.string("github-token")

    def readmit(self) -> RunContext:
        """The run this phase binds to, admitted again over REST against the contract's trust policy and bound
        to the operation the run was dispatched for (:func:`trust.readmit`): the phases that start from the run
        call it before they use a token, whether or not the workflow ran ``guard``. A local run (and a run
        outside Actions) gets the rehearsal context, which never reaches TestOps."""
        from testops_evidence import github_run, trust

        local = self.settings.boolean("local") if INPUTS_BY_NAME["local"].applies_to(self.mode) else False
        return trust.readmit(self.env, self.contract(), self.mode, token=self.github_token(),
                             policy=github_run.request_policy(self.env, self.sleep), local=local,
                             log=self.runtime.log)

    def testops_client(self) -> TestOpsClient:
        """The TestOps client of this phase: the contract's ``testops`` section, the endpoint and project
        inputs, the token, the transport tuning of the environment, and this context's clocks and log."""
        from testops_evidence.testops.client import TestOpsClient, testops_config

        config = testops_config(self.contract(), self.mode)
        return TestOpsClient.configured(
            config, self.testops_token(), endpoint=self.settings.string("testops-endpoint"),
            project_id=self.settings.integer("testops-project-id", minimum=1), env=self.env, clock=self.clock,
            monotonic=self.monotonic, sleep=self.sleep, log=self.runtime.debug, mask=self.runtime.mask)

    def open_backend(self) -> Backend:
        """The backend this phase publishes to (:mod:`backends`), with the services it may use."""
        from testops_evidence.backends import Services, open_backend

        return open_backend(self.backend(), Services(state=self.state, log=self.runtime.log,
                                                     monotonic=self.monotonic, sleep=self.sleep,
                                                     testops=self.testops_client))


def worker_token_variables(env: Mapping[str, str]) -> list[str]:
    """Token variables present in a worker's environment: the *key* counts, even with an empty value."""
    present = [name for name in TOKEN_VARIABLES if name in env]
    if env_input(env, "testops-token") is not None:
        present.append("INPUT_TESTOPS-TOKEN")
    return present


def run_phase(
    mode: str | None,
    cli_values: Mapping[str, Any],
    env: Mapping[str, str],
    runtime: Runtime,
    *,
    context_factory: Callable[..., PhaseContext] = PhaseContext,
    modes: Collection[str] = PHASE_MODULES,
) -> int:
    """Run ``mode`` (one of ``modes``: the action runs only its modes, the CLI every command) and report it."""
    # Secrets are masked before anything else can print them.
    for name, spec in INPUTS_BY_NAME.items():
        if spec.secret:
            for key in (*(f"INPUT_{name.upper()}", f"INPUT_{name.upper().replace('-', '_')}"), *spec.env_fallbacks):
                _mask_secret(runtime, env.get(key))
            _mask_secret(runtime, cli_values.get(name))

    # The state dir is found before the other inputs are validated, so that even the refusal of a bad
    # input lands in failure.json.
    state_value = resolve_value("state-dir", cli_values, env)
    # The workspace is a checkout: below it, the state dir is reached without following links.
    state: StateDir | None = StateDir(state_value if state_value and "\x00" not in state_value
                                      else default_state_location(env),
                                      workspace=env.get("GITHUB_WORKSPACE") or os.getcwd())
    # `check` only reads: it keeps no summary copy and no failure.json unless a state dir is asked for (a
    # maintainer's next step after `check` is to commit, and a stray .testops-evidence/ got committed too).
    kept = state if mode != "check" or state_value else None
    try:
        if mode is None:
            raise Refusal("input.mode", "input mode is required", field="mode", expected=" | ".join(modes), actual="")
        if mode not in modes or mode not in PHASE_MODULES:
            raise Refusal("mode.unknown", f"mode {mode!r} is not a phase", field="mode", expected=" | ".join(modes),
                          actual=mode)
        settings = Settings.resolve(mode, cli_values, env)
        if "\x00" in (settings.string("state-dir") or ""):
            settings.path("state-dir")  # refuses the NUL byte with input.state-dir (pathlib only then)
        if settings.is_set("selection-dir") and INPUTS_BY_NAME["selection-dir"].applies_to(mode):
            # The selection artifact's own directory, checked before the phase reads a byte of it (artifactdir.py).
            from testops_evidence.artifactdir import bind_selection_dir

            settings = bind_selection_dir(settings)
        if mode in WORKER_PHASES:
            present = worker_token_variables(env)
            if present:
                raise Refusal("worker.token_present", f"worker mode {mode} refuses to run while a TestOps token "
                              f"variable exists ({', '.join(present)}), even an empty one",
                              field="environment", expected="no TestOps token variable", actual=present)
        if mode in MODES and state is not None:
            # Check the state dir before the phase writes anything anywhere: a phase must not leave its
            # results behind and only then find that its receipts cannot be written safely.
            state.check()
        ctx = context_factory(mode=mode, settings=settings, runtime=runtime, env=env, state=state)
        module_name = f"testops_evidence.phases.{PHASE_MODULES[mode]}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only the phase module itself missing means "not built"; a module the phase imports that is
            # missing (a broken install) is an internal error, reported below like any other.
            if exc.name != module_name:
                raise
            raise Refusal("mode.not_built", f"mode {mode} is not available in this version") from None
        result: PhaseResult = module.run(ctx)
    except Refusal as refusal:
        return report_refusal(mode or "testops-evidence", refusal, runtime, kept)
    except Exception as exc:  # the last line of defence: still a coded, summarised failure
        runtime.debug(traceback.format_exc())
        internal = Refusal("internal.error", f"unexpected {type(exc).__name__} in mode {mode}: {exc}")
        return report_refusal(mode or "testops-evidence", internal, runtime, kept)

    try:
        for name, value in result.outputs.items():
            runtime.set_output(name, value)
    except Refusal as refusal:
        return report_refusal(mode, refusal, runtime, kept)
    if result.brief:
        runtime.summary(summary.render("brief", mode=summary.code(mode), headline=summary.Markdown(result.headline),
                                       details=summary.Markdown(result.summary.strip())))
    else:
        runtime.summary(summary.render("phase", mode=summary.code(mode), headline=summary.Markdown(result.headline))
                        + result.summary)
    keep_summary(kept, mode, runtime)
    exit_code = result.exit_code
    if exit_code == EXIT_CASES_FAILED and not _fail_on_failed(settings):
        runtime.annotate("notice", "some cases did not pass; fail-on-failed-cases is false, so the step succeeds")
        exit_code = EXIT_OK
    return exit_code


def _mask_secret(runtime: Runtime, value: Any) -> None:
    """Mask the value as given and as Settings uses it (stripped): a pasted token often ends in a newline."""
    if isinstance(value, str):
        runtime.mask(value)
        runtime.mask(value.strip())


def _fail_on_failed(settings: Settings) -> bool:
    return settings.boolean("fail-on-failed-cases") if settings.is_set("fail-on-failed-cases") else True


def report_refusal(mode: str, refusal: Refusal, runtime: Runtime, state: StateDir | None) -> int:
    """Outputs ``error-code``, an ``::error`` annotation, a summary section and ``failure.json``."""
    try:
        runtime.set_output("error-code", refusal.code)
    except Refusal as unwritable:  # GITHUB_OUTPUT itself failed: the annotation and failure.json still say it
        runtime.annotate("warning", unwritable.message)
    if not runtime.prints_summary:  # a terminal gets the refusal once, as the section below (on stderr)
        runtime.annotate("error", str(refusal), title=refusal.code)
    written = record_refusal(mode, refusal, runtime, state)
    where = f"\n{summary.code(written, limit=None)} holds the same facts as JSON.\n" if written is not None else ""
    runtime.summary(summary.refusal_section(refusal, mode, state.started if state is not None else None) + where,
                    refusal=True)
    keep_summary(state, mode, runtime)
    return refusal.exit_code


def record_refusal(mode: str, refusal: Refusal, runtime: Runtime, state: StateDir | None) -> Path | None:
    """The one writer of a refusal's record: ``failure.json`` in the state dir and the ``refusal`` of ``--json``,
    both scrubbed by the runtime (a phase that reports a refusal beside its outputs, as reconcile does, calls
    this too, so no failure.json bypasses the mask). Returns failure.json's path, or None when none was written."""
    document = _scrub_document({"mode": mode, **refusal.to_json()}, runtime)
    runtime.refusal = document
    if state is None:
        return None
    try:
        return state.write_failure(document)
    except (Refusal, OSError) as exc:
        runtime.annotate("warning", f"failure.json could not be written: {exc}")
        return None


SUMMARY_COPY_LIMIT = 1024 * 1024  # GitHub's own limit for one step's summary


def keep_summary(state: StateDir | None, mode: str, runtime: Runtime) -> None:
    """A copy of what this step wrote to its summary, as ``summaries/<mode>.md`` in the state dir: a workflow
    keeps the state dir as an artifact when a job fails (the campaign template does), and the runner's own
    summary files are gone with the runner. Best effort: the summary itself is already written."""
    if state is None or not runtime.summary_written:
        return
    text = "".join(runtime.summary_written).encode("utf-8")
    if len(text) > SUMMARY_COPY_LIMIT:
        # Cut at the last line break before the limit, as the step summary itself is: a cut inside a character
        # left a copy that a strict UTF-8 reader cannot open.
        text = text[:SUMMARY_COPY_LIMIT]
        text = text[:text.rfind(b"\n") + 1]
    try:
        state.check()
        directory = os.path.join(state.location, "summaries")
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        if os.path.islink(directory):
            raise OSError(f"{directory} is a link")
        name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in mode) or "phase"
        temp = os.path.join(directory, f".{name}.md.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, text)
        finally:
            os.close(fd)
        os.replace(temp, os.path.join(directory, f"{name}.md"))
    except (Refusal, OSError) as exc:
        runtime.annotate("warning", f"the copy of the step summary could not be kept in the state dir: {exc}")


def _scrub_document(value: Any, runtime: Runtime) -> Any:
    if isinstance(value, str):
        return runtime.scrub(value)
    if isinstance(value, dict):
        # Keys too: a refusal's expected/actual may be a document whose keys came from untrusted input.
        return {_scrub_document(k, runtime): _scrub_document(v, runtime) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_document(v, runtime) for v in value]
    return value
