"""The run context: which repository, run, attempt, workflow, commit, event and actors this is.

Three sources, in falling order of trust:

* :func:`rest_context` (module :mod:`testops_evidence.github_run`) — event file *and* the REST run
  object, cross-checked; used by ``guard`` and the token phases.
* :func:`env_context` — the runner's ``GITHUB_*`` variables only; used by worker phases to re-validate
  a selection that the token phase bound to the REST-verified context (its digest travelled as a job
  output), so workers need no token and no network.
* :func:`local_context` — derived from git for a local rehearsal; marked ``local`` and never admitted
  to TestOps (``guard.local_context``).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.safeio import loads_json, read_safe_path

SHA_RE = re.compile(r"^[0-9a-f]{40}\Z")
ID_RE = re.compile(r"^[1-9][0-9]{0,17}\Z")


@dataclass(frozen=True)
class RunContext:
    repository: str
    run_id: int
    run_attempt: int
    run_number: int
    workflow_path: str  # .github/workflows/x.yml
    workflow_ref: str  # refs/heads/main (the ref the workflow ran from)
    head_sha: str
    branch: str
    event: str
    actor_id: int | None
    triggering_actor_id: int | None
    server_url: str
    workflow_id: int | None = None
    repository_private: bool | None = None
    api_url: str = "https://api.github.com"
    local: bool = False
    source: str = "env"  # env | rest | local

    @property
    def run_url(self) -> str:
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"

    @property
    def commit_url(self) -> str:
        return f"{self.server_url}/{self.repository}/commit/{self.head_sha}"

    @property
    def workflow_url(self) -> str:
        return f"{self.server_url}/{self.repository}/actions/workflows/{Path(self.workflow_path).name}"

    def to_json(self) -> dict[str, Any]:
        """The binding fields (what a selection and evidence are bound to); kebab-case keys."""
        out = {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}
        out["run-url"] = self.run_url
        return out

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> RunContext:
        names = {f.name for f in fields(cls)}
        values = {k.replace("-", "_"): v for k, v in document.items() if k.replace("-", "_") in names}
        try:
            return cls(**values)
        except TypeError as exc:
            raise Refusal("selection.context", f"the recorded run context is incomplete ({exc})") from None

    def binding_fields(self) -> dict[str, Any]:
        """Fields that must agree between the context a selection was made in and a later job's."""
        return {
            "repository": self.repository,
            "run-id": self.run_id,
            "run-attempt": self.run_attempt,
            "head-sha": self.head_sha,
            "workflow-path": self.workflow_path,
            "local": self.local,
        }


# Shown when a variable GitHub's runner always sets is missing: the usual reason is a local runner (act sets
# no GITHUB_WORKFLOW_REF), for which the documented path is the local mode, not a faked variable.
MISSING_RUNNER_VARIABLE = ("GitHub's runner sets {name} in every job: in a GitHub Actions job, look for a step or "
                           "`env:` that unsets it. Local runners such as act do not set it: run the templates there "
                           "with the input `local: true` (docs/local.md), which derives the run context from git.")


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise Refusal("guard.run_mismatch", f"{name} is not set; is this running inside GitHub Actions?",
                      field=name, expected="set by the runner", actual="(unset)",
                      hint=MISSING_RUNNER_VARIABLE.format(name=name))
    return value


def _int(name: str, value: str) -> int:
    if not ID_RE.match(value):
        raise Refusal("guard.run_mismatch", f"{name} is not a positive integer", field=name,
                      expected="a positive integer", actual=value)
    return int(value)


def workflow_path_from_ref(workflow_ref: str, repository: str) -> tuple[str, str]:
    """Split ``GITHUB_WORKFLOW_REF`` (``owner/repo/.github/workflows/x.yml@refs/heads/main``).

    Split on the first ``@`` after the path, because a tag may itself contain ``@``.
    """
    prefix = f"{repository}/"
    if not workflow_ref.startswith(prefix) or "@" not in workflow_ref:
        raise Refusal("guard.run_mismatch", "GITHUB_WORKFLOW_REF does not name a workflow of this repository",
                      field="GITHUB_WORKFLOW_REF", expected=f"{prefix}.github/workflows/<file>@<ref>",
                      actual=workflow_ref)
    rest = workflow_ref[len(prefix):]
    path, ref = rest.split("@", 1)
    return path, ref


