"""Meta-tests: the action's variants, the interface registry, the image, the version and the docs agree.

``interface.py`` is the single source of truth. ``action.yml`` (Docker) and ``composite/action.yml``
must declare exactly its inputs and outputs, with its descriptions and defaults; the composite variant
must pass every input to the entrypoint through ``env:`` (GitHub sets no ``INPUT_*`` variables for
composite actions) and map every output from its run step; the docs must list every input; the image
tag, the templates' action reference and the release docs must carry the package version.
"""

from __future__ import annotations

import copy
import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from testops_evidence import __version__, interface
from testops_evidence.settings import env_input

ROOT = Path(__file__).resolve().parent.parent
ACTION_REPOSITORY = "testops-evidence/testops-evidence"
IMAGE = f"ghcr.io/{ACTION_REPOSITORY}"


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def docker_action() -> dict[str, Any]:
    return load_yaml(ROOT / "action.yml")


@pytest.fixture(scope="module")
def composite_action() -> dict[str, Any]:
    return load_yaml(ROOT / "composite" / "action.yml")


# --- the comparisons (pure functions, so the tests below can also prove that they catch a drift) ----


def interface_mismatches(action: dict[str, Any]) -> list[str]:
    """Differences between an action's declared inputs/outputs and interface.py."""
    problems: list[str] = []
    inputs = action.get("inputs") or {}
    want_inputs = [spec.name for spec in interface.INPUTS]
    if list(inputs) != want_inputs:
        problems.append(f"inputs {sorted(set(inputs) ^ set(want_inputs))} differ (or their order does)")
    for spec in interface.INPUTS:
        declared = inputs.get(spec.name)
        if declared is None:
            continue
        if declared.get("description") != spec.description:
            problems.append(f"input {spec.name}: description differs from interface.py")
        default = declared.get("default")
        if default != spec.default:
            problems.append(f"input {spec.name}: default {default!r} != interface.py {spec.default!r}")
        if bool(declared.get("required", False)) != (spec.name == "mode"):
            problems.append(f"input {spec.name}: required should be {spec.name == 'mode'}")
    outputs = action.get("outputs") or {}
    want_outputs = [spec.name for spec in interface.OUTPUTS]
    if list(outputs) != want_outputs:
        problems.append(f"outputs {sorted(set(outputs) ^ set(want_outputs))} differ (or their order does)")
    for spec in interface.OUTPUTS:
        declared = outputs.get(spec.name)
        if declared is not None and declared.get("description") != spec.description:
            problems.append(f"output {spec.name}: description differs from interface.py")
    return problems


def variant_mismatches(docker: dict[str, Any], composite: dict[str, Any]) -> list[str]:
    """Differences between the two variants' inputs and outputs (names, descriptions, defaults)."""
    problems: list[str] = []
    for section in ("inputs", "outputs"):
        a = docker.get(section) or {}
        b = composite.get(section) or {}
        for name in sorted(set(a) ^ set(b)):
            where = "action.yml" if name in a else "composite/action.yml"
            problems.append(f"{section[:-1]} {name} only in {where}")
        for name in sorted(set(a) & set(b)):
            for key in ("description", "default", "required"):
                if a[name].get(key) != b[name].get(key):
                    problems.append(f"{section[:-1]} {name}: {key} differs between the variants")
    return problems


def composite_wiring_mismatches(composite: dict[str, Any]) -> list[str]:
    """Every input reaches the entrypoint through env; every output comes from the run step."""
    problems: list[str] = []
    steps = composite["runs"]["steps"]
    run_step = next((step for step in steps if step.get("id") == "run"), None)
    if run_step is None:
        return ["composite has no step with id: run"]
    env = run_step.get("env") or {}
    for name in composite.get("inputs") or {}:
        matching = [key for key, value in env.items() if value == f"${{{{ inputs.{name} }}}}"]
        if not matching:
            problems.append(f"input {name} is not passed to the entrypoint through env")
        for key in matching:
            if env_input({key: "probe"}, name) != "probe":
                problems.append(f"input {name}: env name {key} is not one the entrypoint reads")
    for name, output in (composite.get("outputs") or {}).items():
        if output.get("value") != f"${{{{ steps.run.outputs.{name} }}}}":
            problems.append(f"output {name} is not mapped from steps.run.outputs.{name}")
    for step in steps:
        if "${{" in str(step.get("run", "")):
            problems.append(f"step {step.get('id')}: an expression inside run: (use env:)")
    return problems


