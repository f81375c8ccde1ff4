"""The contract's trust policy, applied to a run: by ``guard`` first, and again by every coordinator phase.

``guard`` admits the run and tells later jobs what to do, but nothing makes a workflow run ``guard`` (a caller
can call the phases step by step, or leave the guard job out), and a job's outputs cannot prove that an
earlier job was admitted. So every coordinator phase admits its run again, in one of two ways:

* :func:`readmit` — the phases that hold a token and start from the run itself (``select``,
  ``collect-cells``, ``import``, ``bootstrap``, ``launch``, ``reconcile``): the event file, the runner's
  environment and the REST run object, cross-checked, then the same trust rules as guard. It costs one
  ``GET`` of the run (select and import read it anyway).
* :func:`readmit_recorded` — the phases that start from a digest-bound document made earlier in the same
  run attempt (``upload``, ``verify``, ``pages``): the trust rules against the run context that ``select``
  read over REST and recorded in the selection (the receipt carries it), once that document is bound to
  this job's run. No request: the context is the one select admitted, and a selection exists only if it did.

The guard's ``operation`` binds what may follow: when the run's event states one (a ``workflow_dispatch``
input ``operation``), a phase that serves another operation is refused (``guard.operation``) — a run
dispatched to bootstrap cannot select an evaluation, and so has no selection to upload or verify. A run
whose event states no operation (callers without such an input; push or schedule events) is bound by the
rest of the policy only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence.context import (
    SHA_RE,
    BindingCheck,
    RunContext,
    env_context,
    is_local,
    read_event,
    rehearsal_context,
)
from testops_evidence.contract import Contract, Trust
from testops_evidence.errors import Refusal, input_error
from testops_evidence.github_run import (
    RequestPolicy,
    RunObject,
    context_from_run,
    cross_checks,
    fetch_run,
    require_token,
)

OPERATIONS = ("bootstrap", "launch", "evaluate", "import")
# The operation each REST-readmitting phase belongs to (docs/guard.md). reconcile is absent: it resolves the
# uncertain mutations of whichever operation left them, so every operation may run it. upload, verify and pages
# are bound through the selection: only a select of an `evaluate` run makes one.
PHASE_OPERATIONS: Mapping[str, str] = {
    "bootstrap": "bootstrap",
    "launch": "launch",
    "select": "evaluate",
    "collect-cells": "evaluate",
    "stream": "evaluate",
    "import": "import",
}
_SHOWN = 100  # characters of an untrusted event value quoted back in a refusal


# --- the policy ----------------------------------------------------------------------------------------------


def trust_checks(trust: Trust, context: RunContext) -> list[BindingCheck]:
    """The contract's trust policy against the REST-checked context: one check per rule, all evaluated."""
    checks = [
        # GitHub owner and repository names are case-insensitive; a contract may spell them either way.
        BindingCheck("repository", "guard.repository", "repository", trust.repository, context.repository,
                     trust.repository.casefold() == context.repository.casefold()),
    ]
    visibility = "private" if context.repository_private else "public"
    if trust.public_only:
        checks.append(BindingCheck("visibility (public-only)", "guard.visibility", "repository-visibility",
                                   "public", visibility, context.repository_private is False))
    else:
        checks.append(BindingCheck("visibility", "guard.visibility", "repository-visibility",
                                   "public or private", visibility, True))
    branches = [f"refs/heads/{branch}" for branch in trust.branches]
    checks += [
        BindingCheck("event", "guard.event", "event", list(trust.events), context.event,
                     context.event in trust.events),
        BindingCheck("workflow ref (branch)", "guard.branch", "workflow-ref", branches, context.workflow_ref,
                     context.workflow_ref in branches),
        BindingCheck("workflow file", "guard.workflow", "workflow-path", list(trust.workflows),
                     context.workflow_path, context.workflow_path in trust.workflows),
    ]
    if trust.run_attempts == "first-only":
        checks.append(BindingCheck("run attempt (first-only)", "guard.run_attempt", "run-attempt", 1,
                                   context.run_attempt, context.run_attempt == 1))
    else:
        checks.append(BindingCheck("run attempt (any)", "guard.run_attempt", "run-attempt", "any",
                                   context.run_attempt, True))
    if trust.actors is None:
        anyone = "anyone who can start the run"
        checks += [
            BindingCheck("actor", "guard.actor", "actor-id", anyone, context.actor_id, True),
            BindingCheck("triggering actor", "guard.actor", "triggering-actor-id", anyone,
                         context.triggering_actor_id, True),
        ]
    else:
        allowed = list(trust.actors)
        checks += [
            BindingCheck("actor", "guard.actor", "actor-id", allowed, context.actor_id,
                         context.actor_id in trust.actors),
            # A re-run's triggering actor differs from the original actor; both must be allowed. A server
            # that does not report it (old GHES) is refused: an unknown actor is not an allowed one.
            BindingCheck("triggering actor", "guard.actor", "triggering-actor-id", allowed,
                         context.triggering_actor_id, context.triggering_actor_id in trust.actors),
        ]
    return checks