def env_context(env: Mapping[str, str]) -> RunContext:
    """The context as the runner's environment states it (no network; not trusted alone)."""
    repository = _require(env, "GITHUB_REPOSITORY")
    workflow_path, workflow_ref = workflow_path_from_ref(_require(env, "GITHUB_WORKFLOW_REF"), repository)
    sha = _require(env, "GITHUB_SHA")
    if not SHA_RE.match(sha):
        raise Refusal("guard.run_mismatch", "GITHUB_SHA is not a 40-hex commit", field="GITHUB_SHA",
                      expected="40 lowercase hex", actual=sha)
    ref = env.get("GITHUB_REF", workflow_ref)
    return RunContext(
        repository=repository,
        run_id=_int("GITHUB_RUN_ID", _require(env, "GITHUB_RUN_ID")),
        run_attempt=_int("GITHUB_RUN_ATTEMPT", env.get("GITHUB_RUN_ATTEMPT", "1")),
        run_number=_int("GITHUB_RUN_NUMBER", _require(env, "GITHUB_RUN_NUMBER")),
        workflow_path=workflow_path,
        workflow_ref=workflow_ref,
        head_sha=sha,
        branch=env.get("GITHUB_REF_NAME") or ref.removeprefix("refs/heads/"),
        event=_require(env, "GITHUB_EVENT_NAME"),
        actor_id=_int("GITHUB_ACTOR_ID", env["GITHUB_ACTOR_ID"]) if env.get("GITHUB_ACTOR_ID") else None,
        triggering_actor_id=None,
        server_url=env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/"),
        api_url=env.get("GITHUB_API_URL", "https://api.github.com").rstrip("/"),
        source="env",
    )


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def local_context(cwd: Path, contract_repository: str, workflow_path: str, *, run_id: int = 1) -> RunContext:
    """A rehearsal context from git (or fixed placeholders outside a checkout); always ``local``."""
    sha = _git(cwd, "rev-parse", "HEAD") or "0" * 40
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD") or "local"
    if not SHA_RE.match(sha):
        sha = "0" * 40
    return RunContext(
        repository=contract_repository,
        run_id=run_id,
        run_attempt=1,
        run_number=run_id,
        workflow_path=workflow_path,
        workflow_ref=f"refs/heads/{branch}",
        head_sha=sha,
        branch=branch,
        event="local",
        actor_id=None,
        triggering_actor_id=None,
        server_url="https://github.com",
        local=True,
        source="local",
    )


def check_same_run(recorded: RunContext, live: RunContext, code: str = "selection.context",
                   what: str = "the selection") -> None:
    """Refuse unless ``recorded`` (from ``what``, e.g. a selection) binds to the same run as ``live``."""
    want = recorded.binding_fields()
    have = live.binding_fields()
    for key, expected in want.items():
        if have[key] != expected:
            raise Refusal(code, f"{what} was made for another run ({key} differs)", field=key,
                          expected=expected, actual=have[key])


def context_dict(context: RunContext) -> dict[str, Any]:
    return asdict(context)


# --- the event file ---------------------------------------------------------------------------------

# The runner writes the triggering event's payload to GITHUB_EVENT_PATH. Our bindings need only a few
# small fields (inputs, sender, repository); a workflow_dispatch payload is a few KiB. The cap bounds
# memory and parse time if the file was replaced by something else (a step can write to it).
EVENT_LIMIT = 64 * 1024


def read_event(env: Mapping[str, str]) -> dict[str, Any]:
    """The event payload from ``GITHUB_EVENT_PATH``: a regular file, no link, one hard link, <= 64 KiB,
    a JSON object. Anything else is ``guard.event_file``."""
    path = env.get("GITHUB_EVENT_PATH", "").strip()
    if not path:
        raise Refusal("guard.event_file", "GITHUB_EVENT_PATH is not set; the runner always sets it",
                      field="GITHUB_EVENT_PATH", expected="the event file the runner writes", actual="(unset)")
    try:
        data = read_safe_path(path, limit=EVENT_LIMIT)
    except Refusal as exc:
        raise Refusal("guard.event_file", f"the event file cannot be read safely: {exc.message}",
                      field="GITHUB_EVENT_PATH", expected=exc.expected, actual=exc.actual) from None
    try:
        document = loads_json(data)
    except ValueError as exc:
        raise Refusal("guard.event_file", f"the event file is not valid JSON: {exc}",
                      field="GITHUB_EVENT_PATH", expected="a JSON object", actual=f"{len(data)} bytes") from None
    if not isinstance(document, dict):
        raise Refusal("guard.event_file", "the event file is not a JSON object", field="GITHUB_EVENT_PATH",
                      expected="a JSON object", actual=type(document).__name__)
    return document