def docs_mismatches(text: str, where: str) -> list[str]:
    """Inputs and outputs missing from a docs table (rows written as ``| `name` |``)."""
    listed = set(re.findall(r"^\|\s*`([a-z0-9-]+)`", text, flags=re.MULTILINE))
    problems = [f"input {spec.name} is not in {where}" for spec in interface.INPUTS if spec.name not in listed]
    return problems


# --- the real files agree ------------------------------------------------------------------------


def test_docker_action_declares_exactly_the_interface(docker_action: dict[str, Any]) -> None:
    assert interface_mismatches(docker_action) == []


def test_composite_action_declares_exactly_the_interface(composite_action: dict[str, Any]) -> None:
    assert interface_mismatches(composite_action) == []


def test_the_two_variants_agree(docker_action: dict[str, Any], composite_action: dict[str, Any]) -> None:
    assert variant_mismatches(docker_action, composite_action) == []


def test_composite_passes_every_input_through_env_and_maps_every_output(composite_action: dict[str, Any]) -> None:
    assert composite_wiring_mismatches(composite_action) == []


def test_generated_files_are_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_action.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_docs_list_every_input() -> None:
    docs = [path for path in (ROOT / "docs" / "inputs.md", ROOT / "README.md") if path.exists()]
    tables = [(path, path.read_text(encoding="utf-8")) for path in docs]
    tables = [(path, text) for path, text in tables if re.search(r"^\|\s*`mode`", text, flags=re.MULTILINE)]
    if not tables:
        pytest.skip("no input table yet in docs/inputs.md or README.md (generated by scripts/gen_docs.py)")
    for path, text in tables:
        assert docs_mismatches(text, path.name) == []


# --- the comparisons catch a drift (so a green run means something) ------------------------------


def test_an_input_added_to_one_variant_only_is_caught(docker_action: dict[str, Any],
                                                      composite_action: dict[str, Any]) -> None:
    drifted = copy.deepcopy(docker_action)
    drifted["inputs"]["new-knob"] = {"description": "x", "required": False, "default": ""}
    assert variant_mismatches(drifted, composite_action) == ["input new-knob only in action.yml"]
    assert any("new-knob" in problem for problem in interface_mismatches(drifted))


def test_an_output_added_to_the_composite_only_is_caught(docker_action: dict[str, Any],
                                                         composite_action: dict[str, Any]) -> None:
    drifted = copy.deepcopy(composite_action)
    drifted["outputs"]["new-out"] = {"description": "x", "value": "${{ steps.run.outputs.new-out }}"}
    assert variant_mismatches(docker_action, drifted) == ["output new-out only in composite/action.yml"]


def test_a_changed_default_is_caught(docker_action: dict[str, Any], composite_action: dict[str, Any]) -> None:
    drifted = copy.deepcopy(composite_action)
    drifted["inputs"]["deadline-seconds"]["default"] = "60"
    assert variant_mismatches(docker_action, drifted) == ["input deadline-seconds: default differs between the variants"]
    assert interface_mismatches(drifted) == ["input deadline-seconds: default '60' != interface.py '600'"]


