"""The ``files`` backend: cases from the contract or a standing ``testplan.json``; the publication is a
verified copy of the results directory in the state directory, and verification re-reads that copy.

* select — the whole contract, or the standing plan's cases (each matching a contract case on id and
  selector); a TestOps job run given to this backend is refused (its evidence would never reach TestOps).
* publish — a copy into ``<state-dir>/published/<results-dir name>`` (plus the receipt beside it), every
  file checked against its receipt digest, built in a temp dir and renamed into place.
* verify — every receipt file present with its digest, every result once with the receipt's uuid, name
  and status, nothing else.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from testops_evidence import summary
from testops_evidence.backends import Outcome, Published, PublishOptions, SelectInputs, Services, VerifyOptions
from testops_evidence.campaign.receipt import RESULT_FILE_LIMIT, Receipt
from testops_evidence.errors import Refusal
from testops_evidence.publication import report as report_tool
from testops_evidence.publication.files import RESULTS_NAME, publish_files
from testops_evidence.publication.tree import hash_file, refuse_extra, walk_files, write_new
from testops_evidence.readers.testplan import match_rows, read_standing_plan
from testops_evidence.safeio import parse_json_bytes, read_safe
from testops_evidence.summaries import badge

PUBLISHED = "published"  # the publication directory in the state dir
REPORT_DIR = "allure-report"
HISTORY_FILE = "history.jsonl"
NOT_WANTED = {"built": False, "wanted": False, "reason": "report: never", "remedy": ""}


class Backend:
    name: ClassVar[str] = "files"
    remote: ClassVar[bool] = False

    def __init__(self, services: Services) -> None:
        self.services = services

    # --- select ---------------------------------------------------------------------------------------
    def select(self, inputs: SelectInputs) -> Outcome:
        if (inputs.job_run_id or inputs.job_run_id_env) is not None or inputs.job_run_env is not None:
            # Evidence of a TestOps-launched run would never reach TestOps: say so instead of ignoring it.
            raise Refusal("selection.mode", "a TestOps job run was given but the backend is files",
                          field="backend", expected="testops (or no job run id / job-run-env)", actual="files")
        contract = inputs.contract
        if inputs.standing_plan is not None:
            rows = read_standing_plan(inputs.standing_plan)
            cases = match_rows(rows, contract, where="standing-plan")
            return Outcome(cases, "standing-plan", f"the standing plan {summary.code(inputs.standing_plan)}",
                           f"the standing plan {summary.code(inputs.standing_plan)} lists {len(cases)} of the contract's "
                           f"{len(contract.cases)} cases, each matching a contract case on id and selector",
                           planned=len(rows))
        why = ("no standing plan was given, so `cases` chooses from the whole contract" if inputs.narrowed else
               "no standing plan and no `cases` were given, so the whole contract is selected")
        return Outcome(list(contract.cases), "contract", "the contract", why, planned=len(contract.cases))

    # --- publish --------------------------------------------------------------------------------------
    def publish(self, receipt: Receipt, results_dir: Path, options: PublishOptions) -> Published:
        # Absolute paths in the record: a relative state-dir must still give a usable file URL and a path that
        # verify (another step, maybe another working directory) can open.
        publication = Path(os.path.abspath(self.services.state.ensure() / PUBLISHED))
        if publication.is_symlink() or (publication.exists() and not publication.is_dir()):
            raise Refusal("io.unsafe_path", f"{publication} is a link or not a directory", field="publication-dir",
                          expected="a directory of the state dir, or absent", actual=str(publication))
        if publication.exists():
            # No upload.json records it (upload answers an already recorded publication itself): what an
            # interrupted earlier upload in this state dir left. The publication is rebuilt whole.
            self.services.log(f"removing {publication}, left by an upload that did not finish (no upload.json)")
            shutil.rmtree(publication)
        report: dict[str, Any] = dict(NOT_WANTED)

        def complete(temp: Path) -> None:
            # The status badge, drawn from the receipt: listed in the manifest like every file of the publication.
            write_new(temp / badge.NAME, badge.svg(receipt.document))
            report.clear()
            report.update(self._report(receipt, temp, options))

        copied, tree = publish_files(results_dir, publication, receipt, receipt.raw, complete)
        if report.get("built"):
            report["index"] = str(publication / REPORT_DIR / "index.html")
            if report.get("history"):
                report["history"] = str(publication / HISTORY_FILE)
        destination = publication / RESULTS_NAME
        shown = publication / REPORT_DIR / "index.html" if report.get("built") else publication
        context = receipt.document["context"]
        record = {"backend": self.name, "destination": str(destination), "publication-dir": str(publication),
                  "publication-name": f"{receipt.document['campaign']}-{context['run-id']}-{context['run-attempt']}",
                  "tree-sha256": tree,
                  "receipt-sha256": receipt.sha256, "selection-sha256": receipt.document["selection-sha256"],
                  "uploaded-count": len(receipt.results), "files": copied, "counts": dict(receipt.counts),
                  "report": report, "launch-id": None, "launch-url": shown.as_uri()}
        if report.get("built"):
            what = (f"with an Allure Report ({summary.text(report['tool'])}; statistics equal to the receipt"
                    + (f"; trends over {report['history-entries']} earlier report(s)" if report["history-entries"]
                       else "") + ")")
        elif report.get("wanted") is False:
            what = "without an HTML report (`report: never`)"
        else:
            what = f"without an HTML report ({summary.text(report['reason'])})"
        opening = (" To look at it, open `allure-report/index.html` of the publication in a browser: it is one "
                   "self-contained page, so a double-click on the downloaded file works." if report.get("built") else "")
        return Published(record, f"✅ Published {len(receipt.results)} results ({copied} files, every digest "
                                 f"checked) to {summary.code(publication)}, {what}.{opening}")

    def _report(self, receipt: Receipt, temp: Path, options: PublishOptions) -> dict[str, Any]:
        """Build the HTML report into the publication being written; what happened, for the record."""
        if options.report == "never":
            return dict(NOT_WANTED)
        logs = options.logs or Path(os.path.abspath(self.services.state.ensure()))
        tool = report_tool.obtain(options.env, logs)
        if isinstance(tool, report_tool.Missing):
            if options.report == "always":
                raise Refusal("upload.report", f"no Allure Report can run here: {tool.reason}", field="report",
                              expected="Allure Report 3 (report: always)", actual="missing", hint=tool.remedy + ".")
            return {"built": False, "reason": tool.reason, "remedy": tool.remedy}
        history = None
        entries = 0
        if tool.major >= 3:
            # Always a history file: this report's line is what the next run's report continues.
            history = temp / HISTORY_FILE
            if options.history is not None:
                shutil.copyfile(options.history, history)  # Allure appends this report to the copy
        work = Path(tempfile.mkdtemp(prefix=".allure-work-", dir=logs))
        try:
            built = report_tool.build(tool, temp / RESULTS_NAME, temp / REPORT_DIR, name=options.title,
                                      counts={s: receipt.counts[s] for s in ("passed", "failed", "broken")},
                                      work=work, log=logs / "allure-report.log", env=options.env, history=history,
                                      history_limit=options.history_limit,
                                      code="upload.report")
            entries = built.history_entries
        except Refusal as refusal:
            if options.report == "always" or refusal.field == "Allure Report statistics":
                raise  # a report that contradicts the receipt is never published
            shutil.rmtree(temp / REPORT_DIR, ignore_errors=True)
            if history is not None:
                history.unlink(missing_ok=True)
            return {"built": False, "reason": refusal.message, "remedy": "read the log, or set `report: never`"}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return {"built": True, "tool": f"Allure Report {tool.version}", "origin": tool.origin,
                "stats": {s: built.stats.get(s, 0) for s in ("total", "passed", "failed", "broken")},
                "history": HISTORY_FILE if built.history is not None else None, "history-entries": entries,
                "history-source": options.history_source if options.history is not None else None}

    @staticmethod
    def publication_rows(publication: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = [("published to", summary.code(publication.get("publication-dir")
                                                                      or publication["destination"]))]
        report = publication.get("report")
        if isinstance(report, dict):
            if report.get("built"):
                rows.append(("HTML report", summary.join((summary.code(report["index"]), summary.Markdown(
                    f" — {summary.text(report['tool'])}, statistics equal to the receipt")))))
                if report.get("history"):
                    source = f" from {summary.text(report['history-source'])}" if report.get("history-source") else ""
                    rows.append(("history", summary.Markdown(
                        f"{report['history-entries']} earlier report(s){source}; continued in "
                        f"{summary.code(report['history'])}")))
            elif report.get("wanted") is False:
                rows.append(("HTML report", summary.Markdown("not built (`report: never`)")))
            else:
                remedy = f" — {summary.text(report['remedy'])}" if report.get("remedy") else ""
                rows.append(("HTML report", summary.Markdown(f"⚠️ not built: {summary.text(report['reason'])}{remedy}")))
        return rows

    # --- verify ---------------------------------------------------------------------------------------
    def verify(self, receipt: Receipt, publication: Mapping[str, Any],
               options: VerifyOptions) -> dict[str, Any]:  # noqa: ARG002 - a local copy needs no depth or deadline
        destination = Path(str(publication["destination"]))
        expected = receipt.expected_files()
        files, empty = walk_files(destination)  # recursive: a file in a subdirectory is read by consumers too
        present = set(files)
        missing = sorted(set(expected) - present)
        if missing:
            raise Refusal("verify.missing", f"{len(missing)} published file(s) are missing from {destination}",
                          field=missing[0], expected="every receipt file", actual=f"{len(missing)} missing")
        # Nothing the receipt does not list is read, not even to name a duplicate: it is refused first.
        refuse_extra(destination, [*present, *(f"{name}/" for name in empty)], expected, binding="the receipt")
        names: Counter[str] = Counter()
        for name in sorted(present):
            if name.endswith("-result.json"):
                document = parse_json_bytes(read_safe(destination, name, limit=RESULT_FILE_LIMIT), name,
                                            "verify.mismatch")
                names[str(document.get("fullName")) if isinstance(document, dict) else name] += 1
        # A case measured k times publishes k trial results and its verdict under its full name.
        allowed = {str(row["full-name"]): 1 + len(row.get("trials") or []) for row in receipt.results}
        duplicated = sorted(n for n, count in names.items() if count > allowed.get(n, 1))
        if duplicated:
            raise Refusal("verify.duplicate", f"{duplicated[0]} is published {names[duplicated[0]]} times",
                          field=duplicated[0], expected=f"{allowed.get(duplicated[0], 1)} result(s)",
                          actual=names[duplicated[0]])
        for name, digest in sorted(expected.items()):
            actual, _size = hash_file(destination, name, limit=RESULT_FILE_LIMIT)
            if actual != digest:
                raise Refusal("verify.mismatch", f"the published {name} does not hash to its receipt digest",
                              field=name, expected=digest, actual=actual)
        rows = receipt.published_rows()
        for row in rows:
            document = parse_json_bytes(read_safe(destination, row["result-file"], limit=RESULT_FILE_LIMIT),
                                        row["result-file"], "verify.mismatch")
            what = row["key"] if "trial" not in row else f"{row['key']} trial {row['trial']}"
            for key, want, got in (("uuid", row["uuid"], document.get("uuid")),
                                   ("fullName", row["full-name"], document.get("fullName")),
                                   ("historyId", row["history-id"], document.get("historyId")),
                                   ("status", row["status"], document.get("status"))):
                if want != got:
                    raise Refusal("verify.mismatch", f"the published result of {what} has another {key}",
                                  field=f"{row['key']}/{key}", expected=want, actual=got)
        facts: dict[str, Any] = {"published to": summary.code(publication.get("publication-dir") or destination),
                                 "files checked": len(expected)}
        report = publication.get("report")
        if isinstance(report, dict) and report.get("built"):
            # The report is a view of the same receipt: its counts must still be the receipt's.
            directory = Path(str(report["index"])).parent
            stats = report_tool.statistics(directory)
            want = {status: receipt.counts[status] for status in ("total", "passed", "failed", "broken")}
            got = {status: (stats or {}).get(status) for status in want}
            if got != want:
                raise Refusal("verify.mismatch", f"the Allure Report in {directory} no longer shows the receipt's "
                              "counts", field="allure-report/summary.json", expected=want, actual=got)
            facts["Allure Report statistics"] = "equal to the receipt"
        if len(rows) > len(receipt.results):
            facts["trial results checked"] = len(rows) - len(receipt.results)
        return facts
