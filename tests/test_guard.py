"""guard: every trust rule, the cross-checks between environment, event file and REST run, event-file
hazards, GHES, retries, the local rehearsal, and that the token never leaks. Real HTTP to the GitHub
test server; PyGithub runs unmodified."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import FakeClock, PhaseRun, run_mode, secret_leaks
from servers.github_server import REMOVE, GitHubServer
from testops_evidence.errors import Refusal
from testops_evidence.trust import OPERATIONS, dispatch_request

SENTINEL = "ghs_SENTINEL_h1_guard_7c2f9e1a5b3d8e6f04XYZ"
REPO = "acme/agents"
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
ACTOR = 1234567
WORKFLOW = ".github/workflows/agent-evals.yml"
RUN_ID = 4242
GOLDEN = Path(__file__).parent / "data" / "guard"


def contract_document(**trust: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {
        "repository": REPO,
        "events": ["workflow_dispatch"],
        "branches": ["main"],
        "workflows": [WORKFLOW],
        "run-attempts": "first-only",
        "actors": [ACTOR, 7654321],
    }
    for key, value in trust.items():
        key = key.replace("_", "-")
        if value is REMOVE:
            policy.pop(key, None)
        else:
            policy[key] = value
    return {
        "version": 1,
        "campaign": "agent-protocol",
        "trust": policy,
        "profile": {"id": "sonnet-default", "model": "claude-sonnet-5"},
        "lanes": {"native": {"max-parallel": 2}},
        "cases": [{"key": "get-task-context", "full-name": "agents/protocol/get-task-context",
                   "title": "Get task context", "lane": "native", "checks": {"tool-called": "behavior"}}],
    }


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer(token=SENTINEL) as server:
        yield server


class Guard:
    """One guarded run: the server's run, the event file, the contract and the runner environment."""

    def __init__(self, tmp_path: Path, gh: GitHubServer) -> None:
        self.tmp_path = tmp_path
        self.gh = gh
        self.event_dir = tmp_path / "workflow"
        self.event_dir.mkdir()
        self.event_path = self.event_dir / "event.json"

    def setup(self, *, private: bool = False, inputs: dict[str, Any] | None = None, ghes: bool = False,
              contract: dict[str, Any] | None = None, **run: Any) -> dict[str, str]:
        self.gh.add_repo(REPO, private=private, repo_id=99001)
        run.setdefault("head_sha", SHA)
        self.run = self.gh.add_run(REPO, RUN_ID, **run)
        self.event = self.gh.event_payload(RUN_ID, inputs=inputs)
        self.write_event(self.event)
        self.contract_path = self.tmp_path / "contract.json"
        self.contract_path.write_text(json.dumps(contract or contract_document()))
        env = self.gh.runner_env(RUN_ID, event_path=str(self.event_path), ghes=ghes)
        env["INPUT_GITHUB-TOKEN"] = SENTINEL
        env["RUNNER_TEMP"] = str(self.tmp_path / "runner-temp")
        return env

    def write_event(self, event: Any) -> None:
        self.event_path.write_text(json.dumps(event))

    def guard(self, env: dict[str, str], **options: Any) -> PhaseRun:
        return run_mode("guard", self.tmp_path, {"contract": str(self.contract_path), **options}, env)


@pytest.fixture
def g(tmp_path: Path, gh: GitHubServer) -> Guard:
    return Guard(tmp_path, gh)


def assert_refused(result: PhaseRun, code: str, exit_code: int, field: str | None = None) -> dict[str, Any]:
    assert result.exit_code == exit_code, result.log
    assert result.outputs.get("error-code") == code
    failure = result.failure()
    assert failure is not None and failure["code"] == code
    if field is not None:
        assert failure["field"] == field
    assert f"`{code}`" in result.summary
    assert_no_secret(result)
    return failure


def assert_no_secret(result: PhaseRun) -> None:
    assert secret_leaks(result, SENTINEL) == []


# --- admitted ---------------------------------------------------------------------------------------------