def test_an_input_missing_from_the_composite_env_is_caught(composite_action: dict[str, Any]) -> None:
    drifted = copy.deepcopy(composite_action)
    run = next(step for step in drifted["runs"]["steps"] if step.get("id") == "run")
    del run["env"]["INPUT_LEDGER"]
    run["run"] = run["run"] + " ${{ inputs.mode }}"
    assert composite_wiring_mismatches(drifted) == [
        "input ledger is not passed to the entrypoint through env",
        "step run: an expression inside run: (use env:)",
    ]


def test_an_input_missing_from_the_docs_is_caught() -> None:
    table = "\n".join(f"| `{spec.name}` | x |" for spec in interface.INPUTS if spec.name != "ledger")
    assert docs_mismatches(table, "docs/inputs.md") == ["input ledger is not in docs/inputs.md"]


# --- runs, image, version -------------------------------------------------------------------------


def test_docker_action_runs_the_image(docker_action: dict[str, Any]) -> None:
    runs = docker_action["runs"]
    assert runs["using"] == "docker"
    # On main the image is built from the checkout; a release commit points at the prebuilt image of
    # exactly this version (docs/releasing.md).
    assert runs["image"] in ("Dockerfile", f"docker://{IMAGE}:v{__version__}")
    assert "args" not in runs and "entrypoint" not in runs  # inputs travel as INPUT_* variables
    assert docker_action["branding"]["icon"] and docker_action["branding"]["color"]
    assert len(docker_action["description"]) <= 125  # the Marketplace's limit


def test_composite_action_runs_the_same_entrypoint(composite_action: dict[str, Any]) -> None:
    steps = composite_action["runs"]["steps"]
    assert composite_action["runs"]["using"] == "composite"
    assert [step.get("id") for step in steps] == ["setup", "node", None, "run"]
    assert "../entrypoint.py" in steps[-1]["run"] and "-I" in steps[-1]["run"]
    # Node.js for the HTML report: only for an upload that may build one, pinned by commit, never fatal.
    probe, setup_node = steps[1], steps[2]
    assert probe["if"] == "inputs.mode == 'upload' && inputs.report != 'never'"
    assert setup_node["if"].startswith(probe["if"] + " && ")
    assert re.fullmatch(r"actions/setup-node@[0-9a-f]{40}", setup_node["uses"])
    assert setup_node["continue-on-error"] is True and setup_node["with"] == {"node-version": 20}
    setup = (ROOT / "composite" / "setup.sh").read_text(encoding="utf-8")
    assert "--require-hashes" in setup and "requirements/runtime.txt" in setup and "--only-binary=:all:" in setup


def test_dockerfile_is_pinned_locked_and_runs_as_the_runner_expects() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    base = re.search(r"^ARG BASE=(\S+)$", text, flags=re.MULTILINE)
    assert base, "ARG BASE=<image> is what lets an air-gapped build (and the container test) swap the base"
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-bookworm)?@sha256:[0-9a-f]{64}", base.group(1))
    assert re.search(r"^FROM \$\{BASE\}$", text, flags=re.MULTILINE)
    assert "--require-hashes" in text and "--no-cache-dir" in text and "requirements/runtime.txt" in text
    assert re.search(r"^USER ", text, flags=re.MULTILINE) is None  # GitHub requires root
    assert re.search(r"^WORKDIR ", text, flags=re.MULTILINE) is None  # the runner sets the workspace
    entrypoint = re.findall(r"^ENTRYPOINT (.+)$", text, flags=re.MULTILINE)
    assert entrypoint == ['["/action/bin/python", "-I", "/action/entrypoint.py"]']  # exec form
    for variable in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"):
        assert variable in text


def test_dockerignore_keeps_the_context_to_what_the_image_needs() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {"!requirements/runtime.txt", "!entrypoint.py", "!src/testops_evidence/"} <= set(lines)


# --- the composite environment really reaches the settings ------------------------------------------


