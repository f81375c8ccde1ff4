"""``testops-evidence rehearse``: the whole campaign on one machine, on the files backend.

guard (``local``) → select → the example harness (a real pytest run) and ``cell`` per case, one case
measured by an Inspect AI eval (``examples/inspect/``) → export → upload → verify → Allure Report. Every phase is a real phase run (``runner.run_phase``) with its own
runtime; its step summary is written to ``summaries/`` and printed. Everything stays in a fresh
directory ``<workdir>/<UTC timestamp>/``: the selection, cell results, ``allure-results/`` and its
receipt, the state directory (receipts, the publication ``state/published/`` with its ``allure-report/``), logs.

The examples include a failing and a broken case on purpose, so export and verify exit 1 ("recorded,
not all passed"). The rehearsal itself exits 0 when every phase behaved as designed: no refusal, and
the counts agree from export to verify to Allure Report. A refusal stops it with that phase's exit code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testops_evidence import casecommand, summary
from testops_evidence.actions import Runtime
from testops_evidence.campaign.matrix import LANES, units_of
from testops_evidence.errors import EXIT_CASES_FAILED, EXIT_OK, Refusal, lookup
from testops_evidence.interface import TOKEN_VARIABLES
from testops_evidence.publication import report as report_tool
from testops_evidence.runner import PhaseContext, PhaseResult, run_phase

if TYPE_CHECKING:
    from testops_evidence.contract import Contract

# Variables that would make a phase believe it runs in GitHub Actions, or hand it a credential.
_STRIPPED_PREFIXES = ("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_", "ALLURE_")
_STRIPPED = (*TOKEN_VARIABLES, "GH_TOKEN", "CI")
# The interpreter scripts/setup.sh installs inspect-ai into (test-only; never this package's own).
INSPECT_PYTHON = Path(".tools") / "producers" / "bin" / "python"
INSPECT_CASE = "read-company-goals"
BRIEF_LEAD = "**testops-evidence · "  # templates/brief.md


@dataclass
class Step:
    mode: str
    exit_code: int
    outputs: dict[str, str]
    summary: str
    summary_path: Path
    headline: str = ""
    allowed: tuple[int, ...] = (EXIT_OK,)

    @property
    def ok(self) -> bool:
        return self.exit_code in self.allowed


@dataclass
class Rehearsal:
    ctx: PhaseContext
    run_dir: Path
    env: dict[str, str]
    steps: list[Step] = field(default_factory=list)
    own_cases: bool = False  # the user's case command measures the cases, not the example harness

    def phase(self, mode: str, options: Mapping[str, Any], *, allowed: tuple[int, ...] = (EXIT_OK,),
              quiet: bool = False, name: str | None = None) -> Step:
        """Run one phase for real; ``quiet`` steps (one per cell) print their headline only."""
        if quiet:
            (self.run_dir / "summaries" / "cells").mkdir(exist_ok=True)
            label = f"cells/{name or mode}"
        else:
            label = f"{sum(1 for s in self.steps if s.summary_path.parent.name == 'summaries') + 1:02d}-{mode}"
        summary_path = self.run_dir / "summaries" / f"{label}.md"
        log_path = self.run_dir / "logs" / f"{label.replace('/', '-')}.log"
        ctx = self.ctx

        def factory(**kwargs: Any) -> PhaseContext:
            return PhaseContext(**kwargs, clock=ctx.clock, monotonic=ctx.monotonic, sleep=ctx.sleep,
                                new_uuid=ctx.new_uuid)

        with log_path.open("w", encoding="utf-8") as log:
            runtime = Runtime(self.env, stdout=log, summary_file=str(summary_path))
            code = run_phase(mode, dict(options), self.env, runtime, context_factory=factory)
        text = summary_path.read_text(encoding="utf-8") if summary_path.exists() else ""
        headline = _headline_of(text)
        step = Step(mode, code, dict(runtime.outputs), text, summary_path, headline, allowed)
        self.steps.append(step)
        if quiet:
            ctx.runtime.log(f"   {mode}: exit {code} — {headline}")
        else:
            ctx.runtime.log(f"\n━━━ {label} (exit {code}) ━━━  {summary_path}\n\n{text}")
        return step


def _headline_of(text: str) -> str:
    """A step summary's headline: the line after the heading, or a one-line step's own line after its bold
    lead (PhaseResult.brief), never the ``<details>`` that follows it."""
    lines = text.splitlines()
    if lines and lines[0].startswith(BRIEF_LEAD) and "** " in lines[0]:
        return lines[0].split("** ", 1)[1]
    return next((line for line in lines[1:] if line.strip()), "")


def _clean_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    kept, dropped = {}, []
    for key, value in env.items():
        if key.startswith(_STRIPPED_PREFIXES) or key in _STRIPPED:
            dropped.append(key)
        else:
            kept[key] = value
    return kept, sorted(dropped)


def _fresh_dir(workdir: Path, now: float) -> Path:
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    workdir.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = workdir / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            candidate.mkdir(mode=0o700)
        except FileExistsError:
            continue
        for sub in ("summaries", "logs", "harness"):
            (candidate / sub).mkdir()
        return candidate
    raise Refusal("io.exists", f"no fresh rehearsal directory under {workdir}", field="workdir",
                  expected="a new directory", actual=str(workdir))


def _earlier_history(run_dir: Path) -> Path | None:
    """The report history of the newest earlier rehearsal in the same workdir, so that rehearsals kept in one
    directory show trends like the runs of a campaign do (upload reads and checks it as any history)."""
    earlier = sorted((entry for entry in run_dir.parent.iterdir()
                      if entry.name < run_dir.name and entry.is_dir() and not entry.is_symlink()),
                     key=lambda entry: entry.name, reverse=True)
    for entry in earlier:
        history = entry / "state" / "published" / "history.jsonl"
        if history.is_file() and not history.is_symlink():
            return history
    return None


def run(ctx: PhaseContext) -> PhaseResult:
    extras = ctx.settings.extras
    examples = Path(extras.get("examples") or "examples").resolve()
    case_command = extras.get("case-command")
    contract_path = _contract_path(ctx, examples, case_command)
    report_mode = report_tool.report_mode(ctx.settings.string("report"))
    env, dropped = _clean_env(ctx.env)
    run_dir = _fresh_dir(Path(extras.get("workdir") or "rehearsal").resolve(), ctx.clock())
    ctx.runtime.log(f"Rehearsing {contract_path} on the files backend in {run_dir}")
    if dropped:
        ctx.runtime.log(f"(ignored for the rehearsal: {', '.join(dropped)})")
    rehearsal = Rehearsal(ctx, run_dir, env, own_cases=case_command is not None)
    common = {"contract": str(contract_path), "backend": "files", "state-dir": str(run_dir / "state")}
    selection_path = run_dir / "selection.json"
    results_dir = run_dir / "allure-results"

    guard = rehearsal.phase("guard", {**common, "local": "true"})
    if not guard.ok:
        return _stopped(rehearsal, guard)
    # One state directory, as in the template's select job: select builds the contract guard compiled.
    chosen = ctx.settings.string("cases")
    select = rehearsal.phase("select", {**common, "selection-path": str(selection_path),
                                        "guard-sha256": guard.outputs.get("guard-sha256", ""),
                                        **({"cases": chosen} if chosen else {})})
    if not select.ok:
        return _stopped(rehearsal, select)
    runs: list[casecommand.CaseRun] | None = None
    if case_command is not None:
        from testops_evidence.contract import load_contract

        runs = _case_command_cells(rehearsal, case_command, select.outputs, selection_path,
                                   select.outputs.get("selection-sha256", ""), load_contract(contract_path))
    else:
        cells = _cells(rehearsal, examples, contract_path, selection_path, select.outputs.get("selection-sha256", ""),
                       guard.outputs.get("target-sha", ""))
        if cells is not None:
            return _stopped(rehearsal, cells)
    export = rehearsal.phase("export", {**common, "selection-path": str(selection_path),
                                        "selection-sha256": select.outputs.get("selection-sha256", ""),
                                        "cell-results": str(run_dir / "cell-results"),
                                        "results-dir": str(results_dir)}, allowed=(EXIT_OK, EXIT_CASES_FAILED))
    if not export.ok:
        return _stopped(rehearsal, export)
    # As the publish job gets them: both documents with the digests that travelled as job outputs.
    published_from = {**common, "results-dir": str(results_dir), "selection-path": str(selection_path),
                      "selection-sha256": select.outputs.get("selection-sha256", ""),
                      "receipt-sha256": export.outputs.get("receipt-sha256", "")}
    history = _earlier_history(run_dir)
    if history is not None:
        ctx.runtime.log(f"The report continues the history of the rehearsal in {history.parents[2]}")
    upload = rehearsal.phase("upload", {**published_from, "report": report_mode,
                                        **({"report-history": str(history)} if history is not None else {})})
    if not upload.ok:
        return _stopped(rehearsal, upload)
    verify = rehearsal.phase("verify", published_from, allowed=(EXIT_OK, EXIT_CASES_FAILED))
    if not verify.ok:
        return _stopped(rehearsal, verify)

    counts = {s: int(export.outputs.get(f"{s}-count", "0")) for s in ("passed", "failed", "broken")}
    total = sum(counts.values())
    _agree("verified-count", total, int(verify.outputs.get("verified-count", "-1")))
    _agree("all-passed", export.outputs.get("all-passed"), verify.outputs.get("all-passed"))
    _agree("uploaded-count", total, int(upload.outputs.get("uploaded-count", "-1")))
    publication = json.loads((run_dir / "state" / "upload.json").read_text(encoding="utf-8"))
    published = Path(publication["destination"])
    report = _report(ctx, publication.get("report") or {}, {"total": total, **counts})
    return _finished(rehearsal, contract_path, counts, report, published, results_dir, runs)


def _contract_path(ctx: PhaseContext, examples: Path, case_command: str | None) -> Path:
    """The contract to rehearse: the user's with their case command, else the examples' (their harness measures
    only their own cases)."""
    given = ctx.settings.sources.get("contract") not in (None, "default")
    if case_command is not None and not case_command.strip():
        raise Refusal("input.case-command", "--case-command is empty: give the shell command that runs one case "
                      "and writes its cell result (docs/local.md)", field="case-command",
                      expected="a bash command", actual=case_command)
    contract_path: Path | None
    if case_command is not None:
        # The user's own campaign: the contract input's default (.github/testops-evidence.yml), not the examples'.
        contract_path = ctx.settings.path("contract") or Path(".github/testops-evidence.yml")
    else:
        contract_path = ctx.settings.path("contract") if given else examples / "contract.yml"
        if given and contract_path is not None and contract_path.resolve() != (examples / "contract.yml").resolve():
            # The example harness measures the examples' cases only: on another contract it would record
            # nothing of the user's cases (or mistake one of its own tests for them).
            raise Refusal("input.case-command", f"rehearsing your own contract {contract_path} needs your case "
                          "command: add --case-command '<the command that runs one case>' (docs/local.md, "
                          "\"Without act\"); without --contract the rehearsal runs the examples' campaign",
                          field="case-command", expected="set with --contract", actual="missing")
    assert contract_path is not None
    if not contract_path.is_file():
        raise Refusal("contract.missing", f"the contract {contract_path} does not exist", field="contract",
                      expected="a contract file", actual=str(contract_path))
    contract_path = contract_path.resolve()
    return contract_path


def _agree(what: str, expected: Any, actual: Any) -> None:
    if expected != actual:
        raise Refusal("rehearse.inconsistent", f"the phases disagree on {what}", field=what, expected=expected,
                      actual=actual)


# --- cells: the user's own case command -------------------------------------------------------------------------


def _case_command_cells(rehearsal: Rehearsal, command: str, outputs: Mapping[str, Any], selection_path: Path,
                        selection_sha256: str, contract: Contract) -> list[casecommand.CaseRun]:
    """Run the user's case command for every (case, trial) of the plan, as the template's worker jobs do."""
    ctx, run_dir = rehearsal.ctx, rehearsal.run_dir
    # select's outputs as a workflow reads them: each lane's matrix as JSON text (this process wrote it).
    outputs = {f"{lane}-matrix": json.loads(outputs.get(f"{lane}-matrix") or "{}") for lane in LANES}
    units = sum(len(units_of(job)) for lane in LANES
                for job in (outputs.get(f"{lane}-matrix") or {}).get("include", []))
    ctx.runtime.log(f"\n━━━ cells: your case command runs {units} case(s), one after another, in {Path.cwd()} ━━━\n"
                    f"   {command}")
    env = casecommand.environment_for_cases(rehearsal.env, casecommand.cli_shim(run_dir / "bin"))
    withheld = {name for case in contract.cases for name in case.credentials}
    return casecommand.run_cases(command, outputs=outputs, selection_path=selection_path,
                                 selection_sha256=selection_sha256, cells=run_dir / "cell-results",
                                 logs=run_dir / "logs" / "cases", cwd=Path.cwd(), env=env,
                                 attempt_prefix=f"local-{run_dir.name}", log=ctx.runtime.log, withheld=withheld)


# --- cells: the example harness, the cell command, shipped reports ---------------------------------------------


def _cells(rehearsal: Rehearsal, examples: Path, contract_path: Path, selection_path: Path, selection_sha256: str,
           source_sha: str) -> Step | None:
    """Write the cell results the workers would have uploaded; a failed ``cell`` step is returned."""
    from testops_evidence.contract import load_contract

    ctx, run_dir = rehearsal.ctx, rehearsal.run_dir
    contract = load_contract(contract_path)
    selection = json.loads(selection_path.read_text(encoding="utf-8"))
    selected = [contract.case(row["key"]) for row in selection["cases"]]
    cell_dir = run_dir / "cell-results"
    cell_dir.mkdir()
    shipped = examples / "cell-results"
    shipped_keys = {p.name for p in shipped.iterdir() if p.is_dir()} if shipped.is_dir() else set()
    for case in selected:
        if case.key in shipped_keys:  # reports of the external lane, adapted by export itself
            shutil.copytree(shipped / case.key, cell_dir / case.key, symlinks=False)
    inspect_dir = examples / "inspect"
    inspect_case = next((c for c in selected if c.key == INSPECT_CASE and c.key not in shipped_keys
                         and inspect_dir.is_dir()), None)
    harness_cases = [c for c in selected if c.key not in shipped_keys and c.lane == "native" and c is not inspect_case]
    ctx.runtime.log(f"\n━━━ cells: the example harness runs {len(harness_cases)} native case(s)"
                    f"{f'; an Inspect AI eval measures {inspect_case.key}' if inspect_case else ''}; "
                    f"{len(shipped_keys & {c.key for c in selected})} case(s) use shipped reports; the rest are "
                    "not recorded ━━━")
    if inspect_case is not None:
        logs = _run_inspect(ctx, inspect_dir, run_dir / "inspect", rehearsal.env)
        step = rehearsal.phase("cell", {"contract": str(contract_path), "case": inspect_case.key,
                                        "inspect-log": str(logs), "out": str(cell_dir / f"{inspect_case.key}.json"),
                                        "selection-path": str(selection_path), "source-sha": source_sha},
                               quiet=True, name=inspect_case.key)
        if not step.ok:
            return step
    if not harness_cases:
        return None
    junit = _run_harness(ctx, examples / "harness", run_dir / "harness",
                         {c.key: list(c.checks) for c in harness_cases}, rehearsal.env)
    for case in harness_cases:
        step = rehearsal.phase("cell", {"contract": str(contract_path), "case": case.key, "junit": str(junit),
                                        "out": str(cell_dir / f"{case.key}.json"),
                                        "selection-path": str(selection_path),
                                        "selection-sha256": selection_sha256, "source-sha": source_sha},
                               quiet=True, name=case.key)
        if not step.ok:
            return step
    return None


def _inspect_python() -> str | None:
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
        candidate = root / INSPECT_PYTHON
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return sys.executable if importlib.util.find_spec("inspect_ai") is not None else None


def _run_inspect(ctx: PhaseContext, examples: Path, work: Path, env: Mapping[str, str]) -> Path:
    """Run the example Inspect AI eval (offline: its agent is mockllm); without inspect-ai, use its shipped log.
    Returns the directory holding the log."""
    shipped = examples / "logs"
    python = _inspect_python()
    if python is None:
        ctx.runtime.log(f"   inspect-ai is not installed: using the shipped log in {shipped}")
        return shipped
    logs = work / "logs"
    logs.mkdir(parents=True)
    run_env = {k: v for k, v in env.items() if not k.startswith("INSPECT_")}
    run_env.update({"INSPECT_DISPLAY": "none", "INSPECT_LOG_LEVEL": "warning", "PYTHONDONTWRITEBYTECODE": "1",
                    "HOME": str(work / "home")})
    done = subprocess.run([python, str(examples / "read_company_goals.py"), str(logs)], cwd=work, env=run_env,
                          capture_output=True, text=True, check=False, timeout=600)
    (work / "inspect.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    ctx.runtime.log(f"   inspect eval {examples / 'read_company_goals.py'}: exit {done.returncode}")
    if done.returncode != 0 or not any(logs.glob("*.eval")):
        raise Refusal("rehearse.harness", f"the example Inspect AI eval did not run (exit {done.returncode}); see "
                      f"{work / 'inspect.log'}", field="inspect", expected="exit 0 and an .eval log",
                      actual=done.returncode)
    return logs


def _run_harness(ctx: PhaseContext, harness: Path, work: Path, plan: dict[str, list[str]],
                 env: Mapping[str, str]) -> Path:
    """Run the example harness with pytest (JUnit XML out); without pytest, use its shipped report."""
    shipped = harness / "reports" / "junit.xml"
    if importlib.util.find_spec("pytest") is None:
        if not shipped.exists():
            raise Refusal("rehearse.harness", "pytest is not installed and no shipped harness report exists",
                          field="pytest", expected="installed (bash scripts/setup.sh)", actual="missing")
        ctx.runtime.log(f"   pytest is not installed (runtime-only setup): using the shipped report {shipped}")
        return shipped
    plan_path = work / "plan.json"
    plan_path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    junit = work / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-c", str(harness / "pytest.ini"), "--rootdir", str(harness),
               str(harness), "-q", f"--junitxml={junit}"]
    if importlib.util.find_spec("allure_pytest") is not None:
        command.append(f"--alluredir={work / 'allure-results'}")
    harness_env = {k: v for k, v in env.items() if not k.startswith("PYTEST_")}
    harness_env.update({"HARNESS_PLAN": str(plan_path), "PYTHONDONTWRITEBYTECODE": "1"})
    done = subprocess.run(command, cwd=work, env=harness_env, capture_output=True, text=True, check=False)
    (work / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    last = (done.stdout.strip().splitlines() or [""])[-1]
    ctx.runtime.log(f"   pytest {harness}: exit {done.returncode} — {last}")
    # pytest exits 1 when tests failed: the example harness fails and breaks cases on purpose.
    if done.returncode not in (0, 1) or not junit.exists():
        raise Refusal("rehearse.harness", f"the example harness did not run (pytest exit {done.returncode}); see "
                      f"{work / 'pytest.log'}", field="pytest", expected="exit 0 or 1 and a JUnit report",
                      actual=done.returncode)
    return junit


# --- the report and the summary --------------------------------------------------------------------------------


def _report(ctx: PhaseContext, report: dict[str, Any], counts: dict[str, int]) -> summary.Markdown:
    """The HTML report upload built into the publication (its statistics were checked against the receipt
    there, and again by verify), or why there is none."""
    if report.get("wanted") is False:
        return summary.Markdown("not generated (`--report never`)")
    if not report.get("built"):
        # Not `scripts/setup.sh`: a pipx user has no checkout; Node.js with npm is what every install needs.
        return summary.Markdown(f"not generated: {summary.text(str(report.get('reason')))} (Allure Report 3 needs "
                                "Node.js 20 or newer with npm: docs/install.md)")
    stats = report.get("stats") or {}
    figures = ", ".join(f"{stats.get(status, 0)} {status}" for status in counts)
    ctx.runtime.log(f"\n━━━ {report.get('tool')} ━━━  {report.get('index')}: {figures} — equal to the receipt")
    return summary.Markdown(f"{summary.code(report.get('index'))} (statistics equal to the receipt)")


def _stopped(rehearsal: Rehearsal, step: Step) -> PhaseResult:
    return PhaseResult(
        headline=f"⛔ The rehearsal stopped at {summary.code(step.mode)} (exit {step.exit_code}): it did not behave "
                 "as designed.",
        summary=_steps_table(rehearsal) + f"\nThe refusal is in {summary.code(step.summary_path)}.\n",
        exit_code=step.exit_code if step.exit_code != EXIT_OK else EXIT_CASES_FAILED)


def _steps_table(rehearsal: Rehearsal) -> str:
    meaning = {EXIT_OK: "done", EXIT_CASES_FAILED: "done; some cases did not pass"
               + ("" if rehearsal.own_cases else " (as designed)")}
    main = [step for step in rehearsal.steps if step.mode != "cell"]
    rows: list[tuple[Any, ...]] = [
        (index, step.mode, step.exit_code,
         meaning.get(step.exit_code, "refused") if step.ok else "⛔ not as designed", summary.Markdown(step.headline),
         summary.code(step.summary_path.name))
        for index, step in enumerate(main, start=1)]
    cells = [s for s in rehearsal.steps if s.mode == "cell"]
    if cells:
        rows.append(("", "cell", "0" if all(s.ok for s in cells) else "⛔", "one per harness case",
                     f"{len(cells)} cell result(s) written", summary.code("cells/")))
    return summary.table(("#", "step", "exit", "meaning", "headline", "summary"), rows)


def _cases_table(runs: list[casecommand.CaseRun]) -> str:
    rows = [(summary.code(run.label), "not run" if run.log is None else
             ("timed out" if run.exit_code is None else run.exit_code),
             "written" if run.wrote else f"⛔ {summary.code(run.code)}: {summary.text(run.note)}" if run.failed
             else f"{summary.code(run.code)}: {summary.text(run.note)}",
             summary.code(run.log) if run.log is not None else "")
            for run in runs]
    return summary.table(("case", "exit", "cell result", "log"), rows)


def _finished(rehearsal: Rehearsal, contract_path: Path, counts: dict[str, int], report: str, published: Path,
              results_dir: Path, runs: list[casecommand.CaseRun] | None = None) -> PhaseResult:
    run_dir = rehearsal.run_dir
    total = sum(counts.values())
    shown = ", ".join(f"{summary.status_icon(s)} {n} {s}" for s, n in counts.items() if n)
    where = summary.table(("", ""), [
        ("rehearsal directory", summary.code(run_dir)),
        ("selection", summary.code(run_dir / 'selection.json')),
        ("cell results", summary.code(run_dir / 'cell-results')),
        ("allure-results (export)", summary.code(results_dir)),
        ("export receipt", summary.code(f"{results_dir}-receipt.json")),
        ("published (files backend)", summary.code(published)),
        ("state (receipts, once-markers)", summary.code(run_dir / 'state')),
        ("step summaries", summary.code(run_dir / 'summaries')),
        ("Allure Report", report),
    ])
    if runs is None:
        headline = (f"✅ The rehearsal of {summary.code(contract_path.name)} behaved as designed: {total} cases ({shown}) "
                    "exported, published and verified on the files backend.")
        return PhaseResult(headline=headline, summary=_steps_table(rehearsal) + "\n" + where, exit_code=EXIT_OK)
    # The user's campaign: its exit code is the verdict, as the template's jobs give it. A case command that wrote
    # no cell fails its worker job there (case.no_cell_result, exit 3); a case not all passed fails the publish job
    # (fail-on-failed-cases, exit 1).
    refused = [run for run in runs if run.failed]
    exit_code = max((lookup(run.code).exit_code for run in refused), default=EXIT_OK)
    if exit_code == EXIT_OK and counts["passed"] != total:
        exit_code = EXIT_CASES_FAILED
    verdict = ("✅" if exit_code == EXIT_OK else "⛔" if refused else "❌")
    cases = f"{total} cases ({shown})"
    if refused:
        worst = max(refused, key=lambda run: lookup(run.code).exit_code)
        headline = (f"{verdict} Your case command left {len(refused)} of {len(runs)} case(s) without a cell result "
                    f"({summary.code(worst.code)}: {summary.text(worst.note)}); {cases} exported, published and "
                    "verified on the files backend.")
    else:
        headline = (f"{verdict} The rehearsal of {summary.code(contract_path.name)} with your case command: {cases} "
                    "exported, published and verified on the files backend.")
    return PhaseResult(headline=headline, summary=_cases_table(runs) + "\n" + _steps_table(rehearsal) + "\n" + where,
                       exit_code=exit_code)
