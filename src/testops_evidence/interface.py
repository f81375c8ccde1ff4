"""The public interface in one place: modes, inputs and outputs.

``action.yml``, ``composite/action.yml``, the CLI options, ``entrypoint.py`` and the README's input
table are all checked against this module by tests, so they agree by construction, not by memory.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES: tuple[str, ...] = (
    "guard",
    "bootstrap",
    "launch",
    "select",
    "verify-selection",
    "collect-cells",
    "export",
    "stream",
    "verify-stream",
    "upload",
    "verify",
    "import",
    "reconcile",
    "pages",
)
# Extra CLI-only commands (not action modes): validate a contract, the local rehearsal, and the worker-side
# helper that writes a cell result from test or evaluation reports.
COMMANDS: tuple[str, ...] = (*MODES, "check", "rehearse", "cell", "verify-attestation")

ALL = "*"  # every action mode; a CLI-only command names the inputs it takes itself
CLI_ONLY: tuple[str, ...] = tuple(command for command in COMMANDS if command not in MODES)


@dataclass(frozen=True)
class InputSpec:
    name: str
    description: str
    default: str | None = None  # the action.yml default; None = no default
    modes: tuple[str, ...] = (ALL,)
    kind: str = "string"  # string | bool | int | path | secret
    env_fallbacks: tuple[str, ...] = ()

    def applies_to(self, mode: str) -> bool:
        return mode in self.modes or (ALL in self.modes and mode in MODES)

    @property
    def secret(self) -> bool:
        return self.kind == "secret"


INPUTS: tuple[InputSpec, ...] = (
    InputSpec("mode", "The phase to run: " + ", ".join(MODES) + ".", None),
    InputSpec("contract", "The campaign contract file (YAML or JSON), relative to the workspace.",
              ".github/testops-evidence.yml", (ALL, "check", "rehearse", "cell"), kind="path"),
    InputSpec("backend", "Where evidence goes: `testops` or `files`. Empty: `testops` if the contract has a "
              "`testops` section, else `files`.", "", ("guard", "select", "stream", "verify-stream", "upload", "verify",
                                                    "check")),
    InputSpec("github-token", "Token for the GitHub REST API (run, artifacts). Honours GITHUB_API_URL (GHES).",
              "${{ github.token }}", kind="secret", env_fallbacks=("GITHUB_TOKEN", "GH_TOKEN")),
    InputSpec("testops-token", "Allure TestOps API token; only for the token phases (bootstrap, launch, select, "
              "stream, upload, verify, reconcile). Worker phases refuse if any TestOps token variable exists.",
              None, kind="secret", env_fallbacks=("ALLURE_TOKEN", "TESTOPS_TOKEN")),
    # Only the phases that talk to TestOps (TOKEN_PHASES) read these: every other --help stays free of them.
    InputSpec("testops-endpoint", "Override of the contract's TestOps endpoint.", "",
              ("bootstrap", "launch", "select", "stream", "upload", "verify", "reconcile"),
              env_fallbacks=("ALLURE_ENDPOINT",)),
    InputSpec("testops-project-id", "Override of the contract's TestOps project id.", "",
              ("bootstrap", "launch", "select", "upload", "verify", "reconcile"), kind="int",
              env_fallbacks=("ALLURE_PROJECT_ID",)),
    InputSpec("state-dir", "Receipts, once-markers and failure.json. Empty: $RUNNER_TEMP/testops-evidence (in the Docker action the mounted runner temp, else the workspace; outside Actions ./.testops-evidence/state).",
              "", (ALL, *CLI_ONLY), kind="path"),
    InputSpec("fail-on-failed-cases", "export / verify: exit 1 when the evidence is complete but not every case "
              "passed (`false`: exit 0, with a notice).", "true", ("export", "verify", "verify-stream"), kind="bool"),
    # --- guard
    InputSpec("local", "Run from git instead of a GitHub run: guard derives the run context from git (as "
              "`rehearse` does) and every later phase binds to it; the evidence is marked local, the backend is "
              "`files`, and it can never be published to TestOps. Outside GitHub Actions always; inside only on a "
              "local runner such as act (docs/local.md), refused on GitHub's runners.", "false",
              ("guard", "select", "verify-selection", "export", "upload", "verify", "pages"), kind="bool"),
    # --- bootstrap / launch / reconcile
    InputSpec("dry-run", "bootstrap: print the difference between the contract and TestOps, change nothing.",
              "false", ("bootstrap",), kind="bool"),
    InputSpec("launch-name", "launch: name of the launch. Empty: `<campaign> #<run number>`.", "", ("launch",)),
    InputSpec("resume", "reconcile: re-send a mutation, but only when observation proves it absent.",
              "false", ("reconcile",), kind="bool"),
    # --- select
    InputSpec("job-run-id", "select: the TestOps job run id (TestOps-launched runs); must equal "
              "ALLURE_JOB_RUN_ID when both are set.", "", ("select",), kind="int",
              env_fallbacks=("ALLURE_JOB_RUN_ID",)),
    InputSpec("standing-plan", "select: a standing testplan.json for manual runs.", "", ("select",), kind="path"),
    InputSpec("job-run-env", "select: a file with the output of `allurectl job-run env` (manual TestOps runs).",
              "", ("select",), kind="path"),
    InputSpec("cases", "select: comma-separated case keys to select (files backend, or to split a campaign). "
              "rehearse: the same for its campaign.", "", ("select", "rehearse")),
    InputSpec("catalog", "select: a JSON catalog to filter to the selected cases (written as a copy).", "",
              ("select",), kind="path"),
    InputSpec("rerun-from", "select: re-run what did not pass: an earlier export receipt (a file, a directory "
              "holding it, or `run:<run id>` for the receipt in that run's artifacts); selects only its cases that "
              "did not pass, as a new campaign of this run.", "", ("select",)),
    InputSpec("rerun-from-sha256", "select: the SHA-256 of the receipt to re-run (the earlier export's "
              "receipt-sha256, shown in its summary); required with rerun-from.", "", ("select",)),
    InputSpec("compare-with", "select: the baseline the export and verify summaries compare with: `previous` "
              "(the receipt in the report artifact of the newest earlier run of this workflow on this branch), "
              "a receipt file, or empty for none.", "", ("select",)),
    InputSpec("selection-path", "select / verify-selection / export / upload / verify: the selection file; cell: "
              "the verified selection to bind the cell result to (optional); pages: the selection whose compiled "
              "contract it reads (optional).",
              "testops-evidence-selection.json", ("select", "verify-selection", "collect-cells", "export", "stream",
                                                  "verify-stream", "upload", "verify", "cell", "pages"), kind="path"),
    InputSpec("selection-dir", "verify-selection / collect-cells / export / stream / verify-stream / upload / verify "
              "/ pages: the fresh "
              "directory the selection artifact was downloaded into (by its id). The selection is read from it "
              "(a bare file name in `selection-path`, its default included, is taken inside it), and the phase "
              "refuses the directory when it holds anything but the selection's own files "
              "(`selection.extra_file`). Empty: no directory check.", "",
              ("verify-selection", "collect-cells", "export", "stream", "verify-stream", "upload", "verify", "pages"),
              kind="path"),
    InputSpec("selection-sha256", "verify-selection / export / upload / verify: the digest passed as the select "
              "job's output (required inside GitHub Actions); cell: the digest of the selection the cell belongs to "
              "(else TESTOPS_EVIDENCE_SELECTION_SHA256, else the digest of `selection-path`); pages (optional): "
              "with it, a YAML contract is built from select's compiled copy beside the selection instead of "
              "being parsed again.", "",
              ("verify-selection", "collect-cells", "export", "stream", "verify-stream", "upload", "verify", "cell",
               "pages")),
    InputSpec("guard-sha256", "select: guard's `guard-sha256` output, when guard ran earlier in the same job: select "
              "then builds a YAML contract from the copy guard compiled in the state directory, bound by this digest, "
              "instead of parsing it again (empty: select parses the contract).", "", ("select",)),
    # --- export / upload / verify
    InputSpec("cell-results", "export: directory of cell results (`*.json` cell-result/v2, or per case the reports `cell` "
              "reads: docs/evidence.md).", "cell-results", ("export",), kind="path"),
    InputSpec("artifact-prefix", "export / collect-cells / select: the campaign's artifact prefix. select: the "
              "prefix of the artifacts rerun-from and compare-with look for (default `testops-evidence`). export: "
              "when set, "
              "`cell-results` holds one directory per worker artifact, `<prefix>-cells-<run attempt>-<job>` "
              "(download-artifact without merge-multiple), and a cell is accepted only from the worker job the "
              "matrix plan assigned its case to (empty: the cells are read as one trust domain); collect-cells: "
              "worker jobs are named `<prefix> <job>`; stream: as collect-cells.", "", ("collect-cells", "export", "select", "stream")),
    InputSpec("results-dir", "export / upload: the allure-results directory.", "allure-results",
              ("export", "upload", "verify-stream"), kind="path"),
    InputSpec("receipt-path", "upload / verify: the export receipt. Empty: `<results-dir>-receipt.json`.", "",
              ("upload", "verify", "verify-stream"), kind="path"),
    InputSpec("receipt-sha256", "upload / verify / pages: the export job's `receipt-sha256` output (required inside "
              "GitHub Actions): the receipt is re-hashed against it before anything is trusted or sent.", "",
              ("upload", "verify", "verify-stream", "pages")),
    InputSpec("report", "upload (files backend): build an Allure Report 3 HTML report into the publication: `auto` "
              "(when Node.js is there: the pinned Allure Report is installed with npm if needed; else a warning), "
              "`always` (refuse without it), `never`. rehearse: the same for its report.", "auto",
              ("upload", "rehearse")),
    InputSpec("report-history", "upload (files backend): a `history.jsonl` of earlier reports of this campaign "
              "(from a Pages branch, or a download) that the report continues, so trends and retries show.", "",
              ("upload",), kind="path"),
    InputSpec("history-artifact", "upload (files backend): name pattern of the history artifacts of earlier runs "
              "(e.g. `testops-evidence-history-*`): the newest completed run of this workflow on this branch that "
              "has one gives the history, from the artifact whose id and digest that run's `publish` job recorded in a step "
              "`testops-evidence: uploaded history <id> sha256:<digest>` (needs `actions: read`). Empty: none. "
              "`report-history` wins.", "",
              ("upload",)),
    InputSpec("history-limit", "upload (files backend): how many earlier reports the history keeps.", "20",
              ("upload",), kind="int"),
    InputSpec("deadline-seconds", "verify: how long to wait for the publication to become visible.", "600",
              ("verify",), kind="int"),
    # --- stream / verify-stream
    InputSpec("stream-dir", "stream: where the cases are published as their workers end (`allure-results/` and the "
              "ledger `stream.json`); verify-stream, and upload after a stream to TestOps: the same directory, "
              "downloaded.", "testops-evidence-stream", ("stream", "verify-stream", "upload"), kind="path"),
    InputSpec("stream-deadline-seconds", "stream: how long to watch the worker jobs at most; the cases of workers "
              "still running then are left to export, which reports any that never finished.", "21600",
              ("stream",), kind="int"),
    InputSpec("stream-sha256", "verify-stream: the stream job's `stream-sha256` output (required inside GitHub "
              "Actions): the ledger is re-hashed against it. upload (TestOps backend): when set, the cases the stream "
              "already sent into the launch are not sent again.", "", ("verify-stream", "upload")),
    InputSpec("verify-depth", "verify: `page` (list pages only) or `detail` (also fetch each result once to "
              "check its job run).", "page", ("verify",)),
    InputSpec("check-run", "verify: also report the campaign summary as a check run on the tested commit, with one "
              "annotation per case that did not pass (needs `checks: write` and `github-token`).", "false",
              ("verify",), kind="bool"),
    InputSpec("pr-comment", "verify: when the run is for a pull request, keep one comment on it with the campaign "
              "summary, updated by every later run (needs `pull-requests: write` and `github-token`).", "false",
              ("verify",), kind="bool"),
    # --- pages
    InputSpec("pages-dir", "pages: the checked-out GitHub Pages branch the report is written into.", "",
              ("pages",), kind="path"),
    InputSpec("publication-dir", "pages: a files-backend publication (the downloaded report artifact: "
              "`allure-results/`, its receipt, `allure-report/`, `history.jsonl` and the manifest "
              "`testops-evidence-tree.json`).", "", ("pages",), kind="path"),
    InputSpec("report-tree-sha256", "pages: the publish job's `report-tree-sha256` output (required inside GitHub "
              "Actions): the publication's manifest is re-hashed against it, and the publication must hold exactly "
              "the files the manifest lists, each with its digest.", "", ("pages",)),
    InputSpec("pages-keep", "pages: how many reports of the campaign the site keeps (the newest; older ones are "
              "removed).", "20", ("pages",), kind="int"),
    InputSpec("pages-url", "pages: the site's address. Empty: `https://<owner>.github.io/<repository>` on "
              "github.com.", "", ("pages",)),
    # --- import
    InputSpec("source-run-id", "import: the run id of the workflow that measured the remote cells.", "",
              ("import",), kind="int"),
    InputSpec("artifact-name", "import: artifact name or glob pattern (fnmatch).", "*", ("import",)),
    InputSpec("intent", "import: the import intent file (campaign, source revision, selected executions).",
              "", ("import",), kind="path"),
    InputSpec("ledger-sha256", "export: the SHA-256 of the ledger (the import job's ledger-sha256 output); when "
              "given, the ledger's bytes must hash to it.", "", ("export",)),
    InputSpec("ledger", "import: the campaign ledger file (created if absent); export: the ledger whose cells "
              "the cases measured remotely (`measured-by: remote`) take.", "campaign-ledger.json",
              ("import", "export"), kind="path"),
)

INPUTS_BY_NAME: dict[str, InputSpec] = {spec.name: spec for spec in INPUTS}


@dataclass(frozen=True)
class OptionSpec:
    """A command-line option of a CLI-only command that is not an action input (``rehearse``, ``cell``)."""

    name: str
    description: str
    commands: tuple[str, ...]
    choices: tuple[str, ...] = ()
    default: str | None = None


CLI_OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("workdir", "where the rehearsal writes (default: ./rehearsal)", ("rehearse",)),
    OptionSpec("examples", "the examples directory (default: ./examples)", ("rehearse",)),
    OptionSpec("case-command", "your campaign instead of the examples': the bash command that runs one case, run "
               "from this directory for each selected case with the environment the campaign template gives "
               "(docs/workflows.md); the contract defaults to .github/testops-evidence.yml", ("rehearse",)),
    OptionSpec("case", "required: the contract case key the reports measured", ("cell",)),
    OptionSpec("out", "required: the cell result file to write (once; never overwritten)", ("cell",)),
    OptionSpec("source-sha", "the evaluated commit (default: GITHUB_SHA in Actions, else git HEAD)", ("cell",)),
    OptionSpec("attempt-id", "the attempt id (default: derived from the reports' digests)", ("cell",)),
    OptionSpec("attestation", "required: the publication attestation to check (verify's publication.intoto.json)",
               ("verify-attestation",)),
    OptionSpec("published", "the directory that holds the attested files and nothing else: `<results>/`, "
               "`<results>-receipt.json` and, files backend, every file of the publication's manifest "
               "(default: the attestation's directory's `published/`, as verify leaves it for the files backend)",
               ("verify-attestation",)),
    OptionSpec("trial", "the trial ordinal of a case measured several times (default: TESTOPS_EVIDENCE_TRIAL)",
               ("cell",)),
)


@dataclass(frozen=True)
class OutputSpec:
    name: str
    description: str
    modes: tuple[str, ...]


OUTPUTS: tuple[OutputSpec, ...] = (
    OutputSpec("error-code", "On failure: the stable error code (`<area>.<reason>`).", (ALL,)),
    OutputSpec("operation", "guard: the operation the run performs.", ("guard",)),
    OutputSpec("target-sha", "guard: the commit under evaluation (40 hex).", ("guard",)),
    OutputSpec("workflow-id", "guard: the numeric workflow id.", ("guard",)),
    OutputSpec("run-url", "guard: the run's URL.", ("guard",)),
    OutputSpec("run-attempt", "guard: the run attempt.", ("guard",)),
    OutputSpec("guard-sha256", "guard: SHA-256 of guard's receipt in the state directory; pass it to a select step "
               "in the same job as `guard-sha256`, and the contract is not parsed again.", ("guard",)),
    OutputSpec("created-cases", "bootstrap: test cases created (JSON array of keys).", ("bootstrap",)),
    OutputSpec("updated-cases", "bootstrap: test cases updated (JSON array of keys).", ("bootstrap",)),
    OutputSpec("plan-id", "bootstrap: the test plan id.", ("bootstrap",)),
    OutputSpec("launch-id", "launch / select / upload: the launch id.", ("launch", "select", "upload")),
    OutputSpec("launch-url", "launch / upload: the launch URL (files backend: the `file://` URL of the report, or of "
               "the publication directory without one; the campaign template gives the artifact's URL instead).",
               ("launch", "upload")),
    OutputSpec("publication-dir", "upload (files backend): the publication directory to keep as an artifact: "
               "`allure-results/`, its receipt, `allure-report/`, `history.jsonl` and the manifest "
               "`testops-evidence-tree.json`.", ("upload",)),
    OutputSpec("publication-name", "upload (files backend): `<campaign>-<run id>-<run attempt>`, for naming its "
               "artifact.", ("upload",)),
    OutputSpec("report-built", "upload (files backend): whether the HTML report was built.", ("upload",)),
    OutputSpec("report-tree-sha256", "upload (files backend): SHA-256 of the publication's manifest "
               "(`testops-evidence-tree.json`: every file of `publication-dir` with its digest); pass it to pages.",
               ("upload",)),
    OutputSpec("selection-path", "select: the selection file written.", ("select",)),
    OutputSpec("selection-sha256", "select: SHA-256 of the selection bytes.", ("select",)),
    OutputSpec("selected-count", "select / verify-selection: number of selected cases.",
               ("select", "verify-selection")),
    OutputSpec("full-plan", "select: whether the whole contract was selected.", ("select",)),
    OutputSpec("job-run-id", "select: the TestOps job run id (empty on the files backend).", ("select",)),
    OutputSpec("native-matrix", "select: matrix for the native lane (JSON).", ("select",)),
    OutputSpec("native-count", "select: jobs in the native matrix.", ("select",)),
    OutputSpec("native-max-parallel", "select: max-parallel of the native lane.", ("select",)),
    OutputSpec("external-matrix", "select: matrix for the external lane (JSON).", ("select",)),
    OutputSpec("external-count", "select: jobs in the external matrix.", ("select",)),
    OutputSpec("external-max-parallel", "select: max-parallel of the external lane.", ("select",)),
    OutputSpec("artifact-ids", "collect-cells: the worker cell artifacts verified to come from their own worker's "
               "upload step (comma-separated ids, for download-artifact's `artifact-ids`; empty when none).",
               ("collect-cells",)),
    OutputSpec("collected-count", "collect-cells: worker artifacts verified.", ("collect-cells",)),
    OutputSpec("stream-dir", "stream: the directory the cases were published into.", ("stream",)),
    OutputSpec("stream-sha256", "stream: SHA-256 of the stream ledger; pass it to verify-stream.", ("stream",)),
    OutputSpec("published-count", "stream / verify-stream: cases published by the stream.",
               ("stream", "verify-stream")),
    OutputSpec("stream-complete", "stream / verify-stream: whether every worker job had ended when the stream "
               "stopped (false: cut short by its deadline or a cancellation).", ("stream", "verify-stream")),
    OutputSpec("results-dir", "export: the allure-results directory written.", ("export",)),
    OutputSpec("receipt-path", "export: the export receipt.", ("export",)),
    OutputSpec("receipt-sha256", "export: SHA-256 of the export receipt's bytes; pass it to upload and verify as a "
               "job output, like `selection-sha256`.", ("export",)),
    OutputSpec("passed-count", "export / stream: results (stream: published cases) with status passed.",
               ("export", "stream")),
    OutputSpec("failed-count", "export / stream: results (stream: published cases) with status failed.",
               ("export", "stream")),
    OutputSpec("broken-count", "export / stream: results (stream: published cases) with status broken.",
               ("export", "stream")),
    OutputSpec("all-passed", "export / verify / verify-stream: whether every case passed.",
               ("export", "verify", "verify-stream")),
    OutputSpec("cost-nanodollars", "export / verify: the campaign's cost in nanodollars (every admitted attempt); "
               "empty when no cell reported one. A lower bound when cost-coverage is partial.", ("export", "verify")),
    OutputSpec("cost-coverage", "export / verify: how complete cost-nanodollars is: reported, estimated, partial "
               "(a lower bound: some figures were unavailable) or unavailable.", ("export", "verify")),
    OutputSpec("comparison", "export / verify: the comparison with the previous campaign (compare-with): "
               "`compared`, `not-comparable` (another contract or profile), `no-baseline`, or empty.",
               ("export", "verify")),
    OutputSpec("regressions", "export / verify: the regressions against the baseline, a JSON array of "
               "{key, kind (newly-failing: a deterministic case; pass-rate-drop: beyond noise after the "
               "multiple-comparison correction), baseline, current}; `[]` when none or not compared.",
               ("export", "verify")),
    OutputSpec("comparison-difference", "export / verify: the campaign pass rate's change against the baseline, "
               "paired by case over the cases both measured, as JSON: {mean, standard-error, interval-95, p-value, "
               "cases, clusters, only-baseline, only-current, verdict (better, worse or no detectable change)}; "
               "empty when not compared.", ("export", "verify")),
    OutputSpec("pass-rate", "export / verify: the campaign pass rate, the mean over cases of each case's pass rate "
               "over its measured trials (0 to 1); empty when no case measured anything.", ("export", "verify")),
    OutputSpec("pass-rate-ci", "export / verify: its 95% interval, clustered by case (or by the contract's "
               "clusters), as a JSON array [low, high]; empty when there is none.", ("export", "verify")),
    OutputSpec("uploaded-count", "upload: results uploaded.", ("upload",)),
    OutputSpec("published", "upload: whether the publication completed.", ("upload",)),
    OutputSpec("verified-count", "verify: receipt rows verified; verify-stream: published cases held to the "
               "receipt.", ("verify", "verify-stream")),
    OutputSpec("attestation-path", "verify: the in-toto Statement v1 attesting the publication "
               "(`<state-dir>/publication.intoto.json`; subjects: the receipt and every published file).", ("verify",)),
    OutputSpec("attestation-predicate-path", "verify: its predicate alone (`<state-dir>/publication.predicate.json`), "
               "for `actions/attest`'s `predicate-path`.", ("verify",)),
    OutputSpec("pages-url", "pages: the address of the report on the site.", ("pages",)),
    OutputSpec("pages-kept", "pages: reports of the campaign the site keeps.", ("pages",)),
    OutputSpec("pages-removed", "pages: report directories removed by retention (JSON array).", ("pages",)),
    OutputSpec("imported-count", "import: cells imported.", ("import",)),
    OutputSpec("duplicate-count", "import: cells already in the ledger (no-op).", ("import",)),
    OutputSpec("ledger-path", "import: the ledger file.", ("import",)),
    OutputSpec("ledger-sha256", "import: the SHA-256 of the ledger after the import (pass it to export's "
               "ledger-sha256).", ("import",)),
    OutputSpec("reconciled", "reconcile: mutations resolved (JSON array of stages).", ("reconcile",)),
    OutputSpec("still-uncertain", "reconcile: mutations still uncertain (JSON array of stages).", ("reconcile",)),
)

OUTPUTS_BY_NAME: dict[str, OutputSpec] = {spec.name: spec for spec in OUTPUTS}

# Phases that may hold the TestOps token, and those that must not even see the variable.
TOKEN_PHASES = frozenset({"bootstrap", "launch", "select", "stream", "upload", "verify", "reconcile"})
WORKER_PHASES = frozenset({"verify-selection", "collect-cells", "export", "cell"})
TOKEN_VARIABLES = ("ALLURE_TOKEN", "TESTOPS_TOKEN")


def inputs_for(mode: str) -> list[InputSpec]:
    """The inputs of an action mode, or the input-named options of a CLI-only command."""
    return [spec for spec in INPUTS if spec.name != "mode" and spec.applies_to(mode)]


def options_for(command: str) -> list[OptionSpec]:
    """The options a CLI-only command has beyond its inputs; ``cell`` has one per report format, after
    ``--case`` (readers/adapters/formats.py)."""
    specs = [spec for spec in CLI_OPTIONS if command in spec.commands]
    if command == "cell":
        from testops_evidence.readers.adapters.formats import FORMATS

        specs[1:1] = [OptionSpec(fmt.kind, fmt.help, ("cell",)) for fmt in FORMATS]
    return specs


def outputs_for(mode: str) -> list[OutputSpec]:
    return [spec for spec in OUTPUTS if ALL in spec.modes or mode in spec.modes]