@pytest.mark.parametrize("spelling", ["runner", "composite"])
def test_entrypoint_reads_inputs_in_both_spellings(spelling: str) -> None:
    """The Docker runner sets ``INPUT_SELECTION-PATH``; the composite variant sets ``INPUT_SELECTION_PATH``: the
    phase the entrypoint starts reads its inputs from the environment in either spelling."""
    from testops_evidence.settings import Settings, env_input

    def key(name: str) -> str:
        upper = name.upper()
        return f"INPUT_{upper}" if spelling == "runner" else f"INPUT_{upper.replace('-', '_')}"

    env = {key("mode"): "verify-selection", key("selection-path"): "sel.json", key("selection-sha256"): "ab" * 32}
    settings = Settings.resolve("verify-selection", {}, env)
    assert env_input(env, "mode") == "verify-selection"
    assert (settings.string("selection-path"), settings.string("selection-sha256")) == ("sel.json", "ab" * 32)


# --- the composite's venv step (composite/setup.sh) ---------------------------------------------------


def run_setup(tmp_path: Path, path: str, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    output = tmp_path / "output"
    output.touch()
    env = {"PATH": path, "GITHUB_ACTION_PATH": str(ROOT / "composite"), "GITHUB_OUTPUT": str(output),
           "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"), "RUNNER_TEMP": str(tmp_path / "temp"), **extra}
    done = subprocess.run(["/bin/bash", str(ROOT / "composite" / "setup.sh")], env=env, capture_output=True,
                          text=True, check=False)
    return done, output


def test_composite_setup_reuses_a_complete_venv_for_the_same_lock_and_interpreter(tmp_path: Path) -> None:
    """The cache key is the lock's digest plus the interpreter; a complete venv there is used as is."""
    python_dir = str(Path(sys.executable).parent)
    probe, _ = run_setup(tmp_path / "probe", "/nonexistent")  # no python: nothing is built
    assert probe.returncode == 2 and "::error title=setup.python::" in probe.stdout
    interpreter = subprocess.run([sys.executable, "-c", "import platform, sys; print(sys.version.split()[0], "
                                  "platform.machine(), sys.platform)"], capture_output=True, text=True,
                                 check=True).stdout
    lock = (ROOT / "requirements" / "runtime.txt").read_bytes()
    key = hashlib.sha256(lock + interpreter.encode()).hexdigest()[:16]
    venv = tmp_path / "tool-cache" / "testops-evidence" / f"venv-{key}"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / ".complete").touch()
    done, output = run_setup(tmp_path, f"{python_dir}:/usr/bin:/bin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reusing the venv for lock {key}" in done.stdout
    assert output.read_text() == f"python={venv}/bin/python\n"


def test_composite_setup_refuses_a_windows_runner_before_building_anything(tmp_path: Path) -> None:
    """Every phase reads and writes through safeio's fail-closed primitives (O_NOFOLLOW, O_DIRECTORY,
    dir_fd, owner checks), which Windows does not have: there the action could only end in
    internal.error. The venv step says so first, with a registered code, and builds nothing."""
    from testops_evidence.errors import REGISTRY

    python_dir = str(Path(sys.executable).parent)
    done, output = run_setup(tmp_path, f"{python_dir}:/usr/bin:/bin", RUNNER_OS="Windows")
    assert done.returncode == REGISTRY["setup.platform"].exit_code == 2, done.stdout + done.stderr
    assert "::error title=setup.platform::" in done.stdout
    assert output.read_text() == "" and not (tmp_path / "tool-cache").exists()


def test_the_runtime_imports_only_what_the_runtime_lock_holds() -> None:
    # ruamel.yaml left the runtime lock (issue 17): contracts are read by yamlread. A runtime import of it would
    # work in the dev venv and fail in the Docker image and the composite action's venv.
    lock = (ROOT / "requirements" / "runtime.txt").read_text()
    assert "ruamel" not in lock
    for path in sorted((ROOT / "src" / "testops_evidence").rglob("*.py")):
        for line in path.read_text().splitlines():
            words = line.strip().split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1:
                assert not words[1].startswith("ruamel"), f"{path}: {line.strip()}"