def operation_check(phase: str, stated: str | None) -> BindingCheck | None:
    """The row binding ``phase`` to the operation the run was dispatched for; None for a phase of every
    operation (reconcile). A run whose event states no operation passes: there is nothing to bind."""
    serves = PHASE_OPERATIONS.get(phase)
    if serves is None:
        return None
    return BindingCheck(f"operation ({phase} serves {serves})", "guard.operation", "operation", serves,
                        stated if stated is not None else "(not stated)", stated is None or stated == serves)


# --- the dispatch request ----------------------------------------------------------------------------------


def stated_operation(event: Mapping[str, Any]) -> str | None:
    """The ``operation`` the event's ``workflow_dispatch`` inputs state, validated; None when they state none."""
    operation = _input_text(_inputs(event), "operation")
    if operation is not None and operation not in OPERATIONS:
        raise input_error("operation", "the workflow_dispatch input `operation` names no operation",
                          expected=" | ".join(OPERATIONS), actual=operation[:_SHOWN])
    return operation


def dispatch_request(event: Mapping[str, Any], head_sha: str) -> tuple[str, str]:
    """``(operation, target-sha)`` from the event's ``workflow_dispatch`` inputs.

    ``operation`` defaults to ``evaluate``; ``target-sha`` (or ``target_sha``) defaults to the run's
    head SHA. Both are validated: an operator's typo is a usage refusal, never a silent default.
    """
    operation = stated_operation(event) or "evaluate"
    inputs = _inputs(event)
    # Both spellings are accepted (dispatch input ids are often snake_case); refusals use the output's name.
    given = [value for value in (_input_text(inputs, "target-sha"), _input_text(inputs, "target_sha", "target-sha"))
             if value is not None]
    for value in given:
        if not SHA_RE.match(value.lower()):
            raise input_error("target-sha", "the workflow_dispatch input `target-sha` is not a full commit SHA",
                              expected="40 hex digits", actual=value[:_SHOWN])
    if len({value.lower() for value in given}) > 1:
        raise input_error("target-sha", "the inputs `target-sha` and `target_sha` name different commits",
                          expected=given[0].lower(), actual=given[1].lower())
    return operation, given[0].lower() if given else head_sha


def _inputs(event: Mapping[str, Any]) -> Mapping[str, Any]:
    inputs = event.get("inputs")
    if inputs is None:
        return {}
    if not isinstance(inputs, dict):
        raise Refusal("guard.event_file", "the event's inputs are not an object", field="inputs",
                      expected="an object", actual=type(inputs).__name__)
    return inputs


def _input_text(inputs: Mapping[str, Any], name: str, code_name: str | None = None) -> str | None:
    """An input's stripped text; None when absent or empty (the form leaves optional inputs empty)."""
    value = inputs.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise input_error(code_name or name, f"the workflow_dispatch input `{name}` is not a string",
                          expected="a string", actual=type(value).__name__)
    value = value.strip()
    return value or None


# --- admission ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admission:
    """A run held against the policy: its REST-checked context, the run object and every comparison made."""

    context: RunContext
    run: RunObject
    event: Mapping[str, Any]
    checks: tuple[BindingCheck, ...]

    @property
    def failed(self) -> list[BindingCheck]:
        return [check for check in self.checks if not check.ok]


def evaluate(env: Mapping[str, str], contract: Contract, *, token: str | None, policy: RequestPolicy,
             phase: str | None = None, event: Mapping[str, Any] | None = None) -> Admission:
    """Read the event file and the REST run, and evaluate every binding: the cross-checks between the
    environment, the event and REST (``guard.run_mismatch``), the trust policy, and — for a phase — the
    operation it serves. Nothing is refused here; the caller decides how to show the failures. ``event`` is
    the event file's payload when the caller has read it already."""
    if event is None:
        event = read_event(env)
    env_ctx = env_context(env)
    run = fetch_run(env_ctx.api_url, require_token(token), env_ctx.repository, env_ctx.run_id, policy=policy)
    context = context_from_run(env, run)
    checks = cross_checks(env, event, run) + trust_checks(contract.trust, context)
    if phase is not None:
        bound = operation_check(phase, stated_operation(event))
        if bound is not None:
            checks.append(bound)
    return Admission(context, run, event, tuple(checks))