def test_an_admitted_run_writes_every_output_a_summary_of_every_binding_and_a_receipt(g: Guard) -> None:
    result = g.guard(g.setup())
    assert result.exit_code == 0, result.summary + result.log
    assert result.outputs == {
        "operation": "evaluate",
        "target-sha": SHA,
        "workflow-id": "161335",
        "run-url": f"{g.gh.url}/{REPO}/actions/runs/{RUN_ID}",
        "run-attempt": "1",
        "guard-sha256": hashlib.sha256((result.state_dir / "guard.json").read_bytes()).hexdigest(),
    }
    rows = [line for line in result.summary.splitlines() if line.endswith("| ✅ |")]
    assert len(rows) == 20  # 12 cross-checks + 8 trust rules, each one row
    assert "⛔" not in result.summary
    receipt_path = result.state_dir / "guard.json"
    assert stat.S_IMODE(receipt_path.stat().st_mode) == 0o600
    receipt = json.loads(receipt_path.read_text())
    assert receipt["schema"] == "testops-evidence/guard-receipt/v1"
    assert receipt["context"]["source"] == "rest"
    assert receipt["context"]["repository-private"] is False
    assert receipt["run"]["triggering-actor-id"] == ACTOR
    assert all(check["ok"] for check in receipt["checks"])
    assert_no_secret(result)


def test_the_admitted_summary_matches_its_golden_file(g: Guard) -> None:
    result = g.guard(g.setup())
    assert result.exit_code == 0
    check_golden("summary-admitted.md", normalized(result, g))


def test_the_refused_summary_shows_every_binding_and_the_refusal(g: Guard) -> None:
    env = g.setup(run_attempt=2, contract=contract_document(actors=[7654321]))
    result = g.guard(env)
    assert_refused(result, "guard.run_attempt", 3, "run-attempt")
    assert "3 of 20 bindings failed" in result.summary  # attempt, actor and triggering actor
    check_golden("summary-refused.md", normalized(result, g))


def normalized(result: PhaseRun, g: Guard) -> str:
    """The summary without what changes per test run: the server's port, the temporary directory and the digest of
    the receipt that records them."""
    text = result.summary.replace(g.gh.url, "https://github.test").replace(str(g.tmp_path), "<tmp>")
    digest = result.outputs.get("guard-sha256")
    return text.replace(digest, "<guard-sha256>") if digest else text


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs; run with UPDATE_GOLDEN=1 to accept the new summary"


def test_ghes_base_url_with_api_v3_prefix_works(g: Guard) -> None:
    result = g.guard(g.setup(ghes=True))
    assert result.exit_code == 0, result.summary
    assert [r.path for r in g.gh.requests_to("run")] == [f"/api/v3/repos/{REPO}/actions/runs/{RUN_ID}"]


def test_a_contract_may_spell_the_repository_in_another_case(g: Guard) -> None:
    result = g.guard(g.setup(contract=contract_document(repository="ACME/Agents")))
    assert result.exit_code == 0, result.summary


def test_any_run_attempt_policy_admits_a_rerun_and_reports_the_attempt(g: Guard) -> None:
    env = g.setup(run_attempt=3, triggering_actor_id=7654321, contract=contract_document(run_attempts="any"))
    result = g.guard(env)
    assert result.exit_code == 0, result.summary
    assert result.outputs["run-attempt"] == "3"


def test_without_an_actor_list_anyone_who_can_start_the_run_is_admitted(g: Guard) -> None:
    result = g.guard(g.setup(actor_id=555, contract=contract_document(actors=REMOVE)))
    assert result.exit_code == 0, result.summary
    assert "anyone who can start the run" in result.summary


def test_a_server_error_then_success_is_retried(g: Guard) -> None:
    env = g.setup()
    g.gh.fault("run", 503, times=1)
    result = g.guard(env)
    assert result.exit_code == 0, result.summary
    assert [r.status for r in g.gh.requests_to("run")] == [503, 200]


