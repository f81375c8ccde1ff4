"""The project's own CI and update bot (issue 26, "build hygiene"): every supported Python is tested, the
locks are audited with their hashes, and every ecosystem the project pins gets update proposals. The
workflows' syntax and security are checked by scripts/lint-action.sh (actionlint, zizmor, schemas)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent


def load(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe").load((ROOT / path).read_text(encoding="utf-8"))
    return loaded


def supported_pythons() -> list[str]:
    """The versions pyproject.toml's classifiers name, from requires-python's floor."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    floor = re.search(r'^requires-python = ">=(3\.\d+)"$', pyproject, flags=re.MULTILINE)
    named = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)
    assert floor and named and named[0] == floor[1]
    return named


def test_ci_tests_every_supported_python() -> None:
    jobs = load(".github/workflows/ci.yml")["jobs"]
    assert jobs["python"]["strategy"]["matrix"]["python"] == supported_pythons() == ["3.11", "3.12", "3.13", "3.14"]
    assert jobs["python"]["strategy"]["fail-fast"] is False
    steps = jobs["python"]["steps"]
    assert any(step.get("with", {}).get("python-version") == "${{ matrix.python }}" for step in steps)
    assert "bash .ci/run" in "\n".join(step.get("run", "") for step in jobs["ci"]["steps"])


def test_ci_audits_every_lock_with_its_hashes() -> None:
    (job,) = [job for job in load(".github/workflows/ci.yml")["jobs"].values() if "pip-audit" in str(job["steps"])]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    assert "--require-hashes --only-binary=:all: -r requirements/audit.txt" in script  # pip-audit from its lock
    assert "pip-audit\" --strict --require-hashes --disable-pip -r \"requirements/$lock.txt\"" in script
    loop = re.search(r"for lock in ([a-z ]+); do", script)
    assert loop and set(loop[1].split()) == {path.stem for path in (ROOT / "requirements").glob("*.in")}


def test_the_update_bot_covers_every_ecosystem_the_project_pins() -> None:
    config = load(".github/dependabot.yml")
    assert config["version"] == 2
    covered = {(update["package-ecosystem"], update["directory"]) for update in config["updates"]}
    assert covered == {("pip", "/requirements"), ("github-actions", "/"), ("docker", "/"),
                       ("npm", "/src/testops_evidence/allure")}
    for ecosystem, directory in covered:  # each points at files that exist
        where = ROOT / directory.lstrip("/")
        wanted = {"pip": "runtime.in", "docker": "Dockerfile", "npm": "package-lock.json"}.get(ecosystem)
        assert (where / wanted).is_file() if wanted else (where / ".github" / "workflows").is_dir()
