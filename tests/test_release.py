"""A release is one tag that everything names (docs/releasing.md): the package version, the changelog's top
entry, action.yml's image tag, the templates' pins and every tag the docs name agree; the changelog keeps its
format; the licence is the exact Apache-2.0 text; and the CLI installs with pip from a git tag, as
docs/install.md says."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ruamel.yaml import YAML

from testops_evidence import __version__

ROOT = Path(__file__).resolve().parent.parent
ACTION_REPOSITORY = "testops-evidence/testops-evidence"
IMAGE = f"ghcr.io/{ACTION_REPOSITORY}"
# SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt (11,358 bytes), as shipped unchanged in the
# dist-info of many Apache-2.0 packages (trio, sniffio).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
VERSION_HEADING = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (Unreleased|\d{4}-\d{2}-\d{2})$", flags=re.MULTILINE)


def user_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def changelog_top() -> tuple[str, str]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = VERSION_HEADING.search(text)
    assert match, "CHANGELOG.md has no `## [x.y.z] - YYYY-MM-DD | Unreleased` entry"
    return match.group(1), match.group(2)


def is_release_commit() -> bool:
    return f"image: docker://{IMAGE}@" in (ROOT / "action.yml").read_text(encoding="utf-8")


# --- one version everywhere -----------------------------------------------------------------------------------


def test_pyproject_and_the_package_carry_the_same_version() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.findall(r'^version = "([^"]+)"$', pyproject, flags=re.MULTILINE) == [__version__]


def test_the_changelog_top_entry_is_this_version() -> None:
    version, date = changelog_top()
    assert version == __version__, f"CHANGELOG.md's top entry is {version}, the package is {__version__}"
    if is_release_commit():  # docs/releasing.md step 2: a release names its date
        assert date != "Unreleased", "a release commit's changelog entry needs its date"


def test_action_yml_names_the_dockerfile_or_the_released_image_by_digest() -> None:
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    images = re.findall(r"^  image: (\S+)$", text, flags=re.MULTILINE)
    assert len(images) == 1, images
    # Never by a tag (docker://...:v0.2.0): a tag can be pushed over with other bytes, a digest cannot.
    assert images[0] == "Dockerfile" or re.fullmatch(rf"docker://{re.escape(IMAGE)}@sha256:[0-9a-f]{{64}}", images[0]), images
    if images[0] != "Dockerfile":
        assert f"# v{__version__}: pushed as {IMAGE}:v{__version__}" in text


def _gen_action() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_action", ROOT / "scripts" / "gen_action.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gen_action_writes_the_release_image_by_digest_and_nothing_else() -> None:
    gen = _gen_action()
    digest = "sha256:" + hashlib.sha256(b"image").hexdigest()
    release = gen.docker_action(gen.release_image(digest))
    assert f"  image: docker://{IMAGE}@{digest}\n" in release
    assert release.replace(f"docker://{IMAGE}@{digest}", "Dockerfile").replace(
        f"  # v{__version__}: pushed as {IMAGE}:v{__version__}, a tag that could be moved; the digest cannot.\n", ""
    ) == gen.docker_action("Dockerfile")  # a release commit changes the image and nothing else
    for wrong in ("v0.2.0", "sha256:abc", "sha256:" + "A" * 64, f"{digest}\n", "sha512:" + "0" * 128):
        with pytest.raises(ValueError, match="not an image digest"):
            gen.release_image(wrong)


@pytest.mark.parametrize("args", [["--image", "release"], ["--digest", "sha256:" + "0" * 64],
                                  ["--image", "release", "--digest", "latest"]])
def test_gen_action_refuses_a_release_image_without_a_valid_digest(args: list[str]) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_action.py"), "--check", *args],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and "digest" in done.stderr, done.stderr


def test_the_templates_pin_the_action_at_this_version() -> None:
    for template in sorted((ROOT / "workflows-templates").glob("*.yml")):
        refs = set(re.findall(rf"uses: {re.escape(ACTION_REPOSITORY)}(?:/composite)?@(\S+)", template.read_text()))
        assert refs == {f"v{__version__}"}, f"{template.name} pins the action at {sorted(refs)}"


def test_every_tag_the_docs_name_is_this_version() -> None:
    for page in user_pages():
        text = page.read_text(encoding="utf-8")
        named = set(re.findall(rf"{re.escape(ACTION_REPOSITORY)}(?:/composite)?@v(\d[\w.+-]*\w)", text))
        named |= set(re.findall(rf"{re.escape(IMAGE)}:v(\d[\w.+-]*\w)", text))
        named |= set(re.findall(r"git\+https://github\.com/testops-evidence/testops-evidence(?:\.git)?@v(\d[\w.+-]*\w)",
                                text))
        named |= set(re.findall(r"--branch v(\d[\w.+-]*\w)", text))
        assert named <= {__version__}, f"{page.relative_to(ROOT)} names versions {sorted(named)}"
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert f'pipx install "git+https://github.com/{ACTION_REPOSITORY}@v{__version__}"' in install
    releasing = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    assert f"v{__version__}" in releasing and f"docker://{IMAGE}@sha256:" in releasing


def test_the_release_workflow_checks_the_changelog_too() -> None:
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    assert "CHANGELOG.md" in workflow


def _release_workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = YAML(typ="safe").load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    return loaded


def test_the_release_pushes_attests_and_tags_the_image_by_its_digest() -> None:
    workflow = _release_workflow()
    image, tag = workflow["jobs"]["image"], workflow["jobs"]["tag"]
    assert image["permissions"] == {"contents": "read", "packages": "write", "id-token": "write",
                                    "attestations": "write"}
    assert tag["permissions"] == {"contents": "write"} and tag["needs"] == "image"
    steps = image["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    # built reproducibly from the commit's own time, then pushed, then its digest taken from the registry
    assert "SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)" in runs and "--build-arg SOURCE_DATE_EPOCH" in runs
    push = next(step for step in steps if step.get("id") == "push")
    assert "docker push" in push["run"] and "RepoDigests" in push["run"] and 'digest=$digest' in push["run"]
    (attest,) = [step for step in steps if "attest-build-provenance" in step.get("uses", "")]
    assert re.fullmatch(r"actions/attest-build-provenance@[0-9a-f]{40}", attest["uses"])
    assert steps.index(attest) > steps.index(push)
    assert attest["with"] == {"subject-name": "${{ env.IMAGE }}", "subject-digest": "${{ steps.push.outputs.digest }}",
                              "push-to-registry": True}
    assert image["outputs"]["digest"] == "${{ steps.push.outputs.digest }}"
    assert tag["env"]["DIGEST"] == "${{ needs.image.outputs.digest }}"
    tag_runs = "\n".join(step.get("run", "") for step in tag["steps"])
    assert 'gen_action.py --image release --digest "$DIGEST"' in tag_runs
    assert 'push origin "refs/tags/v$VERSION"' in tag_runs  # the tag only: main keeps the Dockerfile
    assert workflow["env"]["IMAGE"] == IMAGE


def test_the_image_is_built_reproducibly() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG SOURCE_DATE_EPOCH$", dockerfile, flags=re.MULTILINE)
    assert "python3 -m compileall -q --invalidation-mode checked-hash /action/site /action/src" in dockerfile


# --- the changelog's shape ----------------------------------------------------------------------------------------


def test_the_changelog_keeps_the_keep_a_changelog_format() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    assert "keepachangelog.com" in text and "semver.org" in text
    entries = VERSION_HEADING.findall(text)
    versions = [tuple(int(part) for part in version.split(".")) for version, _ in entries]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    assert [date for _, date in entries[1:]].count("Unreleased") == 0  # only the top entry may be open
    for heading in re.findall(r"^### (.+)$", text, flags=re.MULTILINE):
        assert heading in SECTIONS, f"changelog section {heading!r} is not one of {SECTIONS}"
    top = text[VERSION_HEADING.search(text).end():].split("\n## ", 1)[0]  # type: ignore[union-attr]
    assert re.search(r"^- \S", top, flags=re.MULTILINE), "the top entry lists no change"
    assert re.search(rf"^\[{re.escape(__version__)}\]: https://\S+$", text, flags=re.MULTILINE)


# --- licence -----------------------------------------------------------------------------------------------------


def test_the_licence_is_the_exact_apache_2_text_pyproject_declares() -> None:
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    assert 'license = { text = "Apache-2.0" }' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


# --- install from a tag (docs/install.md) --------------------------------------------------------------------------


def tagged_copy(into: Path) -> Path:
    """This checkout's tracked files, as they are now, committed and tagged ``v<version>`` in a fresh repository:
    what a user's pip sees at ``git+https://…@v<version>``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "release"],
                 ["tag", "-a", f"v{__version__}", "-m", f"v{__version__}"]):
        subprocess.run(["git", *args], cwd=into, env=env, check=True, capture_output=True)
    return into


