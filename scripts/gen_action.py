#!/usr/bin/env python3
"""Writes ``action.yml`` and ``composite/action.yml`` from ``interface.py``, the single source of truth.

Both action variants declare exactly the inputs and outputs of :mod:`testops_evidence.interface`, with
the same descriptions and defaults; only ``runs:`` differs. Generating them (rather than keeping three
lists in step by hand) is what makes "added to one variant and not the other" impossible; the
meta-test ``tests/test_action_meta.py`` runs ``--check`` and also checks the parsed files on their own.

    python scripts/gen_action.py                                         # rewrite both files
    python scripts/gen_action.py --image release --digest sha256:<hex>   # the release commit (release.yml)
    python scripts/gen_action.py --check          # exit 1 and show a diff when a file is stale

On main action.yml builds the ``Dockerfile``. The release commit, made by .github/workflows/release.yml
after it has pushed the image, names that image by its digest (``docker://ghcr.io/...@sha256:...``): a
tag can be moved to other bytes, a digest cannot. ``--check`` keeps whichever form action.yml has (the
digest included), so it checks the rest of the file on a release commit too.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from testops_evidence import __version__, interface  # noqa: E402

HEADER = (
    "# Generated from src/testops_evidence/interface.py by scripts/gen_action.py: edit the interface\n"
    "# there and regenerate (a test fails while this file is stale).\n"
)
NAME = "TestOps Evidence"
# The Marketplace shows at most 125 characters of the description.
DESCRIPTION = "Fail-closed evaluation campaigns on GitHub Actions: evidence bound to run, commit and plan, published to Allure TestOps."
AUTHOR = "testops-evidence maintainers"
# The published action's repository and its prebuilt image (docs/releasing.md).
ACTION_REPOSITORY = "testops-evidence/testops-evidence"
IMAGE = f"ghcr.io/{ACTION_REPOSITORY}"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def release_image(digest: str) -> str:
    """action.yml's image on a release commit: the pushed image by its digest."""
    if not DIGEST.fullmatch(digest):
        raise ValueError(f"{digest!r} is not an image digest (sha256:<64 hex digits>)")
    return f"docker://{IMAGE}@{digest}"
# Third-party actions the composite variant uses, pinned by commit like the templates' (v4.4.0).
SETUP_NODE = "actions/setup-node@49933ea5288caeca8642d1e84afbd3f7d6820020 # v4.4.0"


def q(text: str) -> str:
    """A YAML double-quoted scalar (JSON string syntax is a subset of it)."""
    return json.dumps(text, ensure_ascii=False)


def env_name(input_name: str) -> str:
    # GitHub sets no INPUT_* variables for composite actions, so the composite variant sets them
    # itself; underscores, because the entrypoint reads both spellings and shells need underscores.
    return "INPUT_" + input_name.upper().replace("-", "_")


def io_sections(*, composite: bool) -> list[str]:
    lines = ["inputs:"]
    for spec in interface.INPUTS:
        lines.append(f"  {spec.name}:")
        lines.append(f"    description: {q(spec.description)}")
        lines.append(f"    required: {'true' if spec.name == 'mode' else 'false'}")
        if spec.default is not None:
            lines.append(f"    default: {q(spec.default)}")
    lines.append("outputs:")
    for out in interface.OUTPUTS:
        lines.append(f"  {out.name}:")
        lines.append(f"    description: {q(out.description)}")
        if composite:
            lines.append(f"    value: ${{{{ steps.run.outputs.{out.name} }}}}")
    return lines


def docker_action(image: str = "Dockerfile") -> str:
    lines = [
        f"name: {q(NAME)}",
        f"description: {q(DESCRIPTION)}",
        f"author: {q(AUTHOR)}",
        "branding:",
        "  icon: shield",
        "  color: green",
        *io_sections(composite=False),
        "runs:",
        "  using: docker",
        "  # Built from the checkout on every job on main; a release commit names the image its release",
        "  # workflow built, pushed and attested, by digest (docs/releasing.md).",
        *([f"  # v{__version__}: pushed as {IMAGE}:v{__version__}, a tag that could be moved; the digest cannot."]
          if image != "Dockerfile" else []),
        f"  image: {image}",
    ]
    return HEADER + "\n".join(lines) + "\n"


