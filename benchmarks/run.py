#!/usr/bin/env python3
"""The issue-8 benchmarks: every figure is a ratio measured in one run, both sides interleaved.

    .venv/bin/python benchmarks/run.py [--quick] [--only NAME[,NAME]] [--smoke]

Prints one line per figure: ``ok``/``MISS``, the figure, its target and the measured sides. Names:
select, export, verify, upload, trials, digest, import, startup, footprint, yaml, zstd, hostile, parsers. ``--quick``
repeats less (about two minutes in all); ``--smoke`` runs tiny sizes with no targets (the test suite uses it to keep this
script from rotting; its timings mean nothing). Figures and the command are recorded in BENCHMARKS.md.

The workloads are the real phases run in-process (``run_phase``, as the runner does) against the
repository's own test servers on 127.0.0.1: the GitHub REST server for select and import, the TestOps
server for upload and verify, whose request logs are what the request figures count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "benchmarks", ROOT / "tests", ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from _common import (  # noqa: E402
    Figure,
    interleaved,
    interleaved_runs,
    median_ratio,
    min_max_ratio,
    print_figures,
)


class Config:
    """Sizes and repeat counts; ``smoke`` shrinks every workload to a few items and drops the targets."""

    def __init__(self, *, quick: bool, smoke: bool) -> None:
        self.quick = quick or smoke
        self.smoke = smoke
        self.repeat = 1 if smoke else (2 if quick else 3)
        self.select_sizes = (10, 100) if smoke else (1_000, 10_000)
        self.export_size = 20 if smoke else 10_000
        self.verify_sizes = (10, 100) if smoke else (1_000, 10_000)
        self.upload_size = 100 if smoke else 10_000
        self.digest_bytes = (1 if smoke else 512) * 1024 * 1024
        self.import_sizes = (10, 20) if smoke else (1_000, 2_000)
        self.startup_repeat = 3 if smoke else (30 if quick else 60)
        self.trial_cases, self.trial_count = (4, 3) if smoke else (1_000, 5)


@contextmanager
def workspace(prefix: str, root: str | None = None) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"testops-evidence-bench-{prefix}-", dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def quiet_runtime(env: dict[str, str]) -> Any:
    import io

    from testops_evidence.actions import Runtime

    return Runtime(env, stdout=io.StringIO())


def run_in_process(mode: str, options: dict[str, Any], env: dict[str, str], **context: Any) -> int:
    """One phase as the runner runs it, with real GITHUB_OUTPUT / step-summary files in a fresh dir."""
    from testops_evidence.runner import PhaseContext, run_phase

    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=Path(options["state-dir"]).parent))
    full_env = {**env, "GITHUB_OUTPUT": str(run_dir / "output"), "GITHUB_STEP_SUMMARY": str(run_dir / "summary.md")}

    def factory(**kwargs: Any) -> PhaseContext:
        return PhaseContext(**kwargs, **context)

    return run_phase(mode, options, full_env, quiet_runtime(full_env), context_factory=factory)


def target(ok: bool, cfg: Config) -> bool:
    return True if cfg.smoke else ok


# --- 1. select + matrices ------------------------------------------------------------------------


def bench_select(cfg: Config) -> list[Figure]:
    from test_selection_support import big_document, github_with_run, select_job_env

    small, large = cfg.select_sizes
    with workspace("select") as work, github_with_run() as github:
        env = select_job_env(github, work)
        contracts = {}
        for n in (small, large):
            path = work / f"contract-{n}.json"
            path.write_text(json.dumps(big_document(n)), encoding="utf-8")
            contracts[n] = path
        counter = iter(range(1_000_000))

        def select(n: int) -> Callable[[], None]:
            def call() -> None:
                run = next(counter)
                base = work / f"run-{run}"
                base.mkdir()
                options = {"contract": str(contracts[n]), "selection-path": str(base / "selection.json"),
                           "state-dir": str(base / "state")}
                code = run_in_process("select", options, env)
                if code != 0:
                    raise SystemExit(f"select of {n} cases failed with exit {code}")
            return call

        t_small, t_large = interleaved(select(small), select(large), repeat=cfg.repeat if cfg.smoke else 5)
    ratio = t_large / t_small
    limit = (large / small) * 1.1
    return [Figure(f"select+matrices t({large})/t({small})", ratio, f"<= {limit:g}", target(ratio <= limit, cfg),
                   f"t({small})={t_small:.3f}s t({large})={t_large:.3f}s")]


# --- 2. export versus json.dumps, whole processes ------------------------------------------------------------

# The baseline: the same documents, loaded from one JSON file, each written to its own file with json.dumps (the
# C encoder, as export's canonical JSON uses) and nothing else: no reading of inputs, no checks, no digests.
BASELINE_WRITER = """
import json, os, sys
documents = json.loads(open(sys.argv[1], "rb").read())
out = sys.argv[2]
os.mkdir(out)
for name, document in documents:
    data = document if isinstance(document, str) else json.dumps(document, sort_keys=True, separators=(",", ":"),
                                                                   ensure_ascii=False) + "\\n"
    with open(os.path.join(out, name), "w", encoding="utf-8") as handle:
        handle.write(data)
