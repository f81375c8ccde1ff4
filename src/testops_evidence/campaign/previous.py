"""The previous campaign: re-running what did not pass, and comparing with the last publication.

Both start from an earlier **export receipt** — the record export wrote and verify checked: every selected
case with its status, its trials and its usage, bound to its selection, contract, profile and run.

* ``rerun-from`` (select): a receipt given by path or found in a run's artifacts, checked against the
  SHA-256 the operator gives (``rerun-from-sha256``). Its cases that did not pass become a new campaign —
  a new selection of this run — and the selection records which receipt it re-runs (``rerun-of``).
* ``compare-with`` (select; shown by export and verify): the baseline, the receipt of the newest earlier
  run's publication (or a file). It is *bound*: its contract digest, profile and commit are recorded, and a
  baseline of another contract or profile is reported as **not comparable** rather than compared. The
  comparison says how the campaign pass rate changed (the paired difference over the cases both measured,
  campaign/stats.py), which cases are newly failing, fixed, still failing, new or no longer selected, which
  cases changed their pass rate beyond noise, and how the cost changed.

**Pass rate beyond noise.** Both pass rates are ``passed / (passed + failed)`` of a case's trials (a case
measured once: 1/1 or 0/1). A case's change is beyond noise when Fisher's exact test of its passed/failed
counts survives the contract's multiple-comparison correction across every case compared (Benjamini-Hochberg
at ``q``, or Holm). The size of the change is shown with the 95% interval of the difference of two
independent proportions (Newcombe's hybrid score interval, 1998, method 10, from the two Wilson intervals),
which alone, uncorrected for the number of cases, would flag noise as change.

**Regressions** are the drops that survive the correction, and the newly failing verdicts of the cases the
contract declares ``deterministic``; a stochastic case's flip from one trial to the next is shown, never
counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import sqrt
from typing import Any

from testops_evidence.campaign import stats
from testops_evidence.campaign.receipt import Receipt, receipt_from_bytes, trial_rows
from testops_evidence.campaign.trials import wilson
from testops_evidence.contract import Case, StatisticsPolicy
from testops_evidence.errors import Refusal
from testops_evidence.safeio import sha256_bytes

PASSED = "passed"


def source_block(source: Mapping[str, Any], receipt: Receipt) -> dict[str, Any]:
    """Where a previous receipt came from and what it is bound to (recorded in the selection)."""
    context = receipt.document["context"]
    return {
        **dict(source),
        "receipt-sha256": receipt.sha256,
        "selection-sha256": receipt.document["selection-sha256"],
        "contract-sha256": receipt.document["contract-sha256"],
        "campaign": receipt.document["campaign"],
        "profile": dict(receipt.document["profile"]),
        "backend": receipt.document["backend"],
        "run-id": context["run-id"],
        "run-attempt": context["run-attempt"],
        "run-url": context["run-url"],
        "head-sha": context["head-sha"],
        "created-at": receipt.document["created-at"],
    }


def checked_receipt(data: bytes, where: str, expected_sha256: str | None, code: str) -> Receipt:
    """A previous receipt from its bytes: its digest (when one is given) and then its own consistency."""
    if expected_sha256 is not None and sha256_bytes(data) != expected_sha256:
        raise Refusal(code, f"{where} does not hash to the given SHA-256: it is another receipt, or it was changed",
                      field=where, expected=expected_sha256, actual=sha256_bytes(data))
    return receipt_from_bytes(data, where)


# --- re-run what did not pass ------------------------------------------------------------------------


@dataclass(frozen=True)
class Rerun:
    """The cases a previous receipt did not pass, and what the selection records about it."""

    keys: tuple[str, ...]
    dropped: tuple[str, ...]  # not passed there, but no longer in the contract
    block: Mapping[str, Any]


def rerun(receipt: Receipt, source: Mapping[str, Any], *, campaign: str, profile: Mapping[str, str],
          repository: str, run_id: int, contract_has: Any) -> Rerun:
    """Check the receipt may be re-run here, and the cases to select (in the receipt's order)."""
    document = receipt.document
    for field, expected, actual in (("campaign", campaign, document["campaign"]),
                                    ("profile", dict(profile), dict(document["profile"])),
                                    ("context/repository", repository, document["context"]["repository"])):
        if expected != actual:
            raise Refusal("selection.rerun_from", f"the receipt to re-run is of another {field.split('/')[-1]}",
                          field=field, expected=expected, actual=actual)
    if document["context"]["run-id"] == run_id:
        raise Refusal("selection.rerun_from", "the receipt to re-run is of this very run: re-run its failed jobs "
                      "instead, or re-run from the receipt of an earlier run", field="context/run-id",
                      expected=f"a run before {run_id}", actual=run_id)
    not_passed = [str(row["key"]) for row in receipt.results if row["status"] != PASSED]
    if not not_passed:
        raise Refusal("selection.empty", f"every case of the receipt to re-run passed (run {document['context']['run-id']}):"
                      " there is nothing to re-run", field="rerun-from", expected="a receipt with a case that did not "
                      "pass", actual=f"{len(receipt.results)} passed")
    keys = tuple(key for key in not_passed if contract_has(key))
    dropped = tuple(key for key in not_passed if not contract_has(key))
    if not keys:
        raise Refusal("selection.rerun_from", "none of the cases that did not pass in the receipt is in the contract "
                      "any more", field="rerun-from", expected="a case of this contract", actual=list(dropped)[:10])
    block = {**source_block(source, receipt), "cases": list(keys), "dropped": list(dropped),
             "not-passed": len(not_passed), "of": len(receipt.results)}
    return Rerun(keys, dropped, block)


# --- comparison with the previous campaign -------------------------------------------------------------


def newcombe(passed_a: int, trials_a: int, passed_b: int, trials_b: int) -> tuple[float, float] | None:
    """The 95% interval of ``p_b - p_a`` (Newcombe 1998, method 10: the hybrid score interval from the two
    Wilson intervals); None when either side measured nothing."""
    a, b = wilson(passed_a, trials_a), wilson(passed_b, trials_b)
    if a is None or b is None:
        return None
    p_a, p_b = passed_a / trials_a, passed_b / trials_b
    difference = p_b - p_a
    low = difference - sqrt((p_b - b[0]) ** 2 + (a[1] - p_a) ** 2)
    high = difference + sqrt((b[1] - p_b) ** 2 + (p_a - a[0]) ** 2)
    return low, high


def binding_of(block: Mapping[str, Any], *, contract_sha256: str, profile: Mapping[str, str]) -> str | None:
    """Why a baseline is not comparable (None when it is): a receipt in another run's artifact, another
    contract or another profile."""
    # The artifact's run comes from the Actions API, the receipt's from the receipt: a worker of the earlier
    # run that reached the runtime token could upload an older run's receipt (one where everything failed)
    # under the publication's name, and regressions would vanish against it.
    artifact_run = block.get("artifact-run-id")
    if artifact_run is not None and artifact_run != block["run-id"]:
        return (f"the receipt in run {artifact_run}'s artifact {block.get('artifact')} was made by run "
                f"{block['run-id']}: a receipt replayed into another run's artifact is no baseline")
    if block["contract-sha256"] != contract_sha256:
        return (f"the baseline was made under another contract (contract sha256 {block['contract-sha256'][:12]}…, "
                f"this one {contract_sha256[:12]}…)")
    if dict(block["profile"]) != dict(profile):
        return "the baseline evaluated another profile"
    return None


def case_rate(row: Mapping[str, Any], cluster: str) -> stats.CaseRate:
    """What a receipt row measured: its trials' passed and measured counts, or its one result (a broken case
    measured nothing)."""
    rate = row.get("pass-rate")
    key = str(row["key"])
    if isinstance(rate, Mapping):
        return stats.CaseRate(key, int(rate["passed"]), int(rate["passed"]) + int(rate["failed"]), cluster)
    status = row["status"]
    return stats.CaseRate(key, int(status == PASSED), int(status in (PASSED, "failed")), cluster)


def case_rates(rows: Sequence[Mapping[str, Any]], cases: Mapping[str, Case]) -> dict[str, stats.CaseRate]:
    """Each row's :func:`case_rate`, clustered as the contract declares (a case it no longer has: alone)."""
    def cluster(key: str) -> str:
        return cases[key].cluster_name if key in cases else f"case:{key}"
    return {str(row["key"]): case_rate(row, cluster(str(row["key"]))) for row in rows}


def compare(current: Sequence[Mapping[str, Any]], baseline: Receipt,
            current_cost: Mapping[str, Any] | None, *, cases: Mapping[str, Case],
            policy: StatisticsPolicy) -> dict[str, Any]:
    """What changed from ``baseline`` to the current receipt rows (module docstring); ``cases`` are the
    contract's (clusters, determinism), ``policy`` its statistics."""
    before = {str(row["key"]): row for row in baseline.results}
    now = {str(row["key"]): row for row in current}
    rates_before, rates_now = case_rates(baseline.results, cases), case_rates(current, cases)
    categories: dict[str, list[dict[str, Any]]] = {
        "newly-failing": [], "fixed": [], "still-failing": [], "new": [], "not-selected": [],
        "pass-rate-drop": [], "pass-rate-rise": []}
    for key, row in now.items():
        old = before.get(key)
        if old is None:
            categories["new"].append({"key": key, "status": row["status"]})
            continue
        was, is_ = old["status"] == PASSED, row["status"] == PASSED
        entry = {"key": key, "baseline": old["status"], "current": row["status"]}
        if was and not is_:
            categories["newly-failing"].append({**entry, "reason": row["reason"]})
        elif not was and is_:
            categories["fixed"].append(entry)
        elif not was and not is_:
            categories["still-failing"].append(entry)
    flags = stats.case_flags(rates_before, rates_now, q=policy.q, correction=policy.correction)
    for flag in flags:
        if flag.flagged:
            categories["pass-rate-drop" if flag.change < 0 else "pass-rate-rise"].append(_flag_entry(flag))
    categories["not-selected"] = [{"key": key, "baseline": row["status"]} for key, row in before.items()
                                  if key not in now]
    deterministic = {key for key, case in cases.items() if case.deterministic}
    failing = [e for e in categories["newly-failing"] if e["key"] in deterministic]
    regressions = ([{"key": e["key"], "kind": "newly-failing", "baseline": e["baseline"], "current": e["current"]}
                    for e in failing]
                   + [{"key": e["key"], "kind": "pass-rate-drop", "baseline": e["baseline"], "current": e["current"]}
                      for e in categories["pass-rate-drop"] if e["key"] not in {n["key"] for n in failing}])
    difference = stats.paired_difference(rates_before, rates_now)
    trend = [*earlier_points(baseline.document), point(baseline.document, rates_before.values())][-(TREND_RUNS - 1):]
    block = baseline.document.get("usage") or {}
    before_cost = (block.get("campaign") or {}).get("cost-nanodollars")
    cost: dict[str, Any] = {"baseline": _figure(before_cost), "current": _figure(current_cost)}
    if before_cost and current_cost and before_cost.get("value") is not None and current_cost.get("value") is not None:
        cost["change"] = int(current_cost["value"]) - int(before_cost["value"])
        cost["comparable"] = before_cost["coverage"] == current_cost["coverage"] == "reported"
    return {"categories": categories, "regressions": regressions, "cost": cost,
            "difference": difference.to_json() if difference is not None else None,
            "trend": trend,
            "flags": {"test": "fisher-exact", "correction": policy.correction, "q": policy.q, "compared": len(flags),
                      "flagged": sum(1 for f in flags if f.flagged)},
            "trials": {key: len(trial_rows(row)) for key, row in now.items() if trial_rows(row)}}


# --- the pass rate over the last runs ------------------------------------------------------------------------

TREND_RUNS = 10


def point(document: Mapping[str, Any], rates: Iterable[stats.CaseRate]) -> dict[str, Any]:
    """One run's point of the trend: its run, commit, time and campaign pass rate (from its rows)."""
    estimate = stats.campaign_pass_rate(rates)
    context = document["context"]
    return {"run-id": context["run-id"], "head-sha": context["head-sha"], "created-at": document["created-at"],
            "pass-rate": estimate.to_json(clamp=True) if estimate is not None else None}


def earlier_points(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trend a receipt's own comparison recorded: the runs before its baseline, each compared in turn
    with the next (so all of the same contract and profile); none when it compared with nothing."""
    block = document.get("comparison")
    if not isinstance(block, Mapping) or block.get("state") != "compared":
        return []
    return [dict(p) for p in block.get("trend") or []]


def trend_of(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pass rate over the last runs, ending with this receipt's (its ``statistics``); empty when its
    comparison gives no earlier run."""
    earlier = earlier_points(document)
    statistics = document.get("statistics")
    if not earlier or not isinstance(statistics, Mapping):
        return []
    context = document["context"]
    return [*earlier, {"run-id": context["run-id"], "head-sha": context["head-sha"],
                       "created-at": document["created-at"], "pass-rate": statistics.get("pass-rate")}]


def render_trend(points: Sequence[Mapping[str, Any]]) -> str:
    """The summary section of the trend: a Mermaid chart GitHub draws (every label ours: run numbers and
    percentages) and the same figures as a table for readers without charts."""
    from testops_evidence import md

    if len(points) < 2:
        return ""
    labels, lows, means, highs, rows = [], [], [], [], []
    for p in points:
        run = int(p["run-id"])
        rate = p.get("pass-rate")
        interval = rate.get("interval-95") if isinstance(rate, Mapping) else None
        if isinstance(rate, Mapping):
            mean = float(rate["mean"]) * 100
            low, high = (float(interval[0]) * 100, float(interval[1]) * 100) if interval else (mean, mean)
            labels.append(f'"run {run}"')
            lows.append(f"{low:.1f}")
            means.append(f"{mean:.1f}")
            highs.append(f"{high:.1f}")
        shown = (f"{float(rate['mean']) * 100:.1f}%" if isinstance(rate, Mapping) else "—")
        rows.append((md.code(f"run {run}"), md.code(str(p["head-sha"])[:12]), md.text(str(p["created-at"])), shown,
                     f"{float(interval[0]) * 100:.1f}%–{float(interval[1]) * 100:.1f}%" if interval else "—"))
    parts = ["\n### Pass rate over the last runs\n\nThe campaign pass rate of this run and the runs before it of "
             "the same contract and profile (each compared with the next), with its 95% interval: the chart's lines "
             "are the upper bound, the pass rate and the lower bound.\n\n"]
    if len(labels) >= 2:
        parts.append("```mermaid\nxychart-beta\n    title \"Campaign pass rate (%), 95% interval\"\n"
                     f"    x-axis [{', '.join(labels)}]\n    y-axis \"pass rate (%)\" 0 --> 100\n"
                     f"    line [{', '.join(highs)}]\n    line [{', '.join(means)}]\n    line [{', '.join(lows)}]\n```\n\n")
    parts.append(md.table(("run", "commit", "created", "pass rate", "95% interval"), rows))
    return "".join(parts) + "\n"


def _flag_entry(flag: stats.CaseFlag) -> dict[str, Any]:
    """A case whose pass rate changed beyond noise, as the receipt lists it."""
    a, b = flag.baseline, flag.current
    interval = newcombe(a.passed, a.measured, b.passed, b.measured)
    assert interval is not None  # both measured: case_flags tests no other case
    return {"key": flag.key, "baseline": f"{a.passed}/{a.measured}", "current": f"{b.passed}/{b.measured}",
            "change": round(flag.change, 6), "interval-95": [round(interval[0], 6), round(interval[1], 6)],
            "p-value": stats.significant(flag.p_value), "adjusted-p-value": stats.significant(flag.adjusted)}


def _figure(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    if not raw:
        return {"value": None, "coverage": "unavailable"}
    return {"value": raw.get("value"), "coverage": raw.get("coverage", "unavailable")}


# --- finding a previous receipt ----------------------------------------------------------------------------

RECEIPT_SUFFIX = "-receipt.json"
# A publication artifact holds allure-results and the HTML report too: bounded, and only the receipt is read.
ARTIFACT_BYTES = 512 * 1024 * 1024


def receipts_in_zip(data: bytes) -> list[tuple[str, bytes]]:
    """The export receipts at the top of an artifact's zip (``*-receipt.json``), checked like any archive."""
    from testops_evidence.readers.archive import ArchiveLimits, extract_zip

    limits = ArchiveLimits(max_entries=200_000, max_entry_bytes=256 * 1024 * 1024,
                           max_total_bytes=4 * 1024 * 1024 * 1024)
    archive = extract_zip(data, limits=limits, select=lambda name: "/" not in name and name.endswith(RECEIPT_SUFFIX))
    return [(name, found.data) for name, found in sorted(archive.files.items())]


def receipts_in_dir(directory: Any) -> list[tuple[str, bytes]]:
    """The export receipts at the top of a directory (read without following links, size-capped)."""
    from testops_evidence.campaign.receipt import RECEIPT_LIMIT
    from testops_evidence.publication.tree import list_dir
    from testops_evidence.safeio import read_safe

    return [(entry.name, read_safe(directory, entry.name, limit=RECEIPT_LIMIT)) for entry in list_dir(directory)
            if not entry.is_dir and entry.name.endswith(RECEIPT_SUFFIX)]


def artifact_source(artifact: Any) -> dict[str, Any]:
    """Provenance of a receipt found in an artifact: from the Actions API, never from the archive."""
    return {"source": "artifact", "artifact": artifact.name, "artifact-id": artifact.id,
            "artifact-sha256": artifact.sha256, "artifact-run-id": artifact.run_id}


def receipt_in_run(api_url: str, token: str, repository: str, run_id: int, patterns: Sequence[str],
                   expected_sha256: str, policy: Any) -> tuple[bytes, dict[str, Any]]:
    """The export receipt with ``expected_sha256`` among the artifacts of run ``run_id`` named like one of
    ``patterns`` (newest first), and where it was found; ``selection.rerun_digest`` when none has it."""
    from testops_evidence import github_run

    looked: list[str] = []
    for pattern in patterns:
        for artifact in github_run.list_artifacts(api_url, token, repository, run_id, name=pattern, policy=policy):
            if artifact.expired:
                looked.append(f"{artifact.name} (expired)")
                continue
            looked.append(artifact.name)
            data = github_run.download_artifact(api_url, token, artifact, max_bytes=ARTIFACT_BYTES, policy=policy)
            for _name, receipt in receipts_in_zip(data):
                if sha256_bytes(receipt) == expected_sha256:
                    return receipt, artifact_source(artifact)
    raise Refusal("selection.rerun_digest", f"no artifact of run {run_id} holds an export receipt with the given "
                  "SHA-256", field="rerun-from-sha256", expected=expected_sha256,
                  actual=looked[:10] or f"no artifact named like {', '.join(patterns)}")


def recorded_earlier_artifact(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                              pattern: str, job: str, what: str, code: str, policy: Any) -> Any | None:
    """The artifact named like ``pattern`` of the newest earlier completed run of ``workflow`` on ``branch`` that has
    one, bound by identity: only an artifact whose id and digest that run's job ``job`` recorded as its upload of
    ``what`` (campaign/workers.py :func:`recorded_uploads`). None when no run has such an artifact; ``code`` when the
    run has some but its ``job`` recorded none of them (another job uploaded them, or the run's workflow predates
    the record)."""
    from testops_evidence import github_run
    from testops_evidence.campaign.workers import recorded_uploads, upload_report_prefix

    earlier = github_run.earlier_artifacts(api_url, token, repository, workflow, branch=branch, before=before,
                                           pattern=pattern, policy=policy)
    if earlier is None:
        return None
    run_id, attempts, artifacts = earlier
    jobs = [api_job for attempt in range(1, attempts + 1)
            for api_job in github_run.list_attempt_jobs(api_url, token, repository, run_id, attempt, policy=policy)]
    reported = recorded_uploads(jobs, job, what)
    bound = [artifact for artifact in artifacts if (artifact.id, artifact.sha256) in reported]
    if not bound:
        raise Refusal(code, f"no artifact named like {pattern} of run {run_id} is one its {job} job recorded "
                      f"uploading (a step {upload_report_prefix(what)}<id> sha256:<digest>): another job uploaded "
                      "it, or that run's workflow predates the record", field=pattern,
                      expected=sorted(f"{aid} sha256:{digest}" for aid, digest in reported)[:5] or "a recorded upload",
                      actual=[f"{a.name} ({a.id})" for a in artifacts][:5])
    return bound[0]


def download_recorded(api_url: str, token: str, artifact: Any, *, max_bytes: int, code: str, policy: Any) -> bytes:
    """The zip of an artifact :func:`recorded_earlier_artifact` bound, re-hashed against the recorded digest."""
    from testops_evidence import github_run

    data = github_run.download_artifact(api_url, token, artifact, max_bytes=max_bytes, policy=policy)
    digest = sha256_bytes(data)
    if digest != artifact.sha256:
        raise Refusal(code, f"the artifact {artifact.name} of run {artifact.run_id} downloaded as other bytes than "
                      "the digest its uploader recorded", field=artifact.name, expected=f"sha256:{artifact.sha256}",
                      actual=f"sha256:{digest}")
    return data


def newest_publication(api_url: str, token: str, repository: str, workflow: str, *, branch: str, before: int,
                       patterns: Sequence[tuple[str, str, str]], policy: Any) -> tuple[bytes, dict[str, Any]] | None:
    """The receipt of the newest earlier completed run of ``workflow`` on ``branch`` with an artifact named
    like the first of ``patterns`` that any such run has (the files backend's publication, kept only once
    verify checked it; then the export's results artifact, which every backend has), and where it came from.
    Each pattern comes with the job that uploads it and what that job records of the upload
    (:func:`recorded_earlier_artifact`): a worker of that run cannot make its own upload the baseline."""
    artifact = None
    for pattern, job, what in patterns:
        artifact = recorded_earlier_artifact(api_url, token, repository, workflow, branch=branch, before=before,
                                             pattern=pattern, job=job, what=what, code="selection.baseline",
                                             policy=policy)
        if artifact is not None:
            break
    if artifact is None:
        return None
    data = download_recorded(api_url, token, artifact, max_bytes=ARTIFACT_BYTES, code="selection.baseline",
                             policy=policy)
    found = receipts_in_zip(data)
    if len(found) != 1:
        raise Refusal("selection.baseline", f"the publication artifact {artifact.name} holds {len(found)} export "
                      "receipts", field="compare-with", expected="exactly one *-receipt.json at its top",
                      actual=[name for name, _ in found][:10])
    return found[0][1], artifact_source(artifact)


# --- the comparison in receipts and summaries ----------------------------------------------------------------


def difference_line(difference: Mapping[str, Any] | None) -> str:
    """The campaign-level verdict of a comparison: better, worse or no detectable change, with its interval."""
    if not difference:
        return "**Campaign pass rate:** no case was measured by both campaigns: nothing to pair.\n\n"
    interval = difference["interval-95"]
    shown_interval = (f"95% interval {interval[0] * 100:+.1f} to {interval[1] * 100:+.1f}" if interval else
                      "no interval: too few cases or clusters to estimate the spread")
    verdict = difference["verdict"] if difference["verdict"] in (stats.BETTER, stats.WORSE) else stats.NO_CHANGE
    icon = {stats.BETTER: "📈", stats.WORSE: "📉"}.get(verdict, "➖")
    line = (f"{icon} **Campaign pass rate: {verdict}** — {difference['mean'] * 100:+.1f} points ({shown_interval}, p = {difference['p-value']:.3g}), paired over the "
            f"{difference['cases']} cases both campaigns measured")
    unpaired = [f"{difference['only-baseline']} measured only in the baseline" if difference["only-baseline"] else "",
                f"{difference['only-current']} only now" if difference["only-current"] else ""]
    shown = ", ".join(u for u in unpaired if u)
    return line + (f"; not paired: {shown}" if shown else "") + ".\n\n"


STATES = ("compared", "not-comparable", "no-baseline")


def comparison_block(baseline: Mapping[str, Any] | None, result: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the receipt records: the baseline's binding, the state and (when compared) the changes."""
    if baseline is None:
        return {"state": "no-baseline", "baseline": None, "regressions": []}
    if result is None:
        return {"state": "not-comparable", "baseline": dict(baseline), "why-not": baseline.get("why-not"),
                "regressions": []}
    return {"state": "compared", "baseline": dict(baseline), **dict(result)}


def render(block: Mapping[str, Any], limit: int = 50) -> str:
    """The summary section of a comparison (export and verify show the same)."""
    from testops_evidence import md
    from testops_evidence.campaign.usage import Figure, show

    baseline = block.get("baseline")
    if block["state"] == "no-baseline":
        return "\n### Compared with the previous campaign\n\nNo baseline: nothing to compare with.\n"
    assert baseline is not None
    if "run-url" in baseline:
        run = md.code(f"run {baseline['run-id']}")
        where = (f"{md.link(run, str(baseline['run-url']))}, commit "
                 f"{md.code(str(baseline['head-sha'])[:12])}, profile {md.code(str(baseline['profile'].get('id')))}, "
                 f"contract {md.code(str(baseline['contract-sha256'])[:12])}")
    else:
        where = md.text(str(baseline.get("source")))
    head = f"\n### Compared with the previous campaign\n\nBaseline: {where}.\n\n"
    if block["state"] == "not-comparable":
        return head + f"**Not comparable:** {md.text(str(block.get('why-not')))} — nothing is compared.\n"
    categories = block["categories"]
    titles = (("newly-failing", "❌ newly failing (a regression when the case is deterministic)"), ("pass-rate-drop", "📉 pass rate dropped beyond noise"),
              ("fixed", "✅ fixed"), ("still-failing", "⚠️ still failing"),
              ("pass-rate-rise", "📈 pass rate rose beyond noise"), ("new", "🆕 new (not in the baseline)"),
              ("not-selected", "➖ in the baseline, not selected now"))
    rows = [(title, len(categories[name]), md.join((md.code(e["key"]) for e in categories[name][:limit]), ", ")
             or "—") for name, title in titles]
    parts = [head, difference_line(block.get("difference")),
             f"**{len(block['regressions'])} regression(s).**\n\n", md.table(("", "cases", "which"), rows)]
    rates = categories["pass-rate-drop"] + categories["pass-rate-rise"]
    flags = block.get("flags")
    if flags:
        correction = "Benjamini–Hochberg" if flags["correction"] == "benjamini-hochberg" else "Holm"
        rule = (f"Fisher's exact test per case, {correction} at q = {flags['q']:g} across the {flags['compared']} "
                "cases both campaigns measured")
        parts.append(f"\n\nPass rates that changed beyond noise ({rule}): {flags['flagged']}.")
    if rates:
        parts.append("\n\n" + md.table(("case", "baseline", "now", "change", "95% interval of the change",
                                         "p", "adjusted p"), [
            (md.code(e["key"]), e["baseline"], e["current"], f"{e['change'] * 100:+.0f} points",
             f"{e['interval-95'][0] * 100:+.0f} to {e['interval-95'][1] * 100:+.0f}",
             f"{e.get('p-value', '—')}", f"{e.get('adjusted-p-value', '—')}") for e in rates], limit=limit))
    cost = block["cost"]
    before, now = cost["baseline"], cost["current"]
    shown = [show("cost-nanodollars", Figure(f["value"], f["coverage"])) for f in (before, now)]
    line = f"\n\n**Cost:** {md.text(shown[0])} → {md.text(shown[1])}"
    if "change" in cost:
        amount = show("cost-nanodollars", Figure(abs(cost["change"]), "reported"))
        line += f" ({'+' if cost['change'] >= 0 else '−'}{md.text(amount)}"
        line += ")" if cost["comparable"] else "; an estimate or a lower bound is involved: compare with care)"
    return "".join(parts) + line + ".\n"