# --- trust rules: each ends with exit 3 and its own code ------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "private", "trust", "code", "field", "expected", "actual"),
    [
        pytest.param({}, False, {"repository": "acme/other"}, "guard.repository", "repository",
                     "acme/other", REPO, id="repository"),
        pytest.param({}, True, {"public_only": True}, "guard.visibility", "repository-visibility",
                     "public", "private", id="visibility"),
        pytest.param({}, False, {"events": ["push"]}, "guard.event", "event", ["push"], "workflow_dispatch",
                     id="event"),
        pytest.param({"head_branch": "feature/x"}, False, {}, "guard.branch", "workflow-ref",
                     ["refs/heads/main"], "refs/heads/feature/x", id="branch"),
        pytest.param({}, False, {"workflows": [".github/workflows/other.yml"]}, "guard.workflow", "workflow-path",
                     [".github/workflows/other.yml"], WORKFLOW, id="workflow"),
        pytest.param({"run_attempt": 2}, False, {}, "guard.run_attempt", "run-attempt", 1, 2, id="run-attempt"),
        pytest.param({"actor_id": 555}, False, {"actors": [ACTOR]}, "guard.actor", "actor-id", [ACTOR], 555,
                     id="actor"),
        pytest.param({"triggering_actor_id": 555}, False, {"actors": [ACTOR]}, "guard.actor", "triggering-actor-id",
                     [ACTOR], 555, id="triggering-actor"),
        pytest.param({"triggering_actor": REMOVE}, False, {"actors": [ACTOR]}, "guard.actor", "triggering-actor-id",
                     [ACTOR], None, id="triggering-actor-unknown"),
    ],
)
def test_each_trust_rule_refuses_with_its_code(g: Guard, run: dict[str, Any], private: bool, trust: dict[str, Any],
                                               code: str, field: str, expected: Any, actual: Any) -> None:
    env = g.setup(private=private, contract=contract_document(**trust), **run)
    result = g.guard(env)
    failure = assert_refused(result, code, 3, field)
    assert (failure["expected"], failure["actual"]) == (expected, actual)
    assert "| ⛔ |" in result.summary
    assert "operation" not in result.outputs
    assert not (result.state_dir / "guard.json").exists()


# --- cross-checks: environment / event / REST ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("GITHUB_RUN_NUMBER", "8", "run-number"),
        ("GITHUB_SHA", "b" * 40, "head-sha"),
        ("GITHUB_WORKFLOW_REF", f"{REPO}/.github/workflows/other.yml@refs/heads/main", "workflow-path"),
        ("GITHUB_RUN_ATTEMPT", "2", "run-attempt"),
        ("GITHUB_REPOSITORY_ID", "1", "repository-id"),
        ("GITHUB_EVENT_NAME", "push", "event"),
        ("GITHUB_ACTOR_ID", "555", "actor-id"),
        ("GITHUB_WORKFLOW_REF", f"{REPO}/{WORKFLOW}@refs/heads/release", "head-branch"),
    ],
)
def test_environment_that_disagrees_with_the_rest_run_is_a_run_mismatch(g: Guard, variable: str, value: str,
                                                                        field: str) -> None:
    env = g.setup()
    env[variable] = value
    failure = assert_refused(g.guard(env), "guard.run_mismatch", 3, field)
    assert failure["actual"] != failure["expected"]


def test_a_missing_workflow_ref_as_under_act_points_at_the_local_path_not_at_a_work_around(g: Guard) -> None:
    env = g.setup()
    del env["GITHUB_WORKFLOW_REF"]  # act sets every other GITHUB_* variable, but not this one
    failure = assert_refused(g.guard(env), "guard.run_mismatch", 3, "GITHUB_WORKFLOW_REF")
    assert "local: true" in failure["hint"] and "docs/local.md" in failure["hint"]
    result = g.guard(env, **{"state-dir": str(g.tmp_path / "again")})
    assert "docs/local.md" in result.summary
    assert "do not work around it" not in result.summary.lower()


def test_a_rest_run_of_another_head_sha_is_a_run_mismatch(g: Guard) -> None:
    env = g.setup()
    g.run["head_sha"] = "c" * 40  # the server now tells another story than the runner
    failure = assert_refused(g.guard(env), "guard.run_mismatch", 3, "head-sha")
    assert (failure["expected"], failure["actual"]) == (SHA, "c" * 40)