"""


def bench_export(cfg: Config) -> list[Figure]:
    """Export on the disk: wall time (the target) and CPU time (reported)."""
    return export_figures(cfg, None, "disk")


# tmpfs: no disk to wait for on either side, so the wall time is the work itself.
TMPFS = "/dev/shm"


def bench_export_tmpfs(cfg: Config) -> list[Figure]:
    """Export on tmpfs: wall and CPU time, both against the target (the figure a fast disk approaches)."""
    if not os.path.isdir(TMPFS) or not os.access(TMPFS, os.W_OK):
        return [Figure("export on tmpfs", float("nan"), "<= 1.5", target(False, cfg), f"{TMPFS} is not writable")]
    return export_figures(cfg, TMPFS, "tmpfs")


def export_figures(cfg: Config, root: str | None, where: str, contract: Any = None,
                   cell_documents: list[dict[str, Any]] | None = None, name: str | None = None) -> list[Figure]:
    """Whole processes, interleaved: the ``export`` phase as the Docker image and the composite variant start
    it (``python -I entrypoint.py`` with ``INPUT_*`` variables: interpreter start, imports, reading and binding
    the selection and 10,000 cell results, projecting, hashing, writing 20,002 files and the receipt) versus a
    ``python -I`` process that writes the same 20,002 files' documents with ``json.dumps``. Both write to the
    same file system (``root``: the temp dir's, or tmpfs); before every timed run the previous output is removed
    and ``os.sync()`` flushes it, untimed, so neither side pays for the other's writeback. CPU time is each child
    process's user + system time as the kernel accounts it (``getrusage(RUSAGE_CHILDREN)``)."""
    import resource

    from evidence_support import actions_env, cell, make_selection, small_contract, write_cells, write_contract

    n = cfg.export_size
    if contract is None:
        contract = small_contract(cases=n)
        cell_documents = [cell(contract, c.key) for c in contract.cases]
    name = name or f"{n} cells"
    env = actions_env()
    python = sys.executable
    cpu: dict[str, list[float]] = {"export": [], "baseline": []}

    def child_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    with workspace("export", root) as work:
        selection, digest = make_selection(work, contract, env)
        contract_path = write_contract(contract, work / "contract.json")
        cells = write_cells(work / "cells", cell_documents, digest)
        base_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        export_env = {**base_env, **env, "INPUT_MODE": "export", "INPUT_CONTRACT": str(contract_path),
                      "INPUT_SELECTION-PATH": str(selection), "INPUT_SELECTION-SHA256": digest,
                      "INPUT_CELL-RESULTS": str(cells), "INPUT_BACKEND": "files"}
        counter = iter(range(1_000_000))
        outputs: list[Path] = []

        def fresh(kind: str) -> Path:
            base = work / f"{kind}-{next(counter)}"
            outputs.append(base)
            return base

        def export_into(base: Path) -> None:
            base.mkdir()
            run_env = {**export_env, "INPUT_RESULTS-DIR": str(base / "allure-results"),
                       "INPUT_STATE-DIR": str(base / "state"), "GITHUB_OUTPUT": str(base / "output"),
                       "GITHUB_STEP_SUMMARY": str(base / "summary.md")}
            done = subprocess.run([python, "-I", str(ROOT / "entrypoint.py")], env=run_env, capture_output=True,
                                  check=False)
            if done.returncode not in (0, 1):  # 1: not every case passed (the trials workload fails some)
                raise SystemExit(f"export failed with exit {done.returncode}:\n{done.stdout.decode()[-2000:]}")

        # One untimed export gives the documents the baseline writes.
        first = work / "first"
        export_into(first)
        produced = sorted((first / "allure-results").iterdir())
        bundle = work / "documents.json"
        bundle.write_text(json.dumps([(f.name, json.loads(f.read_bytes()) if f.suffix == ".json" else f.read_text())
                                      for f in produced]))
        export_bytes = sum(f.stat().st_size for f in produced)
        shutil.rmtree(first)
        sizes: dict[str, int] = {}

        def export() -> None:
            before = child_cpu()
            export_into(fresh("export"))
            cpu["export"].append(child_cpu() - before)

        def baseline() -> None:
            out = fresh("baseline")
            before = child_cpu()
            subprocess.run([python, "-I", "-c", BASELINE_WRITER, str(bundle), str(out)], check=True)
            cpu["baseline"].append(child_cpu() - before)
            sizes.setdefault("baseline", sum(f.stat().st_size for f in out.iterdir()))

        def clean() -> None:
            while outputs:
                shutil.rmtree(outputs.pop(), ignore_errors=True)
            os.sync()

        t_export, t_base = interleaved_runs(export, baseline, repeat=cfg.repeat, setup=clean)
        clean()
    files = f"files={len(produced)} bytes={export_bytes}/{sizes['baseline']}"
    wall = median_ratio(t_export, t_base)
    cpu_ratio = median_ratio(cpu["export"], cpu["baseline"])
    return [
        Figure(f"export of {name} / json.dumps of the same files, wall, {where}", wall, "<= 1.5",
               target(wall <= 1.5, cfg),
               f"export={statistics.median(t_export):.3f}s json.dumps={statistics.median(t_base):.3f}s "
               f"(medians of {len(t_export)}; pairwise ratios {min_max_ratio(t_export, t_base)}) {files}, "
               "disk synced before each run"),
        Figure(f"export of {name} / json.dumps of the same files, CPU, {where}", cpu_ratio,
               "<= 1.5" if where == "tmpfs" else "report", target(cpu_ratio <= 1.5 or where != "tmpfs", cfg),
               f"export={statistics.median(cpu['export']):.3f}s json.dumps={statistics.median(cpu['baseline']):.3f}s "
               f"user+sys (medians of {len(t_export)}; pairwise ratios "
               f"{min_max_ratio(cpu['export'], cpu['baseline'])})"),
    ]


# Where an export's CPU time goes: each stage's process time, in process (report only; the figure that counts is
# the whole-process one above). A stage is a function of the export path, timed where the phase calls it.
EXPORT_STAGES = (
    ("testops_evidence.contract", "load_contract", "read and validate the contract (JSON)"),
    ("testops_evidence.phases.export", "load_selection", "read, re-hash and validate the selection"),
    ("testops_evidence.phases.export", "validate_against", "bind the selection to the contract and run"),
    ("testops_evidence.phases.export", "collect_cells", "read the 10,000 cell files"),
    ("testops_evidence.phases.export", "admit", "parse (strict), validate and bind every cell"),
    ("testops_evidence.campaign.usage", "account", "usage accounts"),
    ("testops_evidence.publication.allure", "result_document", "build the Allure results"),
    ("testops_evidence.publication.allure", "evidence_document", "build the evidence documents"),
    ("testops_evidence.phases.export", "canonical_json", "canonical JSON of every document (json.dumps)"),
    ("testops_evidence.phases.export", "write_new", "create and write the 20,002 files"),
    ("testops_evidence.phases.export", "receipt_from_bytes", "check the receipt as upload will"),
    ("testops_evidence.summaries.export", "render", "the step summary"),
)


def bench_export_stages(cfg: Config) -> list[Figure]:
    """The export of :func:`export_figures`, in this process, with each stage's CPU time (``time.process_time``)."""
    import importlib

    from evidence_support import actions_env, cell, make_selection, small_contract, write_cells, write_contract

    n = cfg.export_size
    contract = small_contract(cases=n)
    env = actions_env()
    spent: dict[str, float] = {}
    patched: list[tuple[Any, str, Any]] = []
    for module_name, name, label in EXPORT_STAGES:
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def timed(*args: Any, _f: Any = original, _label: str = label, **kwargs: Any) -> Any:
            begun = time.process_time()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.process_time() - begun
        setattr(module, name, timed)
        patched.append((module, name, original))
    try:
        with workspace("export-stages", TMPFS if os.access(TMPFS, os.W_OK) else None) as work:
            selection, digest = make_selection(work, contract, env)
            contract_path = write_contract(contract, work / "contract.json")
            cells = write_cells(work / "cells", [cell(contract, c.key) for c in contract.cases], digest)
            options = {"contract": str(contract_path), "selection-path": str(selection), "selection-sha256": digest,
                       "cell-results": str(cells), "backend": "files", "results-dir": str(work / "out" / "results"),
                       "state-dir": str(work / "out" / "state")}
            (work / "out").mkdir()
            begun = time.process_time()
            code = run_in_process("export", options, env)
            total = time.process_time() - begun
            if code not in (0, 1):
                raise SystemExit(f"export failed with exit {code}")
    finally:
        for module, name, original in patched:
            setattr(module, name, original)
    # Nested stages (admit validates the cells it parses) are reported as measured; the shares need not add up.
    figures = [Figure("export stages: whole phase, in process (s of CPU)", total, "report", True,
                      f"{n} cells, tmpfs, time.process_time")]
    for _module, _name, label in EXPORT_STAGES:
        value = spent.get(label, 0.0)
        figures.append(Figure(f"  {label} (s)", value, "report", True, f"{value / total:.0%} of the phase"))
    return figures


# --- 3./4. verify and upload: requests per result ---------------------------------------------------


def published_campaign(server: Any, work: Path, n: int, cells: int | None = None) -> Any:
    from evidence_support import TestOpsCampaign, cell, small_contract

    contract = small_contract(testops=True, cases=n)
    campaign = TestOpsCampaign(server, work, contract)
    chosen = contract.cases if cells is None else contract.cases[:cells]
    campaign.export([cell(contract, c.key) for c in chosen])
    return campaign


_PUBLICATION: dict[str, list[Figure]] = {}


def publication_figures(cfg: Config) -> dict[str, list[Figure]]:
    """Upload and verify against the TestOps test server, counted from its request log, for both server
    generations of the conformance table. The targets are the current generation's; the 25.4 figures are
    reported beside them (25.4 has no launch attachments, so the evidence goes result by result: one more
    request per result). The largest campaign serves both figures (one export of 10,000 cells is most of the
    time); results become visible only after 3 list polls, as TestOps indexes them after a while."""
    from evidence_support import SENTINEL
    from servers.testops_server import TestOpsServer

    if _PUBLICATION:
        return _PUBLICATION
    verify: list[Figure] = []
    upload: list[Figure] = []
    sizes = sorted({*cfg.verify_sizes, cfg.upload_size})
    for generation in ("current", "25.4"):
        targeted = generation == "current"
        label = "" if targeted else ", TestOps 25.4"
        for n in sizes:
            with workspace("publish") as work, TestOpsServer(token=SENTINEL, visible_after_polls=3,
                                                             generation=generation) as server:
                campaign = published_campaign(server, work, n)
                server.reset_log()
                done = campaign.run("upload")
                if done.exit_code != 0:
                    raise SystemExit(f"upload of {n} results ({generation}) failed: {done.outputs}")
                requests = len(server.log)
                stored = len(server.launch_results(campaign.launch["id"]))
                if n == cfg.upload_size:
                    per = requests / n
                    upload.append(Figure(f"upload requests per result ({n} results{label})", per,
                                         "<= 0.02" if targeted else "reported",
                                         target(per <= 0.02, cfg) if targeted else True,
                                         f"requests={requests} stored={stored}"
                                         + ("" if targeted else " (evidence attached result by result)")))
                if n in cfg.verify_sizes:
                    server.reset_log()
                    checked = campaign.run("verify")
                    if checked.exit_code != 0:
                        raise SystemExit(f"verify of {n} results ({generation}) failed: {checked.outputs}")
                    requests = len(server.log)
                    per = requests / n
                    verify.append(Figure(f"verify requests per result ({n} results, depth page{label})", per,
                                         "<= 0.01" if targeted else "reported",
                                         target(per <= 0.01, cfg) if targeted else True,
                                         f"requests={requests}, visible after 3 polls, verified="
                                         f"{checked.outputs['verified-count']}"))
    _PUBLICATION.update(verify=verify, upload=upload)
    return _PUBLICATION


def bench_verify(cfg: Config) -> list[Figure]:
    return publication_figures(cfg)["verify"]


# --- repeated trials: export and verify at 1,000 cases x 5 trials ---------------------------------------


def trials_contract(cases: int, count: int, *, testops: bool = False) -> Any:
    from evidence_support import small_contract
    from testops_evidence.contract import contract_from_document

    document = json.loads(json.dumps(small_contract(cases=cases, testops=testops).document))
    document["trials"] = {"count": count, "verdict": {"at-least": count - 1}}
    return contract_from_document(document)


def trial_cells(contract: Any) -> list[dict[str, Any]]:
    """One cell per (case, trial), every fifth trial failing, each reporting its cost."""
    from evidence_support import cell

    cells = []
    for index, case in enumerate(contract.cases):
        for n in range(1, case.trials.count + 1):
            failing = (index + n) % 5 == 0
            document = cell(contract, case.key, attempt=f"a-{case.key}-t{n}", disposition=(
                "behavior_failure" if failing else "passed"), failed=list(case.checks)[:1] if failing else ())
            document["trial"] = n
            document["usage"] = {"input-tokens": 1000 + n, "cost-nanodollars": 61_230_000}
            cells.append(document)
    return cells


def bench_trials(cfg: Config) -> list[Figure]:
    """Issue 16: a campaign of 1,000 cases measured 5 times each — 5,000 cells, 6,000 results (each trial
    and each case's verdict). Export against ``json.dumps`` of the same files as whole processes, as figure 2;
    upload and verify against the TestOps test server, requests per published result, as figures 3 and 4."""
    from evidence_support import SENTINEL, TestOpsCampaign
    from servers.testops_server import TestOpsServer

    n, k = cfg.trial_cases, cfg.trial_count
    contract = trials_contract(n, k)
    figures = export_figures(cfg, None, "disk", contract, trial_cells(contract), f"{n} cases x {k} trials")
    tested = trials_contract(n, k, testops=True)
    with workspace("trials-publish") as work, TestOpsServer(token=SENTINEL, visible_after_polls=3) as server:
        campaign = TestOpsCampaign(server, work, tested)
        exported = campaign.export(trial_cells(tested))
        if exported.exit_code not in (0, 1):
            raise SystemExit(f"export of {n}x{k} trials failed: {exported.outputs}")
        results = n * (k + 1)
        server.reset_log()
        done = campaign.run("upload")
        if done.exit_code != 0:
            raise SystemExit(f"upload of {n}x{k} trials failed: {done.outputs}")
        per = len(server.log) / results
        figures.append(Figure(f"upload requests per result ({n} x {k} trials: {results} results)", per, "<= 0.02",
                              target(per <= 0.02, cfg), f"requests={len(server.log)}"))
        server.reset_log()
        checked = campaign.run("verify")
        if checked.exit_code not in (0, 1) or checked.outputs.get("verified-count") != str(n):
            raise SystemExit(f"verify of {n}x{k} trials failed: {checked.outputs}")
        per = len(server.log) / results
        figures.append(Figure(f"verify requests per result ({n} x {k} trials: {results} results, depth page)", per,
                              "<= 0.01", target(per <= 0.01, cfg),
                              f"requests={len(server.log)}, visible after 3 polls, verified={n} cases"))
    return figures


def bench_upload(cfg: Config) -> list[Figure]:
    return publication_figures(cfg)["upload"]


# --- 5. digest versus openssl --------------------------------------------------------------------


def bench_digest(cfg: Config) -> list[Figure]:
    openssl = shutil.which("openssl")
    if openssl is None:
        return [Figure("sha256_file / openssl dgst -sha256", float("nan"), "<= 1.25", cfg.smoke,
                       "openssl is not installed")]
    with workspace("digest") as work:
        path = work / "blob.bin"
        block = os.urandom(1024 * 1024)
        with open(path, "wb") as handle:
            for _ in range(cfg.digest_bytes // len(block)):
                handle.write(block)
        ours: list[str] = []
        theirs: list[str] = []

        # Whole processes on both sides: ours pays its interpreter start and imports as openssl pays its own.
        script = ("import sys; sys.path.insert(0, sys.argv[1]); from testops_evidence.safeio import sha256_file; "
                  "print(sha256_file(sys.argv[2]))")

        def python_side() -> None:
            done = subprocess.run([sys.executable, "-I", "-c", script, str(ROOT / "src"), str(path)], check=True,
                                  capture_output=True, text=True)
            ours.append(done.stdout.strip())

        def openssl_side() -> None:
            done = subprocess.run([openssl, "dgst", "-sha256", "-r", str(path)], check=True, capture_output=True,
                                  text=True)
            theirs.append(done.stdout.split()[0])

        python_side(), openssl_side()  # both read the file once into the page cache first
        t_ours, t_theirs = interleaved(python_side, openssl_side, repeat=max(cfg.repeat, 3))
    if set(ours) != set(theirs):
        raise SystemExit(f"digests differ: {set(ours)} versus {set(theirs)}")
    ratio = t_ours / t_theirs
    mib = cfg.digest_bytes / (1024 * 1024)
    return [Figure(f"sha256_file / openssl dgst ({mib:g} MiB), whole processes", ratio, "<= 1.25", target(ratio <= 1.25, cfg),
                   f"ours={t_ours:.3f}s ({mib / t_ours:.0f} MiB/s) openssl={t_theirs:.3f}s "
                   f"({mib / t_theirs:.0f} MiB/s)")]


# --- 6. import scaling -------------------------------------------------------------------------------


def bench_import(cfg: Config) -> list[Figure]:
    from import_builders import RUN_ID, Cell, artifact_zip, contract_document, dumps, intent_document
    from servers.github_server import GitHubServer

    import_builders_env = {"GITHUB_ACTIONS": "true"}
    token = "ghs_benchmarkImportToken0123456789abcdef"  # noqa: S105 - the local test server's credential
    small, large = cfg.import_sizes
    with workspace("import") as work, GitHubServer(token=token) as gh:
        gh.add_repo("acme/agents")
        contract = work / "contract.json"
        contract.write_bytes(dumps(contract_document(**{"max-archive-bytes": 1024 * 1024 * 1024})))
        intents = {}
        for index, n in enumerate((small, large)):
            run_id = RUN_ID + index
            gh.add_run("acme/agents", run_id, path=".github/workflows/full-stack-e2e.yml",
                       head_sha="0123456789abcdef0123456789abcdef01234567", head_branch="main")
            cases = ("get-task-context", "company-credential-approval")
            cells = [Cell(f"exec-{i}", case=cases[i % 2], ordinal=i // 2 + 1,
                          disposition="passed") for i in range(n)]
            gh.add_artifact(run_id, "cells-all", artifact_zip(cells, run_id=run_id))
            intent = work / f"intent-{n}.json"
            intent.write_bytes(dumps(intent_document(cells)))
            intents[n] = (run_id, intent)
        # The importing run, as the contract's policy admits it: import re-admits it (one GET) before it reads.
        importing = gh.add_run("acme/agents", RUN_ID + 10, path=".github/workflows/agent-evals.yml",
                               head_sha="0123456789abcdef0123456789abcdef01234567", head_branch="main")
        event = work / "event.json"
        event.write_text(json.dumps(gh.event_payload(importing["id"])))
        import_builders_env = {**import_builders_env, **gh.runner_env(importing["id"], event_path=str(event))}
        counter = iter(range(1_000_000))

        def importer(n: int) -> Callable[[], None]:
            run_id, intent = intents[n]

            def call() -> None:
                base = work / f"import-{next(counter)}"
                base.mkdir()
                options = {"contract": str(contract), "source-run-id": str(run_id), "artifact-name": "cells-*",
                           "intent": str(intent), "ledger": str(base / "campaign-ledger.json"),
                           "state-dir": str(base / "state")}
                env = {**import_builders_env, "GITHUB_API_URL": gh.api_url(), "INPUT_GITHUB-TOKEN": token}
                code = run_in_process("import", options, env, new_uuid=lambda: "0123abcd-0000-4000-8000-000000000000")
                if code != 0:
                    summary = (next(base.parent.glob("run-*/summary.md"), None))
                    raise SystemExit(f"import of {n} cells failed with exit {code}: "
                                     f"{summary.read_text()[:2000] if summary else ''}")
            return call

        # An import of 1,000 cells takes about half a second: five rounds cost little and steady the ratio.
        t_small, t_large = interleaved(importer(small), importer(large), repeat=cfg.repeat if cfg.smoke else 5)
    ratio = t_large / t_small
    return [Figure(f"import t({large})/t({small}) cells", ratio, "<= 2.3", target(ratio <= 2.3, cfg),
                   f"t({small})={t_small:.3f}s t({large})={t_large:.3f}s")]


# --- 7. start-up ---------------------------------------------------------------------------------------


def startup_fixture(work: Path, cases: int | None = None) -> tuple[dict[str, str], list[str]]:
    """A worker job of the example campaign (or, with ``cases``, of a generated YAML contract of that many
    cases): its YAML contract, a selection select wrote for it, the runner's variables, and the action's own
    launcher (``python -I entrypoint.py``, as the Docker image and the composite variant start it)."""
    from evidence_support import actions_env
    from testops_evidence.campaign.selection import build_selection, selection_bytes, write_selection
    from testops_evidence.context import env_context
    from testops_evidence.contract import load_contract
    from testops_evidence.safeio import sha256_bytes

    env = actions_env()
    work.mkdir(parents=True, exist_ok=True)
    contract_path = work / "contract.yml"
    if cases is None:
        shutil.copyfile(ROOT / "examples" / "contract.yml", contract_path)
    else:
        from yaml_load import yaml_text

        from test_selection_support import big_document

        contract_path.write_text(yaml_text(big_document(cases, testops=False)), encoding="utf-8")
    contract = load_contract(contract_path)
    document = build_selection(contract, env_context(env), list(contract.cases), backend="files", source="contract")
    data = selection_bytes(document)
    write_selection(work / "selection.json", data)
    worker_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    worker_env.update(env)
    worker_env.update({
        "INPUT_MODE": "verify-selection",
        "INPUT_CONTRACT": str(contract_path),
        "INPUT_SELECTION-PATH": str(work / "selection.json"),
        "INPUT_SELECTION-SHA256": sha256_bytes(data),
        "INPUT_STATE-DIR": str(work / "state"),
        "INPUT_BACKEND": "files",
        "GITHUB_OUTPUT": str(work / "output"),
        "GITHUB_STEP_SUMMARY": str(work / "summary.md"),
    })
    return worker_env, [sys.executable, "-I", str(ROOT / "entrypoint.py")]


def bench_startup(cfg: Config) -> list[Figure]:
    python = sys.executable
    script = Path(python).parent / "testops-evidence"
    repeat = cfg.startup_repeat
    figures = []
    with workspace("startup") as work:
        worker_env, launcher = startup_fixture(work)
        large = 100 if cfg.smoke else 10_000
        large_env, _ = startup_fixture(work / "large", large)
        for env in (worker_env, large_env):
            check = subprocess.run(launcher, env=env, capture_output=True, text=True, check=False)
            if check.returncode != 0:
                raise SystemExit(f"verify-selection failed in the start-up fixture:\n{check.stdout}\n{check.stderr}")
        bare = [python, "-I", "-c", "pass"]
        plain_env = {k: v for k, v in worker_env.items() if not k.startswith("INPUT_")}

        def spawn(argv: list[str], env: dict[str, str]) -> Callable[[], None]:
            def call() -> None:
                subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            return call

        def command_line(env: dict[str, str]) -> list[str]:
            return [str(script), "verify-selection", *(f"--{name}={env[f'INPUT_{name.upper()}']}" for name in (
                "contract", "selection-path", "selection-sha256", "state-dir"))]

        limits: dict[str, float] = {}
        sides = {
            "verify-selection, 12 cases (python -I entrypoint.py)": spawn(launcher, worker_env),
            f"verify-selection, {large} cases (python -I entrypoint.py)": spawn(launcher, large_env),
            "--version (python -I entrypoint.py --version)": spawn([*launcher, "--version"], plain_env),
        }
        # The budgets of tests/test_startup_imports.py: a start is judged with the job's set-up it is part of.
        limits[f"verify-selection, {large} cases (python -I entrypoint.py)"] = 20.0
        if script.exists():
            sides["verify-selection, 12 cases (installed command testops-evidence)"] = spawn(
                command_line(worker_env), plain_env)
            sides["--version (console script testops-evidence)"] = spawn([str(script), "--version"], plain_env)
        # Every console script pip generates starts with `import re` (its template strips "-script.pyw"
        # from argv[0]): that alone is the floor of the line above, whatever the package does.
        sides["floor of a pip console script: python -I -c 'import re'"] = spawn([python, "-I", "-c", "import re"],
                                                                                  plain_env)
        for name, side in sides.items():
            all_ours, all_bare = interleaved_runs(side, spawn(bare, plain_env), repeat=repeat)
            ratio = median_ratio(all_ours, all_bare)
            reference = name.startswith("floor")
            limit = limits.get(name, 15.0)
            figures.append(Figure(f"start-up {name} / python -I -c pass", ratio,
                                  "reference" if reference else f"<= {limit:g}",
                                  target(reference or ratio <= limit, cfg),
                                  f"ours={statistics.median(all_ours) * 1000:.1f}ms "
                                  f"bare={statistics.median(all_bare) * 1000:.1f}ms (medians of {repeat} pairs; "
                                  f"best {min(all_ours) * 1000:.1f}ms / {min(all_bare) * 1000:.1f}ms)"))
    return figures


# --- 8. installed footprint ----------------------------------------------------------------------------


def bench_footprint(cfg: Config) -> list[Figure]:
    if cfg.smoke:
        return []
    with workspace("footprint") as work:
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        target_dir = work / "site"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
             "--require-hashes", "--only-binary=:all:", "--target", str(target_dir),
             "-r", str(ROOT / "requirements" / "runtime.txt")],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return [Figure("installed runtime footprint (MB)", float("nan"), "report", False,
                           f"pip install failed: {done.stderr.strip()[-300:]}")]
        packages = footprint_by_package(target_dir)
    total = sum(packages.values())
    figures = [Figure("installed runtime footprint, total (MB)", total / 1e6, "report", True,
                      f"{len(packages)} distributions, pip install --target from requirements/runtime.txt")]
    for name, size in sorted(packages.items(), key=lambda kv: -kv[1]):
        figures.append(Figure(f"  {name} (MB)", size / 1e6, "report", True, ""))
    return figures


def footprint_by_package(site: Path) -> dict[str, int]:
    """Bytes on disk per distribution, from each ``*.dist-info/RECORD`` (every file pip installed for it,
    its byte code included); whatever no RECORD lists is reported on a line of its own."""
    sizes: dict[str, int] = {}
    counted: set[Path] = set()
    for info in sorted(site.glob("*.dist-info")):
        name = info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        total = 0
        for line in (info / "RECORD").read_text(encoding="utf-8").splitlines():
            file = (site / line.rsplit(",", 2)[0]).resolve()
            if file.is_file() and file not in counted:
                counted.add(file)
                total += file.stat().st_size
        sizes[name] = total
    rest = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and f.resolve() not in counted)
    if rest:
        sizes["(in no RECORD)"] = rest
    return sizes


