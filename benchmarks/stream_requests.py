#!/usr/bin/env python3
"""Requests per result: `publish: stream` beside `publish: batch`, on the files backend (issue 29).

    .venv/bin/python benchmarks/stream_requests.py [--quick] [--smoke]

Also run by ``benchmarks/run.py --only stream``. A campaign of N cases (the small contract widened; its plan
has one worker job per case up to 256 jobs a lane, then shards) runs against the GitHub REST test server
(tests/servers/github_server.py); every request the phases send is counted there, by route:

* stream — the ``stream`` phase, with the workers ending in W waves while it polls (one wave per poll): the
  job lists (every poll, every page), the artifact lists (each poll that saw a worker end) and each worker's
  artifact (its API request and the storage redirect's);
* batch — ``collect-cells`` (one artifact list, one job list, every page), plus each verified artifact
  downloaded by id, counted the same way (the template's download-artifact fetches each artifact once too).

Neither sends a request to publish on the files backend (the publication is files on the runner). The figure is
requests per result; the target: the stream within 3x of the batch and at most 0.1 requests per result at the
largest size (the TestOps issue's "near one per hundred results" is about publishing; here both ways send none).
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT / "benchmarks", ROOT / "tests", ROOT / "src"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from _common import Figure, print_figures  # noqa: E402

PREFIX = "testops-evidence"
TOKEN = "ghs_benchStreamTokenQWXZplmkjnhbgvYR"  # noqa: S105 (the test server's token)


def _campaign(work: Path, cases: int, waves: int) -> dict[str, Any]:
    from evidence_support import (
        HEAD_SHA,
        RUN_ID,
        actions_env,
        bound_to,
        cell,
        make_selection,
        small_contract,
        write_contract,
    )
    from helpers import FakeClock, run_mode
    from servers.github_server import GitHubServer, evaluate_step_name
    from testops_evidence.campaign.matrix import plan_matrices
    from testops_evidence.campaign.workers import REPORT_EXPRESSION, UPLOAD_STEP
    from testops_evidence.safeio import sha256_bytes

    contract = small_contract(cases=cases)
    jobs = plan_matrices(list(contract.cases), contract.lanes).jobs()
    with GitHubServer(token=TOKEN) as github:
        github.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
        event = work / "event.json"
        event.write_text(json.dumps(github.event_payload(RUN_ID)), encoding="utf-8")
        env = {**actions_env(), **github.runner_env(RUN_ID, event_path=str(event)), "GITHUB_TOKEN": TOKEN}
        selection, digest = make_selection(work, contract, env)
        options = {"contract": str(write_contract(contract, work / "contract.json")),
                   "selection-path": str(selection), "selection-sha256": digest, "artifact-prefix": PREFIX}

        def finish(job: str) -> None:
            files = {f"{key}.json": json.dumps(bound_to(cell(contract, key), digest)).encode()
                     for key, _trial in jobs[job]}
            record = {"schema": "testops-evidence/worker-record/v1", "job": job, "selection-sha256": digest,
                      "cases": sorted(name.removesuffix(".json") for name in files),
                      "files": {name: sha256_bytes(data) for name, data in files.items()}}
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as archive:
                for name, data in files.items():
                    archive.writestr(name, data)
                archive.writestr("testops-evidence-worker.json", json.dumps(record))
            doc = github.add_artifact(RUN_ID, f"{PREFIX}-cells-1-{job}", buffer.getvalue())
            outputs = {"artifact-id": doc["id"], "artifact-digest": str(doc["digest"]).removeprefix("sha256:")}
            github.add_job(RUN_ID, 1, f"campaign / {PREFIX} {job}", steps=[
                {"name": UPLOAD_STEP, "status": "completed", "conclusion": "success"},
                {"name": evaluate_step_name(REPORT_EXPRESSION, {"upload": outputs}), "status": "completed",
                 "conclusion": "success"}])

        names = list(jobs)
        size = -(-len(names) // waves)
        batches = [names[i:i + size] for i in range(0, len(names), size)]
        clock = FakeClock()

        def sleep(seconds: float) -> None:
            clock.sleep(seconds)
            if batches:
                for job in batches.pop(0):
                    finish(job)

        github.clear_log()
        stream = run_mode("stream", work, {**options, "stream-dir": str(work / "stream"),
                                           "state-dir": str(work / "stream-state")}, env,
                          clock=clock.time, monotonic=clock.monotonic, sleep=sleep)
        assert stream.exit_code == 0, stream.summary
        stream_routes = Counter(record.route for record in github.log)
        github.clear_log()
        collected = run_mode("collect-cells", work, {**options, "state-dir": str(work / "export-state")}, env)
        assert collected.exit_code == 0, collected.summary
        batch_routes = Counter(record.route for record in github.log)
        artifacts = len(jobs)
        # download-artifact fetches each verified artifact once: its API request and the storage redirect's,
        # counted as the stream's own downloads are.
        per_download = (stream_routes["artifact_zip"] + stream_routes.get("blob", 0)) / max(1, artifacts)
        batch_total = sum(batch_routes.values()) + round(per_download * artifacts)
        return {"cases": cases, "jobs": len(jobs), "waves": waves, "polls": _polls(work),
                "stream": sum(stream_routes.values()), "batch": batch_total,
                "stream-routes": dict(stream_routes), "batch-routes": dict(batch_routes)}


def _testops(work: Path, cases: int, waves: int, generation: str) -> dict[str, Any]:
    """TestOps requests of one campaign: the stream job's (start, session, one chunk per poll that made cases
    ready) plus the publish job's upload and verify after it, beside the batch path's upload and verify of the
    same cells on a fresh server. Counted in the TestOps test server's log (every request, the token's too)."""
    import test_stream
    from evidence_support import HEAD_SHA, RUN_ID, SENTINEL, small_contract
    from servers import conformance
    from servers.github_server import GitHubServer
    from servers.testops_server import TestOpsServer
    from test_stream_testops import TestOpsStream, publish

    contract = small_contract(cases=cases, testops=True)
    previous, conformance.DEFAULT_GENERATION = conformance.DEFAULT_GENERATION, generation
    counts: dict[str, Any] = {"cases": cases, "waves": waves, "generation": generation}
    try:
        for way in ("stream", "batch"):
            with GitHubServer(token=test_stream.TOKEN) as github, TestOpsServer(token=SENTINEL) as testops:
                github.add_run("acme/agents", RUN_ID, head_sha=HEAD_SHA, run_number=42)
                campaign = TestOpsStream(work / way, github, testops, contract)
                names = list(campaign.jobs)
                counts["jobs"] = len(names)
                testops.reset_log()
                stream_outputs = None
                if way == "stream":
                    for job in names:
                        campaign.start(job)
                    size = -(-len(names) // waves)
                    batches = [names[i:i + size] for i in range(0, len(names), size)]
                    run, _clock = campaign.stream([lambda batch=batch, c=campaign: [c.finish(job) for job in batch]
                                                   for batch in batches])
                    assert run.exit_code == 0, run.summary
                    counts["stream-job"] = len(testops.log)
                    counts["stream-routes"] = dict(Counter(e.route for e in testops.log))
                    stream_outputs = run.outputs
                    testops.reset_log()
                else:
                    for job in names:
                        campaign.finish(job)
                uploaded, verified = publish(campaign, stream_outputs)
                assert uploaded.exit_code == 0 and verified.exit_code == 0, (uploaded.summary, verified.summary)
                counts[f"{way}-publish"] = len(testops.log)
                counts[f"{way}-publish-routes"] = dict(Counter(e.route for e in testops.log))
    finally:
        conformance.DEFAULT_GENERATION = previous
    return counts


def bench_stream_testops(cfg: Any = None) -> list[Figure]:
    quick = bool(getattr(cfg, "quick", False)) or "--quick" in sys.argv
    smoke = bool(getattr(cfg, "smoke", False)) or "--smoke" in sys.argv
    sizes = ([(30, 3, "current")] if smoke else [(100, 10, "current"), (100, 10, "25.4")] if quick else
             [(100, 10, "current"), (100, 10, "25.4"), (1000, 10, "current"), (1000, 50, "current")])
    figures = []
    for cases, waves, generation in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            found = _testops(Path(tmp), cases, waves, generation)
        stream_total = found["stream-job"] + found["stream-publish"]
        batch_total = found["batch-publish"]
        figures.append(Figure(f"testops {generation} {cases} cases, {found['jobs']} jobs, {waves} waves",
                              round(stream_total / cases, 4), "no result sent twice; chunks <= polls + results/100",
                              "/upload/test-result" not in found["stream-publish-routes"]
                              and found["stream-routes"].get("/upload/test-result", 0) <= waves + 1 + -(-cases // 100),
                              f"stream job {found['stream-job']} + publish job {found['stream-publish']} vs batch "
                              f"{batch_total} ({round(batch_total / cases, 4)}/result); stream "
                              f"{found['stream-routes']}, after it {found['stream-publish-routes']}, batch "
                              f"{found['batch-publish-routes']}"))
    return figures


def _polls(work: Path) -> int:
    return int(json.loads((work / "stream" / "stream.json").read_text())["polls"])


def bench_stream(cfg: Any = None) -> list[Figure]:
    quick = bool(getattr(cfg, "quick", False)) or "--quick" in sys.argv
    smoke = bool(getattr(cfg, "smoke", False)) or "--smoke" in sys.argv
    sizes = [(30, 3)] if smoke else [(100, 10), (1000, 10)] if quick else [(100, 10), (1000, 10), (1000, 50),
                                                                           (10000, 10)]
    figures = []
    for cases, waves in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            found = _campaign(Path(tmp), cases, waves)
        stream_rate, batch_rate = found["stream"] / cases, found["batch"] / cases
        ok = found["stream"] <= 3 * found["batch"] and (cases < 10000 or stream_rate <= 0.1)
        figures.append(Figure(f"stream {cases} cases, {found['jobs']} jobs, {waves} waves", round(stream_rate, 4),
                              "<= 3x batch", ok,
                              f"{found['stream']} requests ({found['polls']} polls) vs batch {found['batch']} "
                              f"({round(batch_rate, 4)}/result); stream {found['stream-routes']}, batch "
                              f"{found['batch-routes']}"))
    return figures


if __name__ == "__main__":
    print_figures(bench_stream() if "--testops" not in sys.argv else bench_stream_testops())
