"""Fuzz every parser of untrusted files and documents, from the bytes through the checks that consume the
parsed value: only a reportable Refusal may come out (fuzzing.py states the invariant and the profiles).

Targets (names used in docs/security.md): event-file, runner-environment, contract-yaml, contract-json,
standing-plan, job-run-plan, job-run-env, cell-result, junit-xml, allure-results, inspect-log,
promptfoo-results, zstd-stream, artifact-zip, selection, export-receipt, ledger, github-run, github-artifact,
testops-page, catalog.
"""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
import zipfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reliability import corpus
from reliability.fuzzing import (
    INTERESTING_STRINGS,
    Targets,
    document_bytes,
    fuzz_settings,
    json_bytes,
    json_values,
    mutated_bytes,
    mutated_json,
)
from testops_evidence.campaign.catalog import filter_catalog
from testops_evidence.campaign.cells import Binding, CellFile, adapted_cell, admit, verdict
from testops_evidence.campaign.ledger import Ledger
from testops_evidence.campaign.receipt import bind_receipt, receipt_from_bytes
from testops_evidence.campaign.selection import load_selection, validate_against
from testops_evidence.context import env_context, read_event
from testops_evidence.contract import contract_from_document, parse_contract_bytes
from testops_evidence.github_run import artifact_from_json, next_link, rest_context, run_from_json
from testops_evidence.readers.adapters import build_cell, inspect_log, promptfoo
from testops_evidence.readers.adapters.allure_results import parse_results
from testops_evidence.readers.adapters.frameworks import FrameworkRun, framework_cell
from testops_evidence.readers.adapters.junit import parse_junit
from testops_evidence.readers.archive import ArchiveLimits, extract_zip
from testops_evidence.readers.testplan import match_rows, parse_jobrun_plan, parse_standing_plan
from testops_evidence.readers.zstd import ZstdError, decompress
from testops_evidence.safeio import canonical_json, parse_json_bytes, sha256_bytes
from testops_evidence.testops.client import parse_page
from testops_evidence.testops.jobrun_env import parse_job_run_env

# --- GitHub run context -------------------------------------------------------------------------------


@fuzz_settings()
@given(data=st.data())
def test_fuzz_event_file(fuzz: Targets, tmp_path: Path, data: st.DataObject) -> None:
    target = fuzz.target("event-file")
    raw = data.draw(document_bytes(corpus.event_payload()))
    path = tmp_path / "event.json"
    path.write_bytes(raw)
    env = {**corpus.env(), "GITHUB_EVENT_PATH": str(path)}
    run = run_from_json(corpus.run_document())
    with target.example("guard"):
        rest_context(env, read_event(env), run)


GITHUB_VARIABLES = ("GITHUB_REPOSITORY", "GITHUB_WORKFLOW_REF", "GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_RUN_NUMBER",
                    "GITHUB_RUN_ATTEMPT", "GITHUB_EVENT_NAME", "GITHUB_ACTOR_ID", "GITHUB_REF", "GITHUB_REF_NAME",
                    "GITHUB_REPOSITORY_ID")


@fuzz_settings()
@given(changes=st.dictionaries(st.sampled_from(GITHUB_VARIABLES),
                               st.one_of(st.text(max_size=60), st.sampled_from(INTERESTING_STRINGS)), max_size=3),
       removed=st.sets(st.sampled_from(GITHUB_VARIABLES), max_size=2))
def test_fuzz_runner_environment(fuzz: Targets, changes: dict[str, str], removed: set[str]) -> None:
    # A step can write GITHUB_ENV, so the runner's variables are bound to REST, never trusted alone.
    target = fuzz.target("runner-environment")
    env = {k: v for k, v in {**corpus.env(), **changes}.items() if k not in removed}
    with target.example("guard"):
        env_context(env)
        rest_context(env, corpus.event_payload(), run_from_json(corpus.run_document()))