BENCHMARKS: dict[str, Callable[[Config], list[Figure]]] = {
    "select": bench_select,
    "export": bench_export,
    "export-tmpfs": bench_export_tmpfs,
    "export-stages": bench_export_stages,
    "verify": bench_verify,
    "upload": bench_upload,
    "trials": bench_trials,
    "digest": bench_digest,
    "import": bench_import,
    "startup": bench_startup,
    "footprint": bench_footprint,
    "yaml": lambda cfg: __import__("yaml_load").bench_yaml(cfg),
    "zstd": lambda cfg: __import__("zstd_decode").bench_zstd(cfg),
    "hostile": lambda cfg: __import__("hostile_artifact").bench_hostile(cfg),
    "parsers": lambda cfg: __import__("parsers").bench_parsers(cfg),
    "stream": lambda cfg: __import__("stream_requests").bench_stream(cfg),
    "stream-testops": lambda cfg: __import__("stream_requests").bench_stream_testops(cfg),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (about two minutes)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no targets (for the test suite)")
    parser.add_argument("--only", help="comma-separated benchmark names: " + ", ".join(BENCHMARKS))
    parser.add_argument("--repeat", type=int, help="pairs of whole-process runs per figure (default 3; more on a "
                        "machine whose speed drifts: the figure is the median of the pairwise ratios)")
    args = parser.parse_args(argv)
    names = list(BENCHMARKS) if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    cfg = Config(quick=args.quick, smoke=args.smoke)
    if args.repeat is not None:
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
        cfg.repeat = args.repeat
    if cfg.smoke:
        print("smoke run: tiny sizes; the figures mean nothing and every target is waived")
    figures: list[Figure] = []
    started = time.perf_counter()
    for name in names:
        begun = time.perf_counter()
        produced = BENCHMARKS[name](cfg)
        print_figures(produced) if produced else None
        sys.stdout.flush()
        figures += produced
        print(f"     ({name}: {time.perf_counter() - begun:.1f}s)", flush=True)
    print(f"\n{sum(not f.ok for f in figures)} of {len(figures)} figures missed their target "
          f"({time.perf_counter() - started:.0f}s in all)")
    return 1 if any(not f.ok for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