def refusal(admission: Admission, phase: str) -> Refusal:
    """The refusal of a run that failed re-admission (:func:`refused`)."""
    return refused(admission.failed, admission.context, phase)


def refused(failed: list[BindingCheck], context: RunContext, phase: str, *, recorded: bool = False) -> Refusal:
    """The first failed binding's code, field, expected and actual, with every failed binding named in the
    message (the summary shows them all at once)."""
    first = failed[0].refusal()
    named = "; ".join(f"{check.check}: expected {check.expected!r}, found {check.actual!r}"
                      for check in failed[:10])
    more = f" (and {len(failed) - 10} more)" if len(failed) > 10 else ""
    what = "the run select recorded for" if recorded else "run"
    return Refusal(first.code, f"{phase} re-admits {what} {context.run_id} (attempt {context.run_attempt}) against "
                   f"the contract's trust policy and refuses it: {named}{more}", field=first.field,
                   expected=first.expected, actual=first.actual)


def readmit(env: Mapping[str, str], contract: Contract, phase: str, *, token: str | None, policy: RequestPolicy,
            local: bool = False, log: Callable[[str], None] | None = None) -> RunContext:
    """The run context ``phase`` binds to, once the run is admitted again against the contract's policy.

    Inside GitHub Actions: the REST-checked context of a run that passes every binding guard checks, and the
    operation ``phase`` serves (``guard.operation``); the first failure is the refusal, with guard's code.
    On a local runner with ``local`` (:func:`context.is_local`), and outside Actions, the rehearsal context:
    there is no run to admit, and a local context never reaches TestOps (``context.admit_backend``).
    """
    if is_local(env, local):
        return rehearsal_context(env, contract.trust.repository, contract.trust.workflows)
    admission = evaluate(env, contract, token=token, policy=policy, phase=phase)
    if admission.failed:
        raise refusal(admission, phase)
    if log is not None:
        context = admission.context
        log(f"{phase}: run {context.run_id} (attempt {context.run_attempt}) of {context.repository} re-admitted "
            f"against the trust policy ({len(admission.checks)} bindings: {context.event} on "
            f"{context.workflow_ref}, {context.workflow_path}, actor {context.actor_id})")
    return admission.context


# The rules that need fields a receipt's context row does not carry (export keeps the run, commit, event and
# workflow in it, not the actors or the repository's visibility).
_NOT_IN_RECEIPT = frozenset({"guard.actor", "guard.visibility"})


def readmit_recorded(recorded: RunContext, contract: Contract, phase: str, *, receipt_only: bool = False,
                     log: Callable[[str], None] | None = None) -> None:
    """Hold the run context a digest-bound selection (or the receipt that carries it) recorded against the
    contract's trust policy: for ``upload``, ``verify`` and ``pages``, after the document is bound to this
    job's run (same repository, run, attempt, commit and workflow).

    ``select`` read that context over REST and admitted it (:func:`readmit`); checking it again here means a
    selection that was not made by an admitted select — written by a step, or by a select of an older
    release that did not re-admit — publishes nothing. A field the context does not know (a visibility or a
    triggering actor that was never read over REST) fails a rule that needs it, as in guard. A local
    (rehearsal) context is not a run: it is never published to TestOps (``guard.local_context``) and has no
    policy to hold it against.

    ``receipt_only`` (pages, which has the receipt but not the selection): the actor and visibility rules are
    left to the select and verify of the same run attempt, which held the selection's full context; the
    receipt names the rest (repository, event, branch, workflow, attempt).
    """
    if recorded.local:
        return
    checks = [check for check in trust_checks(contract.trust, recorded)
              if not (receipt_only and check.code in _NOT_IN_RECEIPT)]
    failed = [check for check in checks if not check.ok]
    if failed:
        raise refused(failed, recorded, phase, recorded=True)
    if log is not None:
        log(f"{phase}: run {recorded.run_id} (attempt {recorded.run_attempt}) as select recorded it re-admitted "
            f"against the trust policy ({len(checks)} bindings)")
