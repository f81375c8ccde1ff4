"""The exit codes, and the registry of refusal codes: each code's exit code, meaning, usual cause, next step and scope.

:mod:`errors` makes refusals from it (:func:`errors.lookup`) and names all of it too (``errors.REGISTRY``);
``docs/errors.md`` and ``docs/troubleshooting.md`` are generated from it, and a test keeps them equal.
"""

from __future__ import annotations

from dataclasses import dataclass

# Exit codes (docs/errors.md, "Exit codes").
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
    EXIT_INTEGRITY: "compare *expected* and *actual* in the step summary and find out why the evidence does not "
                    "bind before running again; the check is not what needs fixing",
    EXIT_REMOTE: "check that the service is reachable and the credentials valid, then re-run the job "
                 "(after an uncertain mutation: `mode: reconcile`)",
}


# What a refusal means for an export (docs/errors.md, column "in export"): a code found in one cell either
# makes only that cell's case broken (a harness bug cannot change any other verdict), or refuses the whole
# export (the cell's origin is in doubt: it could be an attempt to change another case's verdict).
SCOPE_CASE = "case"
SCOPE_EXPORT = "export"


@dataclass(frozen=True)
class CodeSpec:
    """One registered code: its exit code, its meaning, its usual cause, the operator's next step (docs/errors.md
    and docs/troubleshooting.md are generated from these) and, for a code export meets in a cell, whether the
    case or the whole export is refused (``scope``)."""

    code: str
    exit_code: int
    meaning: str
    hint: str = ""
    cause: str = ""
    scope: str = ""



def _spec(code: str, exit_code: int, meaning: str, hint: str = "", *, cause: str = "",
          scope: str = "") -> tuple[str, CodeSpec]:
    return code, CodeSpec(code, exit_code, meaning, hint, cause, scope)


_U, _I, _R = EXIT_USAGE, EXIT_INTEGRITY, EXIT_REMOTE