def composite_action() -> str:
    env_lines = [f"        {env_name(spec.name)}: ${{{{ inputs.{spec.name} }}}}" for spec in interface.INPUTS]
    lines = [
        f"name: {q(NAME + ' (composite)')}",
        f"description: {q('The same action without Docker: runs on Linux and macOS runners from a venv.')}",
        f"author: {q(AUTHOR)}",
        "branding:",
        "  icon: shield",
        "  color: green",
        *io_sections(composite=True),
        "runs:",
        "  using: composite",
        "  steps:",
        "    # A venv built from requirements/runtime.txt with --require-hashes (by uv, pinned in",
        "    # requirements/uv.txt; by pip where uv cannot run), cached per lock digest and interpreter in the",
        "    # runner's tool cache; prints the venv's python as the `python` output and puts the action's",
        "    # `testops-evidence` command on the PATH of the job's later steps (a case command's `cell`).",
        "    - id: setup",
        "      shell: bash",
        '      run: bash "$GITHUB_ACTION_PATH/setup.sh"',
        "    # The HTML report of a files-backend upload needs Node.js 20 or newer (Allure Report 3): where the",
        "    # runner has none (self-hosted), actions/setup-node provides it; the phase installs the pinned",
        "    # Allure Report itself. Other modes, and `report: never`, skip both steps; a runner that cannot",
        "    # fetch Node.js still publishes (continue-on-error), and the summary says why there is no report.",
        "    - id: node",
        "      if: inputs.mode == 'upload' && inputs.report != 'never'",
        "      shell: bash",
        '      run: bash "$GITHUB_ACTION_PATH/node.sh"',
        "    - if: inputs.mode == 'upload' && inputs.report != 'never' && fromJSON(steps.node.outputs.major || '0') < 20",
        f"      uses: {SETUP_NODE}",
        "      continue-on-error: true",
        "      with:",
        "        node-version: 20",
        "    # Inputs reach the entrypoint only through env (never ${{ }} inside run:).",
        "    - id: run",
        "      shell: bash",
        "      env:",
        "        TESTOPS_EVIDENCE_PYTHON: ${{ steps.setup.outputs.python }}",
        *env_lines,
        '      run: \'"$TESTOPS_EVIDENCE_PYTHON" -I "$GITHUB_ACTION_PATH/../entrypoint.py"\'',
    ]
    return HEADER + "\n".join(lines) + "\n"


def current_image() -> str:
    """action.yml's image as it stands: the release image by digest when it names one, else the Dockerfile."""
    path = ROOT / "action.yml"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    found = re.search(rf"^  image: docker://{re.escape(IMAGE)}@(sha256:[0-9a-f]{{64}})$", text, flags=re.MULTILINE)
    return release_image(found[1]) if found else "Dockerfile"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale files instead of writing")
    parser.add_argument("--image", choices=("dockerfile", "release"),
                        help="action.yml's image: the Dockerfile (main) or the pushed image by --digest (a release)")
    parser.add_argument("--digest", help="the pushed image's digest, sha256:<hex> (with --image release)")
    args = parser.parse_args()
    if (args.image == "release") != (args.digest is not None):
        parser.error("--image release and --digest go together")
    try:
        image = release_image(args.digest) if args.digest else "Dockerfile" if args.image else current_image()
    except ValueError as exc:
        parser.error(str(exc))
    targets = {ROOT / "action.yml": docker_action(image), ROOT / "composite" / "action.yml": composite_action()}
    stale = 0
    for path, want in targets.items():
        have = path.read_text(encoding="utf-8") if path.exists() else ""
        if want == have:
            continue
        if args.check:
            stale += 1
            rel = str(path.relative_to(ROOT))
            sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True), rel, rel + " (generated)"))
        else:
            path.write_text(want, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"\n{stale} file(s) stale: run python scripts/gen_action.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