def test_pip_installs_the_cli_from_the_release_tag(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tagged_copy(tmp_path / "repo")
    site = tmp_path / "target"
    # --no-deps / --no-build-isolation: no network; the dependencies and setuptools come from this venv.
    # --target (never --prefix): pip then leaves this venv's own install of the package alone.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--target", str(site), f"git+file://{repo}@v{__version__}"],
        capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    launcher = site / "bin" / "testops-evidence"
    assert launcher.is_file()
    metadata = next(site.glob("testops_evidence-*.dist-info"))
    assert metadata.name == f"testops_evidence-{__version__}.dist-info"
    # The installed package, not this checkout's src/: run from elsewhere with only the prefix on the path.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env["PYTHONPATH"] = str(site)
    version = subprocess.run([sys.executable, str(launcher), "--version"], capture_output=True, text=True,
                             check=False, env=env, cwd=tmp_path)
    assert (version.returncode, version.stdout.strip()) == (0, f"testops-evidence {__version__}")
    where = subprocess.run([sys.executable, "-c", "import testops_evidence; print(testops_evidence.__file__)"],
                           capture_output=True, text=True, check=True, env=env, cwd=tmp_path).stdout
    assert where.startswith(str(site))
    schemas = site / "testops_evidence" / "schemas"
    assert (schemas / "contract.schema.json").is_file()  # package data travels with it
    assert (site / "testops_evidence" / "allure" / "package-lock.json").is_file()  # the pinned Allure Report
    check = subprocess.run([sys.executable, str(launcher), "check", "--contract", str(repo / "examples" / "contract.yml"),
                            "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, check=False,
                           env=env, cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