# The registry. Keep codes in `<area>.<reason>` form; group by area. Codes ending in `<...>` are families
# whose last part is filled at run time (an input name, an HTTP status). Every code has a meaning (what it
# says), a cause (what usually leads to it) and a hint (the specific next step); tests/test_errors.py
# refuses a code without them, because a refusal must always tell the operator what to do.
REGISTRY: dict[str, CodeSpec] = dict(
    [
        # --- usage and configuration -------------------------------------------------------------
        _spec("input.<name>", _U, "an input is missing or has an invalid value",
              "Fix the input the refusal names (its field, expected and actual value); docs/inputs.md lists every "
              "input with its values.",
              cause="A required input left empty, a typo in a boolean or number, or an input of another mode."),
        _spec("mode.unknown", _U, "the `mode` input names no phase",
              "Set `mode:` to one of the modes in docs/inputs.md (guard, select, export, upload, ...).",
              cause="A misspelt mode, or a CLI-only command (check, rehearse, cell) used as an action mode."),
        _spec("mode.not_built", _U, "the phase is listed in the design but not available in this version",
              "Use a release of the action that has this mode (CHANGELOG.md lists when each mode arrived).",
              cause="The workflow pins an older release than the one whose docs it follows."),
        _spec("contract.missing", _U, "the contract file does not exist",
              "Create the contract (docs/contract.md has a minimal one) or point `contract:` at it; the path is "
              "relative to the workspace.",
              cause="The job did not check out the repository, or the contract lives elsewhere than "
                    "`.github/testops-evidence.yml`."),
        _spec("contract.invalid", _U, "the contract does not match its schema",
              "Fix the contract where the refusal points: the field's JSON pointer, or the line a YAML error "
              "names.",
              cause="A misspelt key, a missing required field, a value of the wrong type, or a YAML syntax error; "
                    "`testops-evidence check` shows the same refusal locally."),
        _spec("contract.unknown_case", _U, "a case key is not in the contract",
              "Use a key from the contract's `cases` (`testops-evidence check` lists them), or add the case to "
              "the contract.",
              cause="A typo in `cases:` or `--case`, or a case removed from the contract while a caller still "
                    "names it."),
        _spec("internal.error", _R, "an unexpected error; the message names its type (please report it)",
              "Re-run with debug logging (ACTIONS_STEP_DEBUG) for the traceback, and report it.",
              cause="A bug: an input the action should have refused with a coded error reached code that did not "
                    "expect it."),
        # --- guard ---------------------------------------------------------------------------------
        _spec("guard.event_file", _I, "the event file is missing, unsafe, too large or not JSON",
              "Run guard as a step of the job GitHub started (the runner writes GITHUB_EVENT_PATH); if an earlier "
              "step rewrote the event file, remove that step.",
              cause="A step before guard replaced or linked the event file, or guard runs outside a real runner."),
        _spec("guard.event", _I, "the triggering event is not one the trust policy admits",
              "Start the run with an event listed in the contract's `trust.events`, or add the event there if it "
              "is meant to run the campaign.",
              cause="The workflow also triggers on push or pull_request while the contract admits only "
                    "workflow_dispatch."),
        _spec("guard.repository", _I, "the run belongs to another repository",
              "Run the campaign in the repository the contract's `trust.repository` names, or correct that field "
              "after a rename or transfer.",
              cause="A fork or a copy of the repository runs the workflow, or the repository was renamed."),
        _spec("guard.visibility", _I, "the repository is private but the policy requires a public one",
              "Set `trust.public-only: false` if private runs may publish, or run the campaign in the public "
              "repository.",
              cause="The contract was copied from a public project into a private one."),
        _spec("guard.branch", _I, "the run's branch or ref is not admitted",
              "Dispatch the run from a branch listed in `trust.branches` (usually main), or add the branch there.",
              cause="The workflow was started from a feature branch or a tag."),
        _spec("guard.workflow", _I, "the run's workflow file is not admitted",
              "List the caller workflow (the file that `uses:` the template, not the template) in "
              "`trust.workflows`.",
              cause="The workflow file was renamed, or the contract names the template instead of its caller."),
        _spec("guard.run_attempt", _I, "a re-run attempt where the policy admits only the first",
              "Dispatch a new run instead of re-running, or set `run-attempts: any`.",
              cause="Someone used \"Re-run jobs\" while the contract says `run-attempts: first-only`."),
        _spec("guard.actor", _I, "the actor or triggering actor is not on the allow-list",
              "Have an allowed person start the run, or add the user's numeric id (not the login) to "
              "`trust.actors`.",
              cause="A colleague not yet on the allow-list started or re-ran the workflow."),
        _spec("guard.operation", _I, "the run was dispatched for another operation than this phase serves",
              "Dispatch the run with the `operation` this phase belongs to (bootstrap: bootstrap; launch: launch; "
              "select and collect-cells: evaluate; import: import), or make the workflow's `if:` conditions run "
              "only that operation's jobs (`needs.guard.outputs.operation`).",
              cause="A workflow with an `operation` input whose jobs do not all check it, so a run dispatched "
                    "to bootstrap also selects or publishes an evaluation."),
        _spec("guard.run_mismatch", _I, "the event, environment and REST run object disagree",
              "Compare the field the refusal names in the event file, the GITHUB_* variable and the REST run, and "
              "remove the step or `env:` that changed it; on a local runner (act), run with `local: true` "
              "(docs/local.md).",
              cause="A runner variable is missing or was overridden by a step (or by a local runner such as act, "
                    "which does not set GITHUB_WORKFLOW_REF), or the run object answered for another run."),
        _spec("guard.local_context", _I, "a local (rehearsal) context cannot publish to TestOps",
              "Use `backend: files` for a local or rehearsal run; publish to TestOps only from a real GitHub "
              "Actions run without `local`.",
              cause="`local: true` together with `backend: testops`, or a contract with a `testops` section run "
                    "locally with an explicit TestOps backend."),
        _spec("guard.outside_actions", _U, "guard ran outside GitHub Actions without `local: true`",
              "Inside a workflow, check the step runs the action; for a rehearsal set `local: true` (`--local true`).",
              cause="`testops-evidence guard` run on a workstation, or a runner that does not set "
                    "GITHUB_ACTIONS=true."),
        # --- selection -----------------------------------------------------------------------------
        _spec("selection.job_run_binding", _I, "the TestOps job run does not belong to this run",
              "Pass the job run TestOps created for this workflow run (ALLURE_JOB_RUN_ID of this dispatch); for a "
              "manual run, leave `job-run-id` empty and use a standing plan.",
              cause="A job run id copied from another run, or a re-run that reuses the first attempt's job run."),
        _spec("selection.job_binding", _I, "the TestOps job is not this workflow's job",
              "Point the TestOps job at this repository's caller workflow (TestOps project settings, CI jobs), or "
              "pass a job run of that job.",
              cause="The TestOps job was set up for another repository or workflow file."),
        _spec("selection.launch_binding", _I, "the launch is in another project, closed, or not the job run's",
              "Start a new launch of the plan in TestOps (`mode: launch`) and run the campaign for its job run.",
              cause="The launch was closed before the campaign published, or belongs to another project."),
        _spec("selection.plan_binding", _I, "the test plan's id, name, project or size differ from the contract",
              "Run `mode: bootstrap` (dry-run first) so the plan matches the contract, then put the plan id it "
              "reports into `testops.plan.id`.",
              cause="The plan was edited in TestOps, or the contract changed without a bootstrap."),
        _spec("selection.foreign_case", _I, "a planned case does not match a contract case on both id and selector",
              "Remove the case from the TestOps plan, or add it to the contract with the same testops-id and "
              "full-name, then bootstrap.",
              cause="Someone added a test case to the plan in TestOps that the contract does not know."),
        _spec("selection.duplicate_case", _I, "a case is planned twice",
              "List each case once (in `cases:` or the plan); in TestOps remove the duplicate from the plan.",
              cause="A repeated key in `cases:`, or the same test case twice in the TestOps plan."),
        _spec("selection.empty", _I, "nothing was selected",
              "Name at least one contract case in `cases:`, or launch a plan that contains cases.",
              cause="An empty `cases:` filter that matched nothing, or an empty TestOps plan."),
        _spec("selection.digest", _I, "the selection bytes do not hash to the expected digest",
              "Pass the select job's `selection-sha256` output unchanged and download the selection artifact of "
              "the same run attempt; find out what changed the file in between.",
              cause="The selection file was edited, replaced by another attempt's artifact, or the digest came "
                    "from another run."),
        _spec("selection.extra_file", _I, "the selection's directory holds an entry beyond the selection's own files",
              "Download the selection artifact by the select job's `selection-artifact-id` output into a fresh "
              "directory of its own (the campaign template does), and find out who uploaded the artifact again: "
              "nothing of it was used.",
              cause="A worker re-uploaded the selection artifact (upload-artifact `overwrite: true`) with the same "
                    "selection plus files meant to land in a later job (a harness, a cell), or the directory was "
                    "shared with another download or step."),
        _spec("artifact.extra_file", _I, "a downloaded artifact holds more than the files its job binds",
              "Download the artifact by the id its upload step reported, into a fresh directory of its own (the "
              "campaign template does), and find out who uploaded it again: nothing of it was used.",
              cause="A worker re-uploaded the artifact (upload-artifact `overwrite: true`) with files added, or the "
                    "directory was shared with another download or step. Raised by the campaign template's "
                    "attest job (the statement and its predicate alone) and export job (the ledger alone)."),
        _spec("selection.context", _I, "the selection was made for another run, repository or contract",
              "Re-run all jobs (never only the failed ones) so that every job uses this attempt's selection; keep "
              "the contract unchanged during a run.",
              cause="A partial re-run mixing attempts, an artifact from another run, or a contract edited mid-run."),
        _spec("selection.standing_plan", _U, "the standing testplan.json is invalid or does not cover the contract",
              "Fix the file the refusal names (docs/selection.md shows its shape) so it lists the contract's cases.",
              cause="A hand-edited testplan.json with a typo, or one that predates new contract cases."),
        _spec("selection.mode", _U, "job-run id inputs disagree (`job-run-id` versus `ALLURE_JOB_RUN_ID`)",
              "Pass the job run id once: either the `job-run-id` input or the ALLURE_JOB_RUN_ID variable, with the "
              "same value.",
              cause="A caller that passes one job run id as input while the environment carries another."),
        _spec("selection.matrix_too_large", _I, "a matrix output would exceed GitHub's output limits",
              "Split the campaign into several selections of the same plan (`cases:`).",
              cause="Very many cases in one lane with long keys."),
        _spec("selection.job_run_env", _U, "the `allurectl job-run env` output is invalid",
              "Save the unmodified output of `allurectl job-run env` to the file and pass it as `job-run-env`.",
              cause="The file holds other output (an error message, shell prompts) or was truncated."),
        _spec("selection.invalid", _I, "the selection document does not match its schema",
              "Use the selection file `select` wrote, unchanged; a selection of another release needs the "
              "matching release of the action.",
              cause="A hand-made or edited selection file, or jobs that run different releases of the action."),
        _spec("selection.not_planned", _I, "a requested case is not in the plan this selection narrows",
              "Request only cases of the launched plan, or add the case to the plan (bootstrap) and launch again.",
              cause="`cases:` names a case the TestOps plan does not contain."),
        _spec("selection.rerun_digest", _I, "the receipt given to rerun-from does not hash to rerun-from-sha256",
              "Give rerun-from-sha256 exactly as the earlier export printed receipt-sha256, and the receipt that "
              "export wrote, unchanged.",
              cause="A receipt of another run or attempt, an edited receipt, or a digest copied from another export."),
        _spec("selection.rerun_from", _U, "the receipt given to rerun-from cannot be re-run here",
              "Re-run from a receipt of an earlier run of this campaign, repository and profile (the refusal "
              "names what differs).",
              cause="A receipt of another campaign, profile or repository, of this very run, or whose failed cases "
                    "left the contract."),
        _spec("selection.baseline", _I, "the baseline receipt recorded in the selection is missing or changed",
              "Keep the baseline file select wrote beside the selection in the same artifact, unchanged.",
              cause="A selection artifact uploaded without its baseline file, or a baseline file edited on the way."),
        _spec("selection.catalog", _U, "the catalog is invalid or has no entry for a selected case",
              "Add an entry for every selected case to the catalog file the refusal names, or drop `catalog:`.",
              cause="A catalog that predates new contract cases, or a catalog that is not a JSON object."),
        _spec("worker.token_present", _I, "a TestOps token variable exists in a worker job",
              "Remove ALLURE_TOKEN / TESTOPS_TOKEN from the worker job's env.",
              cause="A workflow-level `env:` that sets the token for every job, including workers."),
        # --- the shipped action and templates (composite/setup.sh, the campaign's case loop) ------------
        _spec("setup.python", _U, "the composite action found no Python 3.11 or newer on the runner",
              "Add actions/setup-python before the step, or use the Docker action.",
              cause="A self-hosted runner with an older system Python."),
        _spec("setup.platform", _U, "the composite action runs on Linux and macOS runners, not on Windows",
              "Run the job on a Linux or macOS runner (runs-on / worker-runs-on).",
              cause="`runs-on: windows-latest` for a campaign job."),
        _spec("case.credentials", _U, "case-secrets lacks a credential the case's contract entry lists",
              "Add it to the JSON of the template's case-secrets secret.",
              cause="A new credential in the contract that was not added to the secret, or a misspelt name."),
        _spec("case.no_cell_result", _I, "the case command wrote no cell result; export records the case as broken",
              "Make the case command write TESTOPS_EVIDENCE_CELL_RESULT, even when the case fails.",
              cause="The case command crashed or timed out before writing, or wrote to another path."),
        # --- collect-cells: which worker uploaded each cell artifact -----------------------------------
        _spec("workers.unknown_artifact", _I, "an artifact carries the campaign's cell prefix but no worker job of "
              "the matrix plan owns it",
              "Something other than a worker uploaded under the campaign's cell prefix (an agent holding the "
              "runtime token, or another campaign with the same `artifact-prefix`): give each campaign its own "
              "prefix, and inspect the run's jobs.",
              cause="An artifact uploaded by a process of the agent under test, or two campaigns in one run "
                    "sharing an artifact prefix."),
        _spec("workers.duplicate_artifact", _I, "two artifacts of the run have one worker's name",
              "Inspect the run's artifacts: GitHub keeps names unique within a run, so this is a server fault "
              "or a forgery; run the campaign again.",
              cause="A misbehaving server or proxy in front of the Actions API."),
        _spec("workers.job_identity", _I, "the worker job the matrix plan names matches more than one job of the "
              "run attempt",
              "Name worker jobs `<artifact-prefix> <job>` once per run (the campaign template does); two campaigns "
              "in one run need two artifact prefixes.",
              cause="Two campaigns with the same `artifact-prefix` in one caller workflow, or a caller job that "
                    "copies the template's job names."),
        _spec("workers.artifact_origin", _I, "a worker's cell artifact was not uploaded by that worker's own "
              "upload step (uploaded under its name before it, or deleted after it)",
              "Treat the run as attacked: some job reached the Actions runtime token and uploaded under another "
              "worker's name. Inspect the jobs of the run (the refusal names the artifact and job), sandbox the "
              "agent (docs/security.md), and run the campaign again.",
              cause="A process of the agent under test that outlived its step and used the runtime token of a "
                    "later step to upload, replace or delete another worker's artifact."),
        _spec("workers.upload_unreported", _I, "a worker's job record does not say which artifact its upload "
              "step made (no step named with the upload's artifact id and digest, or more than one)",
              "Run the campaign template of this version unmodified: after the step `testops-evidence: upload cell "
              "results` (id `upload`) it has a step named `testops-evidence: uploaded artifact ${{ "
              "steps.upload.outputs.artifact-id }} sha256:${{ steps.upload.outputs.artifact-digest }}`, which "
              "GitHub fills in when the step starts. Then run the campaign again.",
              cause="A caller workflow built from an older template, a worker job cancelled between its upload and "
                    "the next step, or a masked value (`::add-mask::`) in that step's name."),
        _spec("workers.artifact_replaced", _I, "the artifact under a worker's name is not the one its upload step "
              "made (another id): it was overwritten, or deleted and uploaded again",
              "Treat the run as attacked: some job reached the Actions runtime token and replaced another worker's "
              "artifact (upload-artifact `overwrite: true` makes a new artifact with a new id). Inspect the run's "
              "jobs, sandbox the agent (docs/security.md), and run the campaign again.",
              cause="A process of the agent under test that outlived its step and used the runtime token of a "
                    "later step to replace another worker's artifact."),
        _spec("workers.artifact_digest", _I, "the Actions API's digest of a worker's artifact is not the SHA-256 "
              "its upload step reported",
              "Treat the artifact as not the worker's: run the campaign again, and report the run to GitHub if it "
              "happens again with the template unmodified.",
              cause="An artifact whose content the Actions service records differently from what the worker's "
                    "upload-artifact streamed, or a proxy in front of the Actions API that changes its answers."),
        _spec("budget.exhausted", _U, "a trial was not run because its worker job had spent the "
              "share of the campaign budget the plan gave it; export records it as broken",
              "Raise the contract's budget.campaign cap, or re-run the cases that did not pass with rerun-from "
              "(docs/evidence.md, \"Budgets\").",
              cause="Trials before it in the same job cost more than the job's share of the cap.", scope=SCOPE_CASE),
        _spec("budget.exceeded", _U, "a trial used more than the contract's per-trial budget; it "
              "is recorded as broken",
              "Make the harness stop the agent at the TESTOPS_EVIDENCE_BUDGET it is given, or raise budget.trial.",
              cause="An agent that kept calling the model past the cap, or a harness that ignores the budget.",
              scope=SCOPE_CASE),
        _spec("budget.unverified", _U, "a trial gave no figure that can be checked against a capped counter; "
              "it is recorded as broken",
              "Make the harness report every counter the contract's budget caps, as measured or estimated "
              "(docs/evidence.md, \"Budgets\"), or remove the cap the harness cannot measure.",
              cause="A harness that reports a capped counter as unavailable, leaves it out, or reports only a "
                    "lower bound (partial) within the cap.", scope=SCOPE_CASE),
        # --- export --------------------------------------------------------------------------------
        # A cell proven to be of this selection and from the worker that owns its case can only be wrong
        # about its own case: its defects make that case broken (scope "case"). A cell whose selection,
        # case or origin is in doubt could be an attempt to change another verdict: the whole export is
        # refused (scope "export").
        _spec("export.cell_selection", _I, "a cell result was made for another selection (another run, attempt "
              "or campaign): a replay",
              "Find out where the cell came from: every cell carries the `selection-sha256` of the selection its "
              "worker ran, and only this run's selection counts.",
              cause="A cell result saved from an earlier run and copied in, or a harness that hard-codes the "
                    "digest instead of reading TESTOPS_EVIDENCE_SELECTION_SHA256.", scope=SCOPE_EXPORT),
        _spec("export.foreign_cell", _I, "a cell result is for a case this selection does not select",
              "Write cells only for the cases the worker ran; a split campaign (`cases:`) exports each selection "
              "with its own cells.",
              cause="Cells of another selection of the same campaign in the same directory, or a worker writing "
                    "cells for cases it was not given.", scope=SCOPE_EXPORT),
        _spec("export.cell_origin", _I, "a cell result for a case arrived from a worker job the matrix plan did "
              "not assign that case to",
              "A worker wrote evidence for a case it did not run: treat the code it ran (the agent under test) as "
              "compromised, inspect its job, and run the campaign again.",
              cause="An agent or case command that wrote another case's cell (or a file named for one case holding "
                    "another's cell) into its artifact.", scope=SCOPE_EXPORT),
        _spec("export.worker_artifact", _I, "a worker artifact is not in the matrix plan, or holds a file the "
              "layout does not allow",
              "Download only the campaign's cell artifacts, each into its own directory (no merge-multiple); keep "
              "other material in `<case>/` directories or in another artifact.",
              cause="An artifact uploaded under the campaign's cell prefix by something other than a worker job, "
                    "or a worker that wrote files beside its cells.", scope=SCOPE_EXPORT),
        _spec("export.unattributed", _I, "a file in cell-results cannot be attributed to one selected case",
              "Keep only cell results, and reports in directories named by case keys, in cell-results.",
              cause="A stray file at the top of cell-results, or reports in a directory not named by a case key.",
              scope=SCOPE_EXPORT),
        _spec("export.case_budget", _I, "a case directory holds more files, or more bytes, than export reads for "
              "one case",
              "A worker wrote far more than one case's evidence into one directory: inspect the worker's job (the "
              "agent under test may be flooding its artifact), keep transcripts and other material out of the "
              "report directories, and run the campaign again; docs/evidence.md lists the budgets.",
              cause="An agent or case command that filled its case directory with copies or padding, or a harness "
                    "that writes a report per step instead of per run.", scope=SCOPE_EXPORT),
        _spec("export.duplicate_cell", _I, "two cell results for the same case, or two sharing an attempt id",
              "Write one cell result per case and attempt; remove the stray file the refusal names from the "
              "cell-results directory.",
              cause="A case command that ran twice into the same directory, or two artifacts merged over each other.",
              scope=SCOPE_EXPORT),
        _spec("export.cell_version", _I, "a cell result uses the retired cell-result/v1 format",
              "Write testops-evidence/cell-result/v2: add `selection-sha256` (the case's "
              "TESTOPS_EVIDENCE_SELECTION_SHA256, the select job's output) and set `schema` to v2; "
              "`testops-evidence cell` writes v2.",
              cause="A harness written for 0.1, whose cells name no selection.", scope=SCOPE_CASE),
        _spec("export.cell_invalid", _I, "a cell result is not valid cell-result/v2 JSON",
              "Fix the field the refusal names; docs/evidence.md shows a valid cell result (or write it with "
              "`testops-evidence cell`).",
              cause="A hand-written cell result with a missing field, a wrong time format or a wrong type, or a "
                    "file cut off when its case timed out.", scope=SCOPE_CASE),
        _spec("export.cell_binding", _I, "a cell result of this selection names another commit, profile or run "
              "attempt",
              "Have the case command copy TESTOPS_EVIDENCE_SOURCE_SHA and _PROFILE into the cell result "
              "unchanged.",
              cause="A cell result written from hard-coded values, or a harness that evaluated another checkout.",
              scope=SCOPE_CASE),
        _spec("export.check_binding", _I, "a cell result's checks differ from the contract's checks",
              "Make the harness report exactly the check ids of the case's contract entry, each once (the "
              "refusal names the missing, extra or repeated id).",
              cause="A check renamed in the harness but not in the contract (or the reverse).", scope=SCOPE_CASE),
        _spec("export.unsupported_pass", _I, "a cell says passed without complete passing evidence",
              "Fix the harness so that `disposition: passed` is written only when every contract check passed; "
              "write `behavior_failure` otherwise.",
              cause="A harness that writes `passed` from its exit code while a check failed or was not measured.",
              scope=SCOPE_CASE),
        _spec("export.adapter", _U, "a test or evaluation report cannot be adapted",
              "Check the report file the refusal names: it must be a report of a format `cell` reads whose test, "
              "scorer or assertion names map to the case's checks (docs/evidence.md, report formats and adapters).",
              cause="An empty report directory, a report of another tool, or test names that map to no check.",
              scope=SCOPE_CASE),
        _spec("export.report_name", _U, "a file in a case's directory has a name that is unsafe to read (a "
              "separator, a control or format character, bytes that are not UTF-8, or over 255 bytes); that case "
              "is broken, every other case is exported",
              "Rename the file the message names (its name is shown escaped), or keep it out of the case's "
              "directory; names with spaces, `+`, `#`, `:` or non-ASCII letters are read as they are.",
              cause="A harness that writes a line break, an escape sequence or a bidirectional override into a "
              "file name, or a file system that stores names that are not UTF-8.",
              scope=SCOPE_CASE),
        _spec("export.log_version", _U, "an Inspect AI log or promptfoo results file has a format version this "
              "release does not read (the message names it)",
              "Write the log with a supported version of the tool (docs/evidence.md, \"Evaluation frameworks\" "
              "lists them), or upgrade testops-evidence.",
              cause="The eval ran with a newer (or much older) Inspect AI or promptfoo than this release knows.",
              scope=SCOPE_CASE),
        _spec("export.log_inconsistent", _I, "an evaluation log contradicts itself (e.g. results for a sample it "
              "holds no record of running)",
              "Publish the log exactly as the tool wrote it; find the step that edited, merged or truncated it.",
              cause="A log edited or assembled by hand, two logs merged into one, or an archive with entries removed.",
              scope=SCOPE_CASE),
        _spec("export.log_budget", _U, "an evaluation log needs more memory to read than its budget allows (an "
              "Inspect AI `.eval` whose header and sample summaries declare over 64 MiB)",
              "Split the eval into several logs (a task or a sample range per log) so each log's summaries stay "
              "under the budget; if the log is not one Inspect AI wrote, find the step that made it.",
              cause="An eval of tens of thousands of sample epochs in one log, or an archive whose entries declare "
              "huge sizes (a decompression bomb).",
              scope=SCOPE_CASE),
        _spec("export.receipt_digest", _I, "the export receipt does not hash to the receipt-sha256 export output",
              "Pass upload and verify the export job's `receipt-sha256` output and the receipt that job uploaded, "
              "unchanged; a receipt changed between the jobs is never published.",
              cause="The receipt was edited or replaced after export (rows dropped, a status changed), or the "
                    "receipt of another export or attempt was downloaded."),
        _spec("export.ledger", _I, "the ledger given to export is missing or does not hash to ledger-sha256",
              "Give export the ledger the import job wrote, unchanged, with that job's ledger-sha256 output.",
              cause="A ledger edited after import, or the digest of another import's ledger.", scope=SCOPE_EXPORT),
        _spec("export.receipt", _I, "the export receipt is invalid or does not match the selection",
              "Upload the receipt that export wrote beside the results, unchanged, from the same run attempt.",
              cause="The receipt was edited, or the results artifact of another attempt was downloaded."),
        _spec("attestation.invalid", _I, "the file is not a testops-evidence publication attestation (an in-toto "
              "Statement v1 with the publication predicate)",
              "Pass the `publication.intoto.json` that verify wrote (its `attestation-path` output), or the statement "
              "of a bundle `gh attestation download` fetched.",
              cause="Another kind of file, a statement of another tool, or a statement edited by hand."),
        _spec("attestation.mismatch", _I, "a file the attestation names does not hash to its digest, or is missing",
              "Do not trust these files as this publication: compare them with the published copy the statement "
              "was made from (the refusal names the file).",
              cause="A published file or the receipt changed after verify attested them, or a base directory that "
                    "holds another publication."),
        # --- upload and verify ---------------------------------------------------------------------
        _spec("upload.already_started", _I, "a once-marker shows this upload already started",
              "Run `mode: reconcile` to observe TestOps before anything is re-sent.",
              cause="A re-run of the publish step in the same state directory after an interrupted upload."),
        _spec("upload.results_invalid", _I, "the results directory does not match its receipt",
              "Upload the results directory export wrote, unchanged; the refusal names the file that is missing, "
              "extra or changed.",
              cause="A step between export and upload added, removed or edited a file in allure-results/."),
        _spec("upload.binding", _I, "TestOps attached the upload to another project, job, job run or launch than "
              "the selection's, or knows the job run under another uid than the upload names",
              "Check the TestOps project id, job and job run in the refusal against the selection; if TestOps is "
              "behind a proxy, check that it forwards to the right instance. A selection without the job's uid "
              "comes from an earlier select: run the campaign again from `select`.",
              cause="A contract or `testops-project-id` override that points at another project than the job run, "
                    "a job run another upload already named under another uid, or a selection made by 0.1."),
        _spec("upload.report", _U, "the Allure Report could not be built, or its statistics differ from the "
              "receipt",
              "Read the report log the refusal names; install Allure Report 3 (docs/install.md) or set "
              "`report: auto` to publish without it when it is missing.",
              cause="`report: always` on a runner without Node.js and Allure Report, or an Allure Report that "
                    "failed on the results."),
        _spec("upload.history", _U, "the report history file is invalid",
              "Point `report-history` at the history.jsonl of an earlier report of this campaign, or leave it "
              "empty; the refusal names the bad line.",
              cause="A history file of another tool, a truncated download, or a file larger than the cap."),
        _spec("verify.missing", _R, "a receipt row did not appear in TestOps before the deadline",
              "Raise `deadline-seconds` if TestOps is slow to index, then re-run verify alone with the same "
              "state-dir; nothing is re-uploaded.",
              cause="TestOps indexes results asynchronously and was slower than the deadline, or the upload went "
                    "to another launch."),
        _spec("verify.duplicate", _I, "a receipt row appears more than once in TestOps",
              "Open the launch and find out who uploaded the extra result (another job, a manual upload); the "
              "campaign's publication cannot be trusted until it is removed.",
              cause="An upload repeated outside the once-markers, or another tool uploading into the same launch."),
        _spec("verify.mismatch", _I, "a published result differs from its receipt row",
              "Compare the result in TestOps with the receipt row the refusal names; find out what changed it "
              "after upload.",
              cause="Someone edited the result in TestOps, or another upload replaced it."),
        _spec("rehearse.harness", _U, "the example harness of the rehearsal could not run",
              "Run `bash scripts/setup.sh` (it installs pytest) and read the harness log the refusal names.",
              cause="A setup without the dev dependencies, or an examples directory that was changed."),
        _spec("rehearse.inconsistent", _I, "the rehearsal's phases disagree on the counts",
              "Compare the counts of the phase summaries the refusal names; report it if they differ.",
              cause="A bug: export, upload and verify counted the same receipt differently."),
        _spec("pages.publication", _I, "the publication to put on Pages does not match its receipt, or its report "
              "does not show the receipt's counts",
              "Give `publication-dir` the report artifact of this run's publish job, unchanged; the refusal names "
              "the file that differs.",
              cause="An artifact of another run or attempt, a publication built with `report: never`, or files "
                    "changed after verify."),
        _spec("pages.site", _I, "the Pages checkout holds a link, a special file or an index that testops-evidence "
              "did not write",
              "Look at the path the refusal names in the Pages branch and remove what is not a report of this "
              "campaign; the site is rebuilt from its reports.json.",
              cause="A Pages branch edited by hand or by another tool, or a campaign directory shared with "
                    "other content."),
        # --- bootstrap / launch / reconcile --------------------------------------------------------
        _spec("bootstrap.case_conflict", _I, "a TestOps test case conflicts with the contract (same id, other name, ...)",
              "Decide which side is right: fix the contract's case (testops-id, full-name) or the test case in "
              "TestOps, then run bootstrap again with dry-run.",
              cause="A test case edited or reused in TestOps for something else."),
        _spec("bootstrap.plan_conflict", _I, "the TestOps test plan conflicts with the contract",
              "Rename or delete the extra plan in TestOps, or set `testops.plan.id` to the plan that is meant.",
              cause="Several plans with the contract's plan name, or a plan id of another project."),
        _spec("bootstrap.case_missing", _U, "a contract case's testops-id names no live test case in the project",
              "Create (or restore) the test case in TestOps and put its id in the contract's `testops-id`.",
              cause="The test case was deleted in TestOps, or the id is from another project."),
        _spec("bootstrap.plan_missing", _U, "the contract's plan id names no test plan",
              "Fix `testops.plan.id`, or remove it so that bootstrap finds the plan by name or creates it.",
              cause="The plan was deleted in TestOps, or the id is from another project or instance."),
        _spec("once.already_started", _I, "a once-marker shows this mutation already started",
              "Run `mode: reconcile` to observe TestOps before anything is re-sent.",
              cause="The same phase ran again in the same state directory after an interrupted mutation."),
        _spec("reconcile.unresolved", _R, "an uncertain mutation could not be resolved by observation",
              "Look in TestOps for the change the summary names; if it is absent, run reconcile with "
              "`resume: true`; if TestOps is unreachable, wait and run reconcile again.",
              cause="TestOps still unreachable, or its answers do not show whether the change happened."),
        # --- import and ledger ---------------------------------------------------------------------
        _spec("import.foreign_workflow", _I, "the source run is not from an admitted repository, workflow or ref",
              "Import from a run of a workflow and ref listed in the contract's `remote` policy, or add them there.",
              cause="A source run id of another workflow, branch or repository."),
        _spec("import.rerun", _I, "the source run is a re-run attempt the policy does not admit",
              "Import from the first attempt, or allow re-runs in the contract's `remote` policy.",
              cause="The remote workflow was re-run and the latest attempt was imported."),
        _spec("import.digest", _I, "the archive or a document does not hash to its recorded digest",
              "Re-run the remote workflow to produce a fresh artifact; do not repackage artifacts by hand.",
              cause="An artifact replaced or corrupted after upload, or a document edited inside it."),
        _spec("import.unsafe_archive", _I, "the archive has an unsafe entry (absolute, `..`, link, too many, too large)",
              "Have the remote workflow upload plain files under its prefix only; find out why the archive holds "
              "the entry the refusal names.",
              cause="An upload step that included links or paths outside the results directory."),
        _spec("import.host", _I, "the host document does not meet the contract's host requirements",
              "Run the remote cells on a host that meets the contract's `remote.host` requirements, or adjust them.",
              cause="A remote run on another machine type or software version than the contract requires."),
        _spec("import.definition", _I, "the definition document does not match the result",
              "Publish the definition and result of one execution together, unchanged, from the same remote run.",
              cause="Definition and result files of different executions mixed in one artifact."),
        _spec("import.not_selected", _I, "the cell is not (uniquely) selected by the intent",
              "List the execution once in the import intent, for the case it measured.",
              cause="An intent that lacks the execution or lists it twice."),
        _spec("import.changed_measurement", _I, "a re-import differs from the measurement already recorded",
              "Keep the first measurement; import a new measurement as a new attempt (a new remote run).",
              cause="The same execution was measured again and re-imported under the same id."),
        _spec("import.intent", _U, "the import intent is invalid",
              "Fix the intent file the refusal names; docs/import.md shows its shape.",
              cause="A hand-edited intent with a typo or a missing field."),
        _spec("import.document", _I, "a document in the archive is missing, outside the prefix or invalid",
              "Check that the remote workflow uploads host.json and each execution's files under the prefix "
              "docs/import.md names.",
              cause="An artifact uploaded from the wrong directory, or a missing file."),
        _spec("import.artifact", _I, "no artifact of the source run matches `artifact-name`, or a matching one expired",
              "Check the source run's artifact names against `artifact-name` and its retention; re-run the remote "
              "workflow if the artifact expired.",
              cause="A wrong artifact-name pattern, or an artifact older than its retention."),
        _spec("ledger.locked", _R, "another process holds the ledger lock", "Wait for it, then run again.",
              cause="Two imports into the same ledger file at the same time."),
        _spec("ledger.invalid", _I, "the ledger file does not match its schema",
              "Restore the ledger from its last artifact; never edit it by hand.",
              cause="A hand-edited or truncated ledger file."),
        _spec("ledger.foreign_campaign", _I, "the ledger file belongs to another campaign",
              "Point `ledger:` at this campaign's ledger.",
              cause="Two campaigns sharing one ledger path."),
        _spec("ledger.conflict", _I, "a ledger change breaks its rules (ordinal taken, attempt not reserved)",
              "Import each execution once, with the ordinal the intent reserved; read the ledger's records for "
              "the case the refusal names.",
              cause="Two intents that reserve the same ordinal, or an import of an attempt that was never reserved."),
        _spec("import.not_configured", _U, "the contract has no `remote` section, so nothing may be imported",
              "Add a `remote:` policy to the contract.",
              cause="`mode: import` in a campaign whose contract allows no remote cells."),
        # --- safe IO -------------------------------------------------------------------------------
        _spec("io.unsafe_path", _I, "a path escapes its root, names a link, or is not a regular file",
              "Name a regular file or directory inside its root, without `..`, links, FIFOs or devices; if "
              "another job left a link there, find out why before running again.",
              cause="A path input with `..`, or a symbolic link left by a step or an artifact."),
        _spec("io.extra_file", _I, "a directory holds a file (or an empty directory) that its binding does not list",
              "Do not use this directory: it must hold exactly the files its digests bind (the refusal names the "
              "first extra one). Download the artifact by its id into a fresh, empty directory, and find out "
              "which step or artifact wrote the extra file there.",
              cause="An artifact replaced or extracted over another (a worker re-uploading it with more files), a "
                    "step writing into a downloaded directory, or a directory reused across runs."),
        _spec("io.too_large", _I, "a file is larger than its cap",
              "Check the file the refusal names; if it is genuine, split the campaign (smaller selections) rather "
              "than raise the cap.",
              cause="A runaway log or transcript attached as evidence, or a file that is not what its name says."),
        _spec("io.exists", _I, "a write-once file already exists",
              "Receipts, selections and exports are written once: use a fresh `state-dir` and output path "
              "per run.",
              cause="A phase run twice with the same output path or state directory."),
        _spec("io.state_dir", _I, "the state directory cannot be created or written, is a link, passes through a "
              "link inside the workspace, is not a directory, or belongs to another user",
              "Point `state-dir` at a writable directory of the job's own user, reached without symbolic links "
              "inside the workspace (it is created with mode 0700), or leave it empty for the default.",
              cause="A state-dir shared between users (a container running as root, a runner as another user), "
                    "a checked-out `.testops-evidence` that is a symbolic link, or a read-only mount."),
        _spec("io.write_failed", _R, "a file could not be written: the disk is full, over quota, read-only or "
              "not permitted",
              "Free disk space (or mount a writable directory) and run the step again: what the refusal names "
              "was not written, and nothing half-written was left to block the re-run.",
              cause="A full runner disk (large transcripts, caches), a quota, or a read-only mount."),
        _spec("io.missing", _U, "an input file does not exist",
              "Check the path the refusal names (relative to the workspace) and that the step producing it (or "
              "the artifact download) ran before.",
              cause="A missing artifact download, a typo in a path input, or a file written to another directory."),
        _spec("io.invalid_json", _I, "a file is not valid UTF-8 JSON",
              "Open the file the refusal names; regenerate it with the step that writes it rather than editing it.",
              cause="A truncated file (a disk full, a cancelled step), or a file in another encoding."),
        # --- remote services -----------------------------------------------------------------------
        _spec("testops.auth", _R, "TestOps refused the credentials (401/403) or the token exchange failed",
              "Check that the secret passed as `testops-token` is a valid API token for this endpoint, with "
              "access to the contract's project.",
              cause="An expired or revoked token, a token of another instance, or a user without project access."),
        _spec("testops.http_<status>", _R, "TestOps answered with this HTTP status",
              "Read the status in the refusal: 404 means a wrong id or prefix (`testops.api-prefix`), 5xx a server "
              "problem (wait, then re-run; after a change, reconcile).",
              cause="A wrong endpoint or API prefix, an id of another project, or TestOps being unavailable."),
        _spec("testops.transport", _R, "TestOps could not be reached, or the request timed out",
              "Check that the runner reaches the endpoint (DNS, proxy, firewall, self-hosted runner network), then "
              "re-run; after a change, run reconcile.",
              cause="A private TestOps instance not reachable from GitHub-hosted runners, or a network outage."),
        _spec("testops.response_invalid", _R, "a TestOps response is not JSON of the expected shape",
              "Check that `testops.endpoint` and `api-prefix` point at the TestOps API (not a login page or "
              "proxy), then re-run.",
              cause="A proxy or single sign-on page answering instead of TestOps, or an unsupported TestOps version."),
        _spec("testops.response_too_large", _R, "a TestOps response is larger than the size cap",
              "Check that the endpoint is TestOps; split very large launches into several campaigns.",
              cause="An endpoint that streams something other than the API's JSON."),
        _spec("testops.uncertain", _R, "a mutation may or may not have happened",
              "Run `mode: reconcile`; it observes TestOps and never re-sends blindly.",
              cause="A gateway error or timeout in answer to a change request."),
        _spec("testops.deadline", _R, "a deadline for TestOps requests ran out: overall, per call, or for one answer",
              "Re-run when TestOps is responsive; raise `deadline-seconds` (verify), or the connect and read timeouts "
              "(docs/testops.md), if it is merely slow.",
              cause="A slow or overloaded TestOps instance, repeated rate limiting, or an answer sent a byte at a time."),
        _spec("testops.not_configured", _U, "the TestOps backend needs an endpoint, project id and token",
              "Add the `testops` section to the contract and pass the token as `testops-token`, or use "
              "`backend: files`.",
              cause="The token secret is not passed to the job, or the contract has no `testops` section."),
        # --- stream: each case published as its workers end; verify-stream ------------------------------
        _spec("stream.unsupported", _U, "this campaign cannot be streamed: its verdicts depend on more than each "
              "case's own cells (a `budget`, or cases `measured-by: remote`)",
              "Publish it with `publish: batch` (the default), or stream a campaign without a budget or remote "
              "cases.",
              cause="A contract with a `budget`, or cases `measured-by: remote`, with `publish: stream`."),
        _spec("stream.ledger", _I, "the stream ledger, or the files it lists, are not what the stream job wrote",
              "Pass the stream job's `stream-sha256` output and download its artifact by id into a fresh "
              "directory; run the campaign again if the artifact was changed.",
              cause="A ledger or published file changed after the stream job (another job uploading under the "
                    "stream's artifact name), or a ledger of another campaign or selection."),
        _spec("stream.mismatch", _I, "a case was published by the stream with another status or other evidence "
              "than the export measured from the same run's cells",
              "Treat the run as attacked or the cells as changed after the stream took them: compare the stream's "
              "summary with the export's for the case named. What was published is left as it is (never "
              "overwritten); run the campaign again.",
              cause="A worker artifact read differently by the stream and the export (replaced between the two), "
                    "or a release mismatch between the stream and export jobs."),
        _spec("stream.missing", _I, "a case the export measured was never published by the stream",
              "Check the stream job's log (it ended early, or a worker's artifact was refused); publish the "
              "campaign with `publish: batch` or run it again.",
              cause="The stream job stopped (refusal, deadline) while workers were still uploading cells."),
        _spec("stream.extra", _I, "the stream published a case the export receipt does not have",
              "Run the campaign again; the stream and export must read the same selection.",
              cause="A stream ledger of another selection or run attempt."),
        _spec("stream.duplicate", _I, "the stream ledger lists a case twice",
              "Run the campaign again; a stream publishes each case once.",
              cause="A ledger written by hand or merged from two stream runs."),
        _spec("campaign.unfinished", _I, "a case's worker job ended without uploading its cells: the campaign was "
              "cancelled, timed out or cut short before the case was measured; the case is reported broken",
              "Re-run the cases that did not pass (`rerun-from`); with `publish: stream` every case that finished "
              "was already published. If the run was cut short by a timeout, raise the workers' `timeout-minutes`.",
              cause="A cancelled run, a job timeout, or a worker that failed before its upload step.",
              scope=SCOPE_CASE),
        _spec("github.http_<status>", _R, "the GitHub REST API answered with this HTTP status",
              "For 401/403 check the job's `permissions:` (`actions: read`) and the token; for 404 the run or "
              "artifact id; for 5xx wait and re-run.",
              cause="Missing `actions: read` permission, an expired artifact, or a GitHub outage."),
        _spec("github.transport", _R, "the GitHub REST API could not be reached",
              "Check GITHUB_API_URL (GHES) and the runner's network, then re-run.",
              cause="A self-hosted runner without access to the API host, or a network outage."),
        _spec("github.timeout", _R, "GitHub did not finish an answer (headers and body) within its deadline",
              "Check GITHUB_API_URL and the runner's network (a proxy that stalls answers), then re-run; raise "
              "TESTOPS_EVIDENCE_GITHUB_TIMEOUT only if the server is merely slow.",
              cause="A stalled or overloaded GHES or proxy, or a server that sends its answer a byte at a time."),
        _spec("github.response_invalid", _R, "a GitHub response lacks a field the action needs",
              "Check that GITHUB_API_URL points at the GitHub REST API; report it if it does.",
              cause="A proxy answering instead of GitHub, or a GHES version without the field."),
        _spec("github.pagination_foreign", _R, "a GitHub list links its next page to another host, scheme or port",
              "Check that GITHUB_API_URL is the API the runner should use (GHES: https://HOST/api/v3) and that no "
              "proxy rewrites the Link header; the page was not followed, so re-run once the answer is fixed.",
              cause="A proxy or hostile server answering for GitHub with a Link header that points elsewhere."),
        # --- GitHub answers read as GitHub's REST description promises them (issue 28, G1) ---------------
        _spec("github.field_absent", _R, "a GitHub answer leaves out a field its description makes optional, "
              "and the action cannot bind the run without it",
              "Use a GitHub (or GHES) whose REST API reports the field the refusal names (GHES 3.17's does for "
              "`run_attempt`); nothing was published, so re-run once it does.",
              cause="An older GHES or a proxy that leaves out `run_attempt`: GitHub's description does not require "
                    "it, but every receipt, artifact binding and the first-only trust rule are bound to the attempt."),
        # The campaign's result where GitHub users look (verify: check-run, pr-comment; github_checks.py).
        _spec("github.check_run_denied", _R, "GitHub refused the check run (403 or 404): the token lacks `checks: write`",
              "Grant `checks: write` to the job that runs verify (the campaign template's publish job; and to the "
              "calling job of a reusable workflow), or set `check-run: false`.",
              cause="`check-run: true` with a token whose permissions do not include `checks: write`."),
        _spec("github.pr_comment_denied", _R, "GitHub refused the pull-request comment (403 or 404): the token "
              "lacks `pull-requests: write`",
              "Grant `pull-requests: write` to the job that runs verify (and to the calling job of a reusable "
              "workflow), or set `pr-comment: false`. A pull request from a fork gets a read-only token: no comment "
              "can be written from its run.",
              cause="`pr-comment: true` with a read-only token, e.g. a `pull_request` run from a fork."),
    ]
)
