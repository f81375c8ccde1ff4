"""The fuzz targets, as data for docs/security.md (standard library only: the docs generator loads it).

Every target a fuzz test names must be listed here (fuzzing.Targets refuses an unknown name), so the
document cannot miss one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FuzzTarget:
    name: str
    source: str  # where the untrusted input comes from
    chain: str  # what the fuzzed input goes through (the parser, then what consumes its result)
    test: str  # the test module


_DOCS = "test_fuzz_documents.py"
_HTTP = "test_fuzz_http.py"
_IMPORT = "test_fuzz_import.py"

FUZZ_TARGETS: dict[str, FuzzTarget] = {t.name: t for t in (
    FuzzTarget("event-file", "`GITHUB_EVENT_PATH` (a step can rewrite it)",
               "`context.read_event` → `github_run.rest_context` (cross-checks with the REST run)", _DOCS),
    FuzzTarget("runner-environment", "`GITHUB_*` variables (a step can set some through `GITHUB_ENV`)",
               "`context.env_context` → `rest_context`", _DOCS),
    FuzzTarget("contract-yaml", "the contract file in the repository (a fork PR can change it)",
               "`contract.parse_contract_bytes` (YAML; alias bombs, tags, deep nesting) → `contract_from_document`",
               _DOCS),
    FuzzTarget("contract-json", "the contract file (JSON form)",
               "`parse_contract_bytes` (JSON; duplicate keys) → `contract_from_document`", _DOCS),
    FuzzTarget("standing-plan", "`testplan.json` from the repository or a manual TestOps run",
               "`testplan.parse_standing_plan` → `match_rows` against the contract", _DOCS),
    FuzzTarget("job-run-plan", "TestOps `GET /jobrun/{id}/plan` answer",
               "`testplan.parse_jobrun_plan` → `match_rows`", _DOCS),
    FuzzTarget("testops-endpoint", "the `testops-endpoint` input (`ALLURE_ENDPOINT`) and the contract's endpoint",
               "`endpoints.check_endpoint` (userinfo, query, the token, malformed hosts and ports) → "
               "`TestOpsClient.configured` → `url`; the token never in the refusal", _DOCS),
    FuzzTarget("job-run-env", "saved `allurectl job-run env` output",
               "`jobrun_env.parse_job_run_env` (token line dropped)", _DOCS),
    FuzzTarget("cell-result", "a worker's cell result (artifact)",
               "`cells.cell_from_bytes` → `bind_cells` → `verdict` for every case", _DOCS),
    FuzzTarget("junit-xml", "JUnit XML written by the case's harness",
               "`junit.parse_junit` (DOCTYPE/entities, depth, encodings) → `build_cell` → `adapted_cell`", _DOCS),
    FuzzTarget("allure-results", "`*-result.json` written by the case's harness",
               "`allure_results.parse_results` → `build_cell` → `adapted_cell`", _DOCS),
    FuzzTarget("inspect-log", "an Inspect AI log (`.eval` archive or `.json`) written by the case's eval",
               "`inspect_log.read_log` (safe archive reader, Zstandard, version, schema, consistency) → `to_run` → "
               "`framework_cell` → `adapted_cell`", _DOCS),
    FuzzTarget("promptfoo-results", "a promptfoo results file written by the case's eval",
               "`promptfoo.read_results` (version, schema, consistency) → `framework_cell` → `adapted_cell`", _DOCS),
    FuzzTarget("report-formats", "a report of every format of the registry, where a case directory holds it",
               "`layout.adapt_trials` (listing, budgets, safe reads, the format's parser from "
               "`adapters/formats.py`) → `framework_cell` → `adapted_cell`", "test_report_formats.py"),
    FuzzTarget("zstd-stream", "a Zstandard entry of an `.eval` archive",
               "`zstd.decompress` (frames, blocks, Huffman and FSE tables, sequences; bounded by the entry's size)",
               _DOCS),
    FuzzTarget("artifact-zip", "a downloaded artifact zip (damaged bytes and hostile entries)",
               "`archive.extract_zip` (names, links, duplicates, sizes, ratio) and every inflated digest", _DOCS),
    FuzzTarget("selection", "the selection file a worker downloads, with its digest",
               "`selection.load_selection` → `validate_against` the contract and the live run", _DOCS),
    FuzzTarget("export-receipt", "the export receipt upload/verify read",
               "`receipt.receipt_from_bytes` → `bind_receipt` → `expected_files`/`counts`", _DOCS),
    FuzzTarget("ledger", "the campaign ledger file (cached or restored between runs)",
               "`Ledger.parse` → `add_import` (a duplicate and a new record) → `to_bytes` → parse again", _DOCS),
    FuzzTarget("catalog", "the harness catalog select filters (from the repository)",
               "`parse_json_bytes` → `catalog.filter_catalog` → `canonical_json`", _DOCS),
    FuzzTarget("github-run", "GitHub `GET …/actions/runs/{id}` document",
               "`github_run.run_from_json` → `rest_context`", _DOCS),
    FuzzTarget("github-artifact", "GitHub artifact list entries and `Link` headers",
               "`github_run.artifact_from_json`, `next_link`", _DOCS),
    FuzzTarget("testops-page", "a TestOps Spring page",
               "`client.parse_page`", _DOCS),
    FuzzTarget("testops-http-read", "any TestOps answer to a GET: status, headers, lying Content-Length, body",
               "`TestOpsClient.get` over real HTTP (both auth styles; retries on a fake clock)", _HTTP),
    FuzzTarget("testops-http-mutation", "any TestOps answer to a POST",
               "`TestOpsClient.post` over real HTTP; also proves the POST is sent once", _HTTP),
    FuzzTarget("testops-bindings", "mutated job run, job, launch, plan and plan rows recorded from the TestOps "
               "test server", "`testops.binding.bind_job_run` → `parse_jobrun_plan` → `match_rows`", _HTTP),
    FuzzTarget("github-http", "GitHub answers (run, artifact list, zip download) with drawn status and body",
               "PyGithub → `fetch_run`/`list_artifacts`/`download_artifact` → `rest_context`/`extract_zip`", _HTTP),
    FuzzTarget("import-intent", "the import intent file", "`remote.parse_intent` → `bind_intent`", _IMPORT),
    FuzzTarget("remote-cells", "host, result and definition documents inside a remote-cell artifact",
               "`extract_zip` → `find_cells` → `parse_host` → `validate_cell` → ledger `add_import`", _IMPORT),
)}