def test_an_event_sender_that_is_not_the_run_actor_is_a_run_mismatch(g: Guard) -> None:
    env = g.setup()
    g.write_event(g.gh.event_payload(RUN_ID, sender_id=555))
    failure = assert_refused(g.guard(env), "guard.run_mismatch", 3, "sender-id")
    assert (failure["expected"], failure["actual"]) == (555, ACTOR)


def test_an_event_of_another_repository_is_a_run_mismatch(g: Guard) -> None:
    env = g.setup()
    g.write_event({**g.event, "repository": {**g.event["repository"], "full_name": "evil/fork"}})
    assert_refused(g.guard(env), "guard.run_mismatch", 3, "event-repository")


# --- event file hazards -------------------------------------------------------------------------------------------


def test_a_symlinked_event_file_is_refused(g: Guard) -> None:
    env = g.setup()
    real = g.event_dir / "real.json"
    g.event_path.rename(real)
    g.event_path.symlink_to(real)
    assert_refused(g.guard(env), "guard.event_file", 3, "GITHUB_EVENT_PATH")


def test_a_fifo_event_file_is_refused_without_blocking(g: Guard) -> None:
    env = g.setup()
    g.event_path.unlink()
    os.mkfifo(g.event_path)
    assert_refused(g.guard(env), "guard.event_file", 3, "GITHUB_EVENT_PATH")


def test_a_hard_linked_event_file_is_refused(g: Guard) -> None:
    env = g.setup()
    os.link(g.event_path, g.event_dir / "second-name.json")
    assert_refused(g.guard(env), "guard.event_file", 3, "GITHUB_EVENT_PATH")


def test_an_oversized_event_file_is_refused(g: Guard) -> None:
    env = g.setup()
    g.write_event({**g.event, "padding": "x" * (64 * 1024)})
    assert_refused(g.guard(env), "guard.event_file", 3, "GITHUB_EVENT_PATH")


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe{}", b'"text"', b""])
def test_an_event_file_that_is_not_a_json_object_is_refused(g: Guard, content: bytes) -> None:
    env = g.setup()
    g.event_path.write_bytes(content)
    assert_refused(g.guard(env), "guard.event_file", 3, "GITHUB_EVENT_PATH")


def test_a_missing_event_file_or_variable_is_refused(g: Guard) -> None:
    env = g.setup()
    g.event_path.unlink()
    assert_refused(g.guard(env), "guard.event_file", 3)
    del env["GITHUB_EVENT_PATH"]
    assert_refused(g.guard(env), "guard.event_file", 3)


def test_event_inputs_that_are_not_an_object_are_refused(g: Guard) -> None:
    env = g.setup()
    g.write_event({**g.event, "inputs": ["operation"]})
    assert_refused(g.guard(env), "guard.event_file", 3, "inputs")


# --- remote failures ----------------------------------------------------------------------------------------------


def test_a_refused_token_is_github_http_401_exit_4(g: Guard) -> None:
    env = g.setup()
    env["INPUT_GITHUB-TOKEN"] = "ghs_wrong_token"
    failure = assert_refused(g.guard(env), "github.http_401", 4)
    assert failure["http-status"] == 401
    assert "github-token" in failure["hint"]


def test_an_unknown_run_is_github_http_404_and_not_retried(g: Guard) -> None:
    env = g.setup()
    env["GITHUB_RUN_ID"] = "999999"
    assert_refused(g.guard(env), "github.http_404", 4)
    assert len(g.gh.requests_to("run")) == 1


def test_an_unreachable_api_is_github_transport_after_retries_on_the_injected_clock(g: Guard) -> None:
    env = g.setup()
    env["GITHUB_API_URL"] = "http://127.0.0.1:9"  # discard port: nothing listens
    clock = FakeClock()
    result = run_mode("guard", g.tmp_path, {"contract": str(g.contract_path)}, env, sleep=clock.sleep)
    assert_refused(result, "github.transport", 4)
    assert clock.sleeps == [1.0, 2.0]  # urllib3 backoff 0.5 s x 2^n; the first retry does not wait


def test_a_missing_token_is_a_usage_error(g: Guard) -> None:
    env = g.setup()
    del env["INPUT_GITHUB-TOKEN"]
    assert_refused(g.guard(env), "input.github-token", 2)