# --- binding checks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BindingCheck:
    """One comparison the guard made: shown as a summary row, and the refusal if it failed."""

    check: str  # what was compared, for people ("run number: environment = REST")
    code: str  # the refusal code if it failed
    field: str
    expected: Any
    actual: Any
    ok: bool

    def refusal(self) -> Refusal:
        return Refusal(self.code, f"{self.check}: expected {self.expected!r}, found {self.actual!r}",
                       field=self.field, expected=self.expected, actual=self.actual)

    def row(self) -> tuple[str, Any, Any, str]:
        return (self.check, self.expected, self.actual, "✅" if self.ok else "⛔")


def first_failure(checks: Iterable[BindingCheck]) -> None:
    """Raise the refusal of the first failed check, if any."""
    for check in checks:
        if not check.ok:
            raise check.refusal()


# --- rehearsal ----------------------------------------------------------------------------------------


def rehearsal_context(env: Mapping[str, str], repository: str, workflows: Iterable[str]) -> RunContext:
    """The local context for a contract: git in the workspace, the contract's repository and first
    admitted workflow (so a rehearsal binds the same way every time on the same commit)."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
    workflow = next(iter(workflows), ".github/workflows/testops-evidence.yml")
    return local_context(workspace, repository, workflow)


# act, the local runner for GitHub workflows, sets ACT=true in every step (nektosact.com, "Skipping steps");
# GitHub's runners never do, and a person who dispatches a workflow cannot set a variable.
LOCAL_RUNNER_VARIABLE = "ACT"
LOCAL_ON_GITHUB = ("`local: true` is for a local runner such as act (docs/local.md); on GitHub's runners the run "
                   "is admitted against the contract's trust policy, which a local run context would skip. Remove "
                   "`local` from this workflow run (or dispatch it with local: false).")


def is_local(env: Mapping[str, str], local_input: bool = False) -> bool:
    """Whether this job's run context comes from git (a rehearsal, or the templates under act with the `local`
    input) rather than from GitHub's run. Always outside GitHub Actions; inside only with ``local``, and then
    only on a local runner: there is no run object to check, so on GitHub's runners it is refused
    (``input.local``), or it would skip the trust policy."""
    if env.get("GITHUB_ACTIONS") != "true":
        return True
    if not local_input:
        return False
    if env.get(LOCAL_RUNNER_VARIABLE) != "true":
        raise Refusal("input.local", "local: true runs only on a local runner (act sets ACT=true); this is a "
                      "GitHub Actions run", field="local", expected="false on GitHub's runners",
                      actual="true", hint=LOCAL_ON_GITHUB)
    return True


def job_context(env: Mapping[str, str], repository: str, workflows: Iterable[str], *,
                local: bool = False) -> RunContext:
    """The context a job states without any network call: the runner's variables inside Actions, else (or with
    ``local``, :func:`is_local`) the rehearsal context. For phases whose documents were already bound to the
    REST-checked run upstream (export, upload, verify re-check a digest-bound selection or receipt against it)."""
    if not is_local(env, local):
        return env_context(env)
    return rehearsal_context(env, repository, workflows)


def admit_backend(context: RunContext, backend: str) -> None:
    """Refuse ``guard.local_context`` when a local (rehearsal) context would reach TestOps.

    Token phases call this with ``ctx.backend()`` after :func:`trust.readmit`."""
    if context.local and backend == "testops":
        raise Refusal("guard.local_context", "a local rehearsal context can never be published to TestOps",
                      field="backend", expected="files", actual=backend,
                      hint="Use `backend: files` for a rehearsal, or run inside GitHub Actions without `local`.")
