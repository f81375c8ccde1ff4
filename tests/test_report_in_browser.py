"""The files-backend report opens from disk, as a user opens a downloaded publication: a double-click on
``allure-report/index.html`` (a ``file://`` page). A report in several files fetches its data at load time,
which browsers refuse for ``file://`` pages: it showed an empty spinner. Checked with headless Chromium (the
Debian package, installed by scripts/setup.sh for the tests), which renders the page and must show every
case of the receipt; a screenshot is kept beside the test's files for a person to look at."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import left_out
from test_upload import ALLURE, CONTRACT, exported, phase  # noqa: F401 (exported is a fixture)

CHROMIUM = next((path for path in (shutil.which("chromium"), shutil.which("chromium-browser"),
                                   shutil.which("google-chrome")) if path), None)

pytestmark = [
    pytest.mark.allure,
    pytest.mark.skipif(not ALLURE.exists() or shutil.which("node") is None,
                       reason="Allure Report 3 is not installed: run `bash scripts/setup.sh` (needs npm)"),
    pytest.mark.skipif(left_out("browser") is not None, reason=str(left_out("browser"))),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: `apt-get install chromium` (scripts/setup.sh does "
                                                "as root)"),
]


def browse(url: str, *flags: str, budget: int = 15000) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    # --virtual-time-budget lets the page's scripts run to quiet before the DOM or the picture is taken.
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-dev-shm-usage", f"--virtual-time-budget={budget}", "--window-size=1280,900",
                           *flags, url], capture_output=True, text=True, timeout=300, check=False)


def rendered(url: str, titles: list[str]) -> str:
    """The page's DOM once every title is in it. On a loaded machine Chromium can dump the DOM before the
    report's scripts have drawn the rows even with a virtual time budget, so a dump without them is taken
    again with a longer budget (three tries); the last dump is returned either way, for the assertion."""
    dom = ""
    for budget in (15000, 60000, 120000):
        dumped = browse(url, "--dump-dom", budget=budget)
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        dom = dumped.stdout
        if all(title in dom for title in titles):
            break
    return dom


def test_the_report_opened_from_disk_shows_every_case(tmp_path: Path, exported: dict[str, str]) -> None:  # noqa: F811
    upload = phase("upload", tmp_path, {**exported, "report": "always"})
    assert upload.exit_code == 0, upload.summary + upload.log
    report = tmp_path / "state" / "published" / "allure-report"
    receipt = json.loads((tmp_path / "state" / "published" / "allure-results-receipt.json").read_text())
    titles = [CONTRACT.case(row["key"]).title for row in receipt["results"]]
    dom = rendered((report / "index.html").as_uri(), titles)
    assert titles and all(title in dom for title in titles), (titles, dom[:2000])
    # One self-contained page: nothing for the browser to fetch.
    assert not (report / "data").exists()
    assert "open `allure-report/index.html`" in upload.summary

    picture = tmp_path / "report-from-disk.png"
    shot = browse((report / "index.html").as_uri(), f"--screenshot={picture}")
    assert shot.returncode == 0, shot.stderr[-2000:]
    # The picture is for a person to look at (what renders is checked on the DOM above, which the same page
    # produced): a PNG of the window's size. Its bytes are not judged: under load Chromium may take it while
    # the page is still drawing.
    data = picture.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1280, 900)