def test_the_token_never_appears_in_outputs_summary_log_or_files(g: Guard) -> None:
    env = g.setup()
    env["GITHUB_TOKEN"] = SENTINEL  # the fallback variable too
    admitted = g.guard(env)
    assert admitted.exit_code == 0
    assert_no_secret(admitted)
    g.gh.fault("run", 401, body=json.dumps({"message": f"Bad credentials {SENTINEL}"}).encode())
    refused = run_mode("guard", g.tmp_path, {"contract": str(g.contract_path), "state-dir": str(g.tmp_path / "s2")},
                       env)
    assert refused.exit_code == 4
    assert_no_secret(refused)
    assert all(SENTINEL not in json.dumps(record.headers) for record in g.gh.log)


# --- the dispatch request ------------------------------------------------------------------------------------------


def test_operation_and_target_sha_come_from_dispatch_inputs(g: Guard) -> None:
    target = "0123456789abcdef0123456789ABCDEF01234567"
    result = g.guard(g.setup(inputs={"operation": "bootstrap", "target-sha": target}))
    assert result.exit_code == 0, result.summary
    assert (result.outputs["operation"], result.outputs["target-sha"]) == ("bootstrap", target.lower())


@pytest.mark.parametrize(
    ("inputs", "code"),
    [
        ({"operation": "deploy"}, "input.operation"),
        ({"target-sha": "main"}, "input.target-sha"),
        ({"target_sha": "abc123"}, "input.target-sha"),
        ({"target-sha": "a" * 40, "target_sha": "b" * 40}, "input.target-sha"),
    ],
)
def test_malformed_dispatch_inputs_are_usage_errors(g: Guard, inputs: dict[str, str], code: str) -> None:
    result = g.guard(g.setup(inputs=inputs))
    assert_refused(result, code, 2)


def test_empty_dispatch_inputs_take_the_defaults() -> None:
    assert dispatch_request({"inputs": {"operation": " ", "target-sha": ""}}, SHA) == ("evaluate", SHA)
    assert dispatch_request({}, SHA) == ("evaluate", SHA)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(inputs=st.one_of(
    _json_values,
    st.fixed_dictionaries({}, optional={
        "operation": st.one_of(st.sampled_from([*OPERATIONS, "", " launch ", "x"]), _json_values),
        "target-sha": st.one_of(st.text(alphabet="0123456789abcdefABCDEF", min_size=38, max_size=42), _json_values),
        "target_sha": st.one_of(st.just("a" * 40), _json_values),
    }),
))
def test_dispatch_request_accepts_only_valid_requests(inputs: Any) -> None:
    try:
        operation, target = dispatch_request({"inputs": inputs}, SHA)
    except Refusal as refusal:
        assert refusal.code in {"guard.event_file", "input.operation", "input.target-sha"}
        assert refusal.exit_code in (2, 3)
    else:
        assert operation in OPERATIONS
        assert len(target) == 40 and set(target) <= set("0123456789abcdef")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=300) | _json_values.map(lambda v: json.dumps(v).encode()))
def test_the_event_file_parser_returns_an_object_or_refuses(tmp_path: Path, content: bytes) -> None:
    from testops_evidence.context import read_event

    path = tmp_path / "event.json"
    path.write_bytes(content)
    try:
        event = read_event({"GITHUB_EVENT_PATH": str(path)})
    except Refusal as refusal:
        assert refusal.code == "guard.event_file"
    else:
        assert isinstance(event, dict)


# --- receipts --------------------------------------------------------------------------------------------------------


def test_guarding_the_same_run_twice_is_idempotent_but_another_run_is_refused(g: Guard) -> None:
    env = g.setup()
    state = str(g.tmp_path / "shared-state")
    assert g.guard(env, **{"state-dir": state}).exit_code == 0
    assert g.guard(env, **{"state-dir": state}).exit_code == 0
    g.run["run_number"] = 8
    env["GITHUB_RUN_NUMBER"] = "8"
    assert_refused(g.guard(env, **{"state-dir": state}), "io.exists", 3, "state-dir")


# --- local rehearsal --------------------------------------------------------------------------------------------------


