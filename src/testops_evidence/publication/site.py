"""The GitHub Pages site of a campaign's reports: one directory per kept report, an index, and retention.

Layout of the site (the checked-out Pages branch)::

    .nojekyll                          GitHub Pages serves the files as they are (no Jekyll build)
    index.html                         the campaigns on this site
    <campaign>/index.html              the kept reports, newest first, with their counts
    <campaign>/reports.json            the same as data (testops-evidence/pages-index/v1)
    <campaign>/history.jsonl           the newest report's history (a later upload may continue it)
    <campaign>/<run id>-<attempt>/     one Allure Report

Retention keeps the newest ``keep`` reports of the campaign (by run id, then attempt) and removes the
directories of the others, and only those: nothing the index does not list is ever deleted. The branch
is content from earlier runs, so it is read as hostile: a link anywhere on the way, an index that is not
ours, or a report that holds anything but regular files and directories is refused (``pages.site``).
"""

from __future__ import annotations

import html
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.safeio import canonical_json, loads_json, write_atomic

INDEX_SCHEMA = "testops-evidence/pages-index/v1"
INDEX_FILE = "reports.json"
HISTORY_FILE = "history.jsonl"
INDEX_LIMIT = 4 * 1024 * 1024
_REPORT_DIR = re.compile(r"^[1-9][0-9]{0,17}-[1-9][0-9]{0,5}$")
_CAMPAIGN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class Entry:
    """One kept report, as the campaign's index lists it."""

    run_id: int
    attempt: int
    run_number: int
    created: str  # the export's time (UTC, ISO 8601)
    counts: Mapping[str, int]
    local: bool = False

    @property
    def directory(self) -> str:
        return f"{self.run_id}-{self.attempt}"

    def to_json(self) -> dict[str, Any]:
        return {"run-id": self.run_id, "attempt": self.attempt, "run-number": self.run_number,
                "created": self.created, "counts": dict(self.counts), "local": self.local,
                "path": f"{self.directory}/index.html"}


@dataclass(frozen=True)
class Published:
    entry: Entry
    kept: tuple[Entry, ...]
    removed: tuple[str, ...]  # directories removed by retention


def _site_refusal(message: str, *, field: str, expected: Any, actual: Any) -> Refusal:
    return Refusal("pages.site", message, field=field, expected=expected, actual=actual)


def _real_dir(path: Path, what: str, *, create: bool = False) -> None:
    if path.is_symlink():
        raise _site_refusal(f"{what} {path} is a link", field=str(path), expected="a directory", actual="a link")
    if not path.exists() and create:
        path.mkdir(mode=0o755)
    if not path.is_dir():
        raise _site_refusal(f"{what} {path} is not a directory", field=str(path), expected="a directory",
                            actual="absent" if not path.exists() else "a file")


def _plain_tree(root: Path) -> int:
    """Refuse anything but regular files and directories below ``root``; the number of files."""
    count = 0
    for folder, directories, files in os.walk(root):
        for name in (*directories, *files):
            path = Path(folder) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise _site_refusal(f"{path} is a link or a special file", field=str(path.relative_to(root)),
                                    expected="regular files and directories", actual="a link or special file")
        count += len(files)
    return count