@fuzz_settings()
@given(raw=mutated_json(corpus.run_document()))
def test_fuzz_github_run(fuzz: Targets, raw: object) -> None:
    target = fuzz.target("github-run")
    with target.example("guard"):
        if not isinstance(raw, dict):
            return  # github_run refuses a non-object body before run_from_json (github-http covers it)
        rest_context(corpus.env(), corpus.event_payload(), run_from_json(raw))


@fuzz_settings()
@given(raw=mutated_json(corpus.artifact_document()), link=st.one_of(st.text(max_size=200), st.sampled_from((
    '<https://api.github.com/x?page=2>; rel="next"', "<>; rel=next", '<a>;rel="next", <b>; rel="last"', ","))))
def test_fuzz_github_artifact(fuzz: Targets, raw: object, link: str) -> None:
    target = fuzz.target("github-artifact")
    next_link(link)
    with target.example("import"):
        if isinstance(raw, dict):
            artifact_from_json(raw).to_json()


# --- contract --------------------------------------------------------------------------------------------

HOSTILE_YAML = (
    b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    b"!!python/object/apply:os.system ['true']\n",
    b"version: !!binary aGVsbG8=\n",
    b"<<: {version: 1}\ncampaign: x\n",
    b"--- 1\n--- 2\n",
    b"[" * 5000 + b"]" * 5000,
    b"a: 2001-12-14t21:59:43.10-05:00\nb: .nan\nc: 0o777\nd: !!set {x}\n",
    b"\xef\xbb\xbfversion: 1\n",
    b"key: \"\\ud800\"\n",
    # Round two (#14): integers past 64 bits and Python's 4,300 digits, NaN and infinities, duplicate keys,
    # extreme times, names ending in a line break, tabs, and documents big enough to meet the budget.
    b"version: " + b"9" * 4400 + b"\n",
    b"version: 0x" + b"f" * 40 + b"\ncampaign: c\n",
    b"version: .inf\ncampaign: .NaN\n",
    b"version: 1\nversion: 2\n",
    b"cases:\n- key: |\n    get-task-context\n  finished-at: 9999-12-31T23:59:59-23:59\n",
    b"trust:\n\tevents: [push]\n",
    b"x: [" + b"a," * 310_000 + b"a]\n",
    b"x: " + b"a" * 70_000 + b"\n",
    b"a: &a x\n" + b"".join(b"k%d: *a\n" % i for i in range(10_001)),
)