def git_checkout(path: Path) -> str:
    path.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=path, check=True)
    (path / "README").write_text("rehearsal\n")
    subprocess.run([*git, "add", "README"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], cwd=path, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def rehearsal(tmp_path: Path, contract: dict[str, Any], **options: Any) -> PhaseRun:
    head = git_checkout(tmp_path / "checkout")
    contract_path = tmp_path / "contract.json"
    contract_path.write_text(json.dumps(contract))
    env = {"GITHUB_WORKSPACE": str(tmp_path / "checkout")}
    result = run_mode("guard", tmp_path, {"contract": str(contract_path), "local": "true", **options}, env,
                      actions=False)
    result.env["HEAD"] = head
    return result


def test_a_local_rehearsal_derives_the_context_from_git(tmp_path: Path) -> None:
    result = rehearsal(tmp_path, contract_document())
    assert result.exit_code == 0, result.log
    assert result.outputs == {"operation": "evaluate", "target-sha": result.env["HEAD"], "workflow-id": "",
                              "run-url": "", "run-attempt": "1",
                              "guard-sha256": hashlib.sha256((result.state_dir / "guard.json").read_bytes()).hexdigest()}
    assert "can never be published to TestOps" in result.log
    receipt = json.loads((result.state_dir / "guard.json").read_text())
    assert receipt["context"]["local"] is True and receipt["backend"] == "files"


def test_a_local_rehearsal_with_an_explicit_testops_backend_is_refused(tmp_path: Path) -> None:
    result = rehearsal(tmp_path, contract_document(), backend="testops")
    assert result.exit_code == 3
    assert result.outputs["error-code"] == "guard.local_context"


def test_a_local_rehearsal_of_a_testops_contract_says_evidence_only_goes_to_files(tmp_path: Path) -> None:
    contract = contract_document()
    contract["cases"][0]["testops-id"] = 194
    contract["testops"] = {"endpoint": "https://acme.testops.cloud", "project-id": 12,
                           "plan": {"id": 340, "name": "Agent protocol evals"}}
    result = rehearsal(tmp_path, contract)
    assert result.exit_code == 0, result.log
    assert "only goes to the **files** backend" in result.log


def test_guard_outside_actions_without_local_is_a_usage_error(tmp_path: Path) -> None:
    contract_path = tmp_path / "contract.json"
    contract_path.write_text(json.dumps(contract_document()))
    result = run_mode("guard", tmp_path, {"contract": str(contract_path)}, {}, actions=False)
    assert result.exit_code == 2
    assert result.outputs["error-code"] == "guard.outside_actions"


# --- local: true inside a workflow run (the templates under act, docs/local.md) ---------------------------------


def act_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What act sets in a step: GITHUB_ACTIONS and ACT, but no GITHUB_WORKFLOW_REF and no run object anywhere."""
    return {"GITHUB_ACTIONS": "true", "ACT": "true", "GITHUB_WORKSPACE": str(tmp_path / "checkout"),
            "GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1", **extra}


def test_local_under_act_derives_the_context_from_git_and_admits_no_run(tmp_path: Path) -> None:
    head = git_checkout(tmp_path / "checkout")
    contract_path = tmp_path / "contract.json"
    contract_path.write_text(json.dumps(contract_document()))
    result = run_mode("guard", tmp_path, {"contract": str(contract_path), "local": "true"}, act_env(tmp_path))
    assert result.exit_code == 0, result.summary + result.log
    assert result.outputs["target-sha"] == head and result.outputs["run-url"] == ""
    receipt = json.loads((result.state_dir / "guard.json").read_text())
    assert receipt["context"]["local"] is True and receipt["context"]["source"] == "local"


def test_local_on_githubs_own_runners_is_refused_because_it_would_skip_the_trust_policy(g: Guard) -> None:
    env = g.setup()  # a real run: GITHUB_ACTIONS=true, no ACT
    failure = assert_refused(g.guard(env, local="true"), "input.local", 2, "local")
    assert "act" in failure["message"] and "docs/local.md" in failure["hint"]
    assert g.gh.requests_to("run") == []  # refused before anything was read