def read_index(campaign_dir: Path) -> list[Entry]:
    path = campaign_dir / INDEX_FILE
    if not path.exists():
        return []
    if path.is_symlink() or not path.is_file() or path.stat().st_size > INDEX_LIMIT:
        raise _site_refusal(f"{path} is not a regular file under {INDEX_LIMIT} bytes", field=INDEX_FILE,
                            expected="the index testops-evidence writes", actual="another kind of file")
    try:
        document = loads_json(path.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or document.get("schema") != INDEX_SCHEMA:
            raise ValueError("schema")
        entries = [Entry(run_id=int(row["run-id"]), attempt=int(row["attempt"]), run_number=int(row["run-number"]),
                         created=str(row["created"]), local=bool(row.get("local", False)),
                         counts={str(k): int(v) for k, v in dict(row["counts"]).items()})
                   for row in document["reports"]]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise _site_refusal(f"{path} is not an index testops-evidence wrote ({type(exc).__name__})", field=INDEX_FILE,
                            expected=INDEX_SCHEMA, actual="unreadable") from None
    for entry in entries:
        if not _REPORT_DIR.match(entry.directory):
            raise _site_refusal(f"{path} lists a report directory {entry.directory!r}", field=INDEX_FILE,
                                expected="<run id>-<attempt>", actual=entry.directory)
    return entries


def publish_report(site: Path, campaign: str, entry: Entry, report: Path, history: Path | None,
                   keep: int) -> Published:
    """Put ``report`` on the site as ``<campaign>/<run id>-<attempt>/``, keep the newest ``keep`` reports, and
    rewrite the indexes."""
    if not _CAMPAIGN.match(campaign):
        raise _site_refusal(f"campaign {campaign!r} cannot name a site directory", field="campaign",
                            expected=_CAMPAIGN.pattern, actual=campaign)
    _real_dir(site, "the Pages checkout")
    campaign_dir = site / campaign
    _real_dir(campaign_dir, "the campaign's directory", create=True)
    existing = read_index(campaign_dir)
    _plain_tree(report)

    target = campaign_dir / entry.directory
    if target.is_symlink():
        raise _site_refusal(f"{target} is a link", field=entry.directory, expected="a directory", actual="a link")
    temp = campaign_dir / f".{entry.directory}.incoming-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    shutil.copytree(report, temp, symlinks=True)  # _plain_tree refused links: nothing to follow
    if target.exists():
        shutil.rmtree(target)  # the same attempt published again (a re-run of the pages job)
    os.rename(temp, target)

    entries = [e for e in existing if e.directory != entry.directory] + [entry]
    entries.sort(key=lambda e: (e.run_id, e.attempt), reverse=True)
    kept, dropped = entries[:keep], entries[keep:]
    removed = []
    for old in dropped:
        path = campaign_dir / old.directory
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        removed.append(old.directory)
    if history is not None and history.is_file() and kept and kept[0] == entry:
        write_atomic(campaign_dir / HISTORY_FILE, history.read_bytes(), mode=0o644)
    write_atomic(campaign_dir / INDEX_FILE, canonical_json({"schema": INDEX_SCHEMA, "campaign": campaign,
                                                            "reports": [e.to_json() for e in kept]}), mode=0o644)
    write_atomic(campaign_dir / "index.html", campaign_page(campaign, kept).encode("utf-8"), mode=0o644)
    write_atomic(site / ".nojekyll", b"", mode=0o644)
    write_atomic(site / "index.html", site_page(site).encode("utf-8"), mode=0o644)
    return Published(entry, tuple(kept), tuple(removed))


_STYLE = ("body{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem}table{border-collapse:collapse}"
          "td,th{padding:.3rem .8rem;border-bottom:1px solid #ddd;text-align:left}.failed{color:#b00}")


def campaign_page(campaign: str, entries: Sequence[Entry]) -> str:
    """The campaign's list of kept reports. Every value is escaped: the index came from earlier runs."""
    name = html.escape(campaign)
    rows = []
    for entry in entries:
        counts = entry.counts
        failing = counts.get("failed", 0) + counts.get("broken", 0)
        rows.append(
            f'<tr><td><a href="{html.escape(entry.directory)}/index.html">run {entry.run_number} (attempt '
            f'{entry.attempt})</a>{" · local" if entry.local else ""}</td><td>{html.escape(entry.created)}</td>'
            f'<td>{counts.get("total", 0)}</td><td>{counts.get("passed", 0)}</td>'
            f'<td class="{"failed" if failing else ""}">{counts.get("failed", 0)}</td>'
            f'<td class="{"failed" if failing else ""}">{counts.get("broken", 0)}</td></tr>')
    newest = f'<p>Newest: <a href="{html.escape(entries[0].directory)}/index.html">run {entries[0].run_number}</a></p>' \
        if entries else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{name} · reports</title>"
            f"<style>{_STYLE}</style></head><body><h1>{name}</h1>{newest}<table><thead><tr><th>report</th>"
            "<th>exported</th><th>total</th><th>passed</th><th>failed</th><th>broken</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><p>Published by testops-evidence; the statistics of every report "
            "equal its export receipt.</p></body></html>\n")


def site_page(site: Path) -> str:
    """The site's list of campaigns: every directory with an index of ours."""
    campaigns = sorted(p.name for p in site.iterdir() if p.is_dir() and not p.is_symlink()
                       and _CAMPAIGN.match(p.name) and (p / INDEX_FILE).is_file())
    items = "".join(f'<li><a href="{html.escape(c)}/index.html">{html.escape(c)}</a></li>' for c in campaigns)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Evaluation reports</title>"
            f"<style>{_STYLE}</style></head><body><h1>Evaluation reports</h1><ul>{items}</ul></body></html>\n")


def tree_bytes(root: Path) -> int:
    return sum((Path(folder) / name).stat().st_size for folder, _dirs, files in os.walk(root) for name in files)