def yaml_dumped(value: object) -> bytes:
    """A mutated document written as YAML by ruamel.yaml (block style), as a person's editor would keep it."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buffer = io.StringIO()
    try:
        yaml.dump(value, buffer)
    except Exception:
        return json_bytes(value)
    return buffer.getvalue().encode("utf-8", "surrogatepass")


@fuzz_settings()
@given(data=st.data())
def test_fuzz_contract_yaml(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("contract-yaml")
    seed = (corpus.EXAMPLES / "contract.yml").read_bytes()
    raw = data.draw(st.one_of(mutated_bytes(seed, max_mutations=3), st.sampled_from(HOSTILE_YAML),
                              mutated_json(corpus.example_contract().document).map(json_bytes),
                              mutated_json(corpus.example_contract().document).map(yaml_dumped)))
    with target.example("check"):
        contract_from_document(parse_contract_bytes(raw, "contract.yml"))


@fuzz_settings()
@given(data=st.data())
def test_fuzz_contract_json(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("contract-json")
    raw = data.draw(document_bytes(corpus.example_contract().document))
    with target.example("check"):
        contract_from_document(parse_contract_bytes(raw, "contract.json"))


# --- plans ------------------------------------------------------------------------------------------------


@fuzz_settings()
@given(data=st.data())
def test_fuzz_standing_plan(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("standing-plan")
    raw = data.draw(document_bytes(json.loads(corpus.read_example("testplan.json"))))
    with target.example("select"):
        match_rows(parse_standing_plan(raw), corpus.example_contract(), where="standing plan")


@fuzz_settings()
@given(value=st.one_of(mutated_json(corpus.jobrun_plan()), json_values))
def test_fuzz_job_run_plan(fuzz: Targets, value: object) -> None:
    target = fuzz.target("job-run-plan")
    with target.example("select"):
        match_rows(parse_jobrun_plan(value), corpus.example_contract(), where="job run plan")


ENDPOINT_PIECES = ("https://", "http://", "ftp://", "testops.example", "[::1", "[::1]", ":", "8080", "99999", "0",
                   "@", "user", ":pw", "/", "api", "?", "token=", "#", "%", " ", "\t", "\n", "tok-SENTINEL-9z",
                   "é", "..", "\x00")


@fuzz_settings()
@given(raw=st.lists(st.sampled_from(ENDPOINT_PIECES) | st.text(max_size=4), max_size=10).map("".join))
def test_fuzz_testops_endpoint(fuzz: Targets, raw: str) -> None:
    from testops_evidence.contract import TestOpsConfig
    from testops_evidence.errors import Refusal
    from testops_evidence.testops.client import TestOpsClient

    target = fuzz.target("testops-endpoint")
    config = TestOpsConfig(endpoint="https://testops.example", project_id=1, plan_name="p")
    token = "tok-SENTINEL-9z"
    with target.example("select"):
        try:
            client = TestOpsClient.configured(config, token, endpoint=raw or None)
        except Refusal as refusal:
            assert token not in str(refusal) + json.dumps(refusal.to_json())  # the token is never echoed
            raise
        assert client.url("/launch/1").startswith(("http://", "https://")) and token not in client.url("/x")


@fuzz_settings()
@given(raw=st.one_of(mutated_bytes(corpus.JOBRUN_ENV, max_mutations=6), st.binary(max_size=300),
                     st.lists(st.text(max_size=40), max_size=8).map(lambda lines: "\n".join(lines).encode(
                         "utf-8", "surrogatepass"))))
def test_fuzz_job_run_env(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("job-run-env")
    with target.example("select"):
        env = parse_job_run_env(raw)
        for value in (env.job_run_id, env.launch_id, env.project_id):
            assert value is None or value > 0
        assert "ALLURE_TOKEN" not in env.variables


# --- evidence ---------------------------------------------------------------------------------------------


@fuzz_settings()
@given(data=st.data())
def test_fuzz_cell_result(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("cell-result")
    raw = data.draw(document_bytes(corpus.cell_document()))
    contract = corpus.contract()
    binding = Binding(corpus.SELECTION_SHA256, corpus.env()["GITHUB_SHA"], contract.profile, contract.cases)
    with target.example("export"):
        # As export reads it: attributed by its content (merged layout), then by its path (a worker artifact).
        for item in (CellFile("cells/fuzzed.json", data=raw),
                     CellFile("w/get-task-context.json", case="get-task-context", worker="native-1", data=raw)):
            owners = ({(case.key, n): "native-1" for case in contract.cases
                       for n in range(1, case.trials.count + 1)} if item.worker else None)
            bound = admit([item], dataclasses.replace(binding, owners=owners))
            for case in contract.cases:
                for n in range(1, case.trials.count + 1):
                    verdict(bound.get((case.key, n)), case, n if case.trials.repeated else None)


HOSTILE_XML = (
    b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><testsuite>&b;</testsuite>',
    b'<!DOCTYPE x SYSTEM "file:///etc/passwd"><testsuite/>',
    b"<testsuite>" * 200 + b"</testsuite>" * 200,
    b'<?xml version="1.0" encoding="utf-16"?><testsuite/>',
    b'<?xml version="1.0" encoding="x-unknown"?><testsuite/>',
    b'<testsuite timestamp="9999-12-31T23:59:59" time="1e300"><testcase name="t" time="-5"/></testsuite>',
    b'<testsuite timestamp="0001-01-01T00:00:00"><testcase name="tool-called" time="nan"/></testsuite>',
    b'<testsuites><testsuite><testcase name="x"><failure message="\xff"/></testcase></testsuite></testsuites>',
)


def adapt(case_key: str, outcomes: list, inputs: list[tuple[str, str]]) -> None:
    case = corpus.example_contract().case(case_key)
    document = build_cell(case, outcomes, source_sha=corpus.env()["GITHUB_SHA"],
                          profile=corpus.example_contract().profile, inputs=inputs,
                          selection_sha256=corpus.SELECTION_SHA256, fallback_time=1_796_119_500.0, origin="fuzz")
    adapted_cell(document, case_key, inputs, "fuzz")


@fuzz_settings()
@given(raw=st.one_of(mutated_bytes(corpus.junit_report(), max_mutations=6), st.sampled_from(HOSTILE_XML),
                     st.binary(max_size=200)))
def test_fuzz_junit_xml(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("junit-xml")
    with target.example("export"):
        adapt("company-credential-approval", parse_junit(raw, "junit.xml"), [("junit.xml", sha256_bytes(raw))])


@fuzz_settings()
@given(data=st.data())
def test_fuzz_allure_results(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("allure-results")
    files = [(name, data.draw(document_bytes(json.loads(raw)))) for name, raw in corpus.allure_results()]
    with target.example("export"):
        adapt("hire-agent-approval", parse_results(files), [(name, sha256_bytes(raw)) for name, raw in files])


# Hostile entry names and attributes an artifact zip can carry.
ZIP_NAMES = ("results/exec-1/result.json", "results/../../etc/x", "/etc/passwd", "results/a\\..\\b", "results/",
             "results//x", "C:/x", "results/\x00x", "results/" + "n" * 300, "results/é.json", "./results/x",
             "results/exec-1/result.json")


@st.composite
def hostile_zip(draw: st.DrawFn) -> bytes:
    entries = draw(st.lists(st.tuples(st.sampled_from(ZIP_NAMES), st.binary(max_size=64),
                                      st.sampled_from(("file", "symlink", "dir", "fifo"))), min_size=1, max_size=5))
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        warnings.simplefilter("ignore")  # "Duplicate name": duplicates are the point
        for name, content, kind in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = {"file": 0o100644, "symlink": 0o120777, "dir": 0o040755,
                                  "fifo": 0o010644}[kind] << 16
            try:
                archive.writestr(info, content)
            except ValueError:
                continue  # zipfile itself refuses some names (NUL): nothing to write
    return buffer.getvalue()


def adapt_run(run: FrameworkRun, source: str) -> None:
    contract = corpus.example_contract()
    for key in sorted(run.cases() & {c.key for c in contract.cases}):
        document = framework_cell(contract.case(key), [(source, run)], source_sha=corpus.env()["GITHUB_SHA"],
                                  selection_sha256="5e" * 32,
                                  profile=contract.profile, inputs=[(source, "0" * 64)],
                                  fallback_time=1_796_119_500.0, origin="fuzz")
        adapted_cell(document, key, [], "fuzz")


@fuzz_settings(0.5)
@given(raw=st.one_of(mutated_bytes(corpus.inspect_log(), max_mutations=4),
                     mutated_bytes(corpus.inspect_log("aborted.eval"), max_mutations=4),
                     mutated_json(json.loads(corpus.inspect_log("campaign.json"))).map(json_bytes),
                     st.binary(max_size=300)))
def test_fuzz_inspect_log(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("inspect-log")
    with target.example("cell"):
        adapt_run(inspect_log.to_run(inspect_log.read_log(raw, "log.eval")), "log.eval")


@fuzz_settings(0.5)
@given(raw=st.one_of(mutated_json(json.loads(corpus.promptfoo_results())).map(json_bytes),
                     mutated_bytes(corpus.promptfoo_results(), max_mutations=4), st.binary(max_size=300)))
def test_fuzz_promptfoo_results(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("promptfoo-results")
    with target.example("cell"):
        adapt_run(promptfoo.read_results(raw, "results.json"), "results.json")


def _first_zstd_entry() -> bytes:
    """The raw bytes of the first Zstandard entry of a real .eval archive (its local header skipped)."""
    data = corpus.inspect_log()
    names, extra = int.from_bytes(data[26:28], "little"), int.from_bytes(data[28:30], "little")
    size = int.from_bytes(data[18:22], "little")
    return data[30 + names + extra:30 + names + extra + size]


@fuzz_settings()
@given(raw=st.one_of(mutated_bytes(_first_zstd_entry(), max_mutations=6), st.binary(max_size=300)))
def test_fuzz_zstd_stream(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("zstd-stream")
    with target.example("cell"):
        try:
            out = decompress(raw, 64 * 1024)
        except ZstdError:
            return
        assert len(out) <= 64 * 1024


@fuzz_settings()
@given(raw=st.one_of(mutated_bytes(corpus.artifact_zip(), max_mutations=5), hostile_zip(), st.binary(max_size=300)))
def test_fuzz_artifact_zip(fuzz: Targets, raw: bytes) -> None:
    target = fuzz.target("artifact-zip")
    with target.example("import"):
        archive = extract_zip(raw, prefix="results/", limits=ArchiveLimits(max_entries=50, ratio_floor=1024))
        for item in archive.under("results/"):
            assert sha256_bytes(item.data) == item.sha256


@fuzz_settings()
@given(data=st.data())
def test_fuzz_selection(fuzz: Targets, tmp_path: Path, data: st.DataObject) -> None:
    # The worker re-hashes the bytes; the fuzzed bytes travel with their own digest, as a compromised
    # select job (or a replayed artifact with its output) would send them.
    target = fuzz.target("selection")
    exported = corpus.exported()
    raw = data.draw(document_bytes(json.loads(exported.selection)))
    path = tmp_path / "selection.json"
    path.write_bytes(raw)
    with target.example("verify-selection"):
        selection = load_selection(path, sha256_bytes(raw))
        validate_against(selection, corpus.contract(), env_context(corpus.env()))
        assert selection.count == len(selection.keys) and selection.backend in ("files", "testops")


@fuzz_settings()
@given(data=st.data())
def test_fuzz_export_receipt(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("export-receipt")
    contract = corpus.contract()
    raw = data.draw(document_bytes(json.loads(corpus.exported().receipt)))
    with target.example("upload"):
        receipt = receipt_from_bytes(raw, "allure-results-receipt.json")
        bind_receipt(receipt, campaign=contract.campaign, contract_sha256=contract.digest,
                     live=env_context(corpus.env()).binding_fields(), backend="files")
        assert receipt.counts["total"] == len(receipt.results)
        assert len(receipt.expected_files()) == len(receipt.document["files"]) + 2 * len(receipt.results)


@fuzz_settings()
@given(data=st.data())
def test_fuzz_ledger(fuzz: Targets, data: st.DataObject) -> None:
    target = fuzz.target("ledger")
    raw = data.draw(document_bytes(json.loads(corpus.ledger_bytes())))
    with target.example("import"):
        ledger = Ledger.parse(raw, "ledger.json")
        for n in (2, 4):  # one duplicate of a recorded import, one new
            ledger.add_import(*corpus.ledger_record(n))
        Ledger.parse(ledger.to_bytes())


@fuzz_settings()
@given(value=st.one_of(mutated_json(corpus.page_document([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])),
                       json_values))
def test_fuzz_testops_page(fuzz: Targets, value: object) -> None:
    target = fuzz.target("testops-page")
    with target.example("select"):
        page = parse_page(value, "page 0 of /testcase", 0)
        assert all(isinstance(item, dict) for item in page.content)


CATALOGS = (
    {"version": 1, "cases": {"get-task-context": {"prompt": "p1", "fixtures": ["a"]},
                             "budget-stop": {"prompt": "p2"}, "unknown-case": {"prompt": "x"}}},
    {"cases": [{"key": "get-task-context", "prompt": "p1"}, {"key": "budget-stop", "prompt": "p2"}]},
    [{"key": "budget-stop", "roster": [1, 2]}, {"key": "get-task-context"}],
)


@fuzz_settings()
@given(data=st.data(), seed=st.sampled_from(CATALOGS))
def test_fuzz_catalog(fuzz: Targets, data: st.DataObject, seed: object) -> None:
    target = fuzz.target("catalog")
    raw = data.draw(document_bytes(seed))
    with target.example("select"):
        filtered = filter_catalog(parse_json_bytes(raw, "the catalog"), ["get-task-context", "budget-stop"])
        canonical_json(filtered)
