"""Writes real Inspect AI logs for the adapter tests, offline, with the producer environment's Python.

    .tools/producers/bin/python tests/producers/inspect_eval.py OUT_DIR --format eval|json

Run by tests/test_frameworks.py (never imported by the package: the adapter reads logs without
inspect_ai). Every sample of the campaign below is one case of examples/contract.yml; its metadata says,
per epoch, what each scorer returns, so one run holds passing, failing, erroring, limit-stopped and
unscored samples over several epochs.

The model is Inspect's ``mockllm/model`` with outputs that carry their own token usage: the real
``generate`` path runs (and records usage per sample), but mockllm never counts tokens itself, which would
download a tokenizer. Two logs are written: ``campaign`` (status success) and ``aborted`` (fail_on_error
stops it after the first error, so some samples never run: status error).
"""

from __future__ import annotations

import argparse
from typing import Any

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.tool import ToolChoice, ToolInfo

EPOCHS = 3


def _plan(**per_check: Any) -> dict[str, Any]:
    return {"plan": per_check}


CAMPAIGN = [
    # every scorer correct in every epoch: passed
    Sample(id="get-task-context", input="What is task 42 about?", target="42",
           metadata=_plan(tool_called="CCC", answer_grounded="CCC", cleanup="CCC")),
    # filtered_correctly is incorrect in epoch 2 only: each epoch must pass, so the check fails
    Sample(id="list-open-issues", input="List the open issues", target="issues",
           metadata=_plan(tool_called="CCC", filtered_correctly="CIC", cleanup="CCC")),
    # the solver raises in epoch 3: a sample error, never a pass
    Sample(id="create-issue-comment", input="Comment on issue 7", target="comment",
           metadata={**_plan(comment_posted="CCC", no_duplicate_comment="CCC", cleanup="CCC"), "raise_in": 3}),
    # the model reports more tokens than the task's token limit in epoch 1: a limit hit
    Sample(id="checkout-task", input="Check out task 9", target="task",
           metadata=_plan(checkout_called_first="CCC", conflict_handled="CCC")),
    # the cleanup scorer returns no score in epoch 2: a missing score
    Sample(id="release-task-on-failure", input="Release task 9", target="task",
           metadata=_plan(released="CCC", reason_recorded="CCC", cleanup="C-C")),
    # a numeric id named to its case by metadata, scored by one dict-valued scorer
    Sample(id=7, input="Delegate a subtask", target="subtask",
           metadata={"case": "delegate-subtask",
                     "subtask": {"subtask_created": "CCC", "assignee_valid": "CCC", "parent_linked": "CCC"}}),
    # a scorer whose score names its check explicitly (Score.metadata["check"])
    Sample(id="budget-stop", input="Spend until the budget stops you", target="stop",
           metadata={**_plan(spend_reported="CCC", budget_guard="CCC"), "checks": {"budget_guard": "stopped-at-budget"}}),
]
SCORERS = ["tool_called", "answer_grounded", "filtered_correctly", "comment_posted", "no_duplicate_comment",
           "checkout_called_first", "conflict_handled", "released", "reason_recorded", "cleanup", "spend_reported",
           "budget_guard"]


@solver
def scripted_agent() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if state.metadata.get("raise_in") == state.epoch:
            raise RuntimeError("sandbox did not start: connection refused")
        return await generate(state)

    return solve


def _outputs(messages: list[ChatMessage], _tools: list[ToolInfo], _choice: ToolChoice,
             _config: GenerateConfig) -> ModelOutput:
    text = messages[-1].text if messages else ""
    output = ModelOutput.from_content(model="mockllm/model", content=f"done: {text}")
    heavy = "Check out task 9" in text and "checkout" not in _SEEN
    tokens_in = 50_000 if heavy else 120 + len(text)
    if heavy:
        _SEEN.add("checkout")
    output.usage = ModelUsage(input_tokens=tokens_in, output_tokens=40, total_tokens=tokens_in + 40,
                              input_tokens_cache_read=16)
    return output


_SEEN: set[str] = set()  # the first epoch of checkout-task goes over the token limit, later ones do not


def _check_scorer(name: str) -> Any:
    @scorer(metrics=[accuracy()], name=name)
    def make() -> Any:
        async def score(state: TaskState, target: Target) -> Score | None:
            plan = state.metadata.get("plan", {}).get(name)
            if plan is None:
                return Score(value="N", explanation="not measured for this case")
            letter = plan[state.epoch - 1]
            if letter == "-":
                return None
            check = state.metadata.get("checks", {}).get(name)
            return Score(value=letter, explanation=f"{name} epoch {state.epoch}: {letter}",
                         metadata={"check": check} if check else None)

        return score

    return make()


@scorer(metrics=[{"*": [accuracy()]}])
def subtask() -> Any:
    async def score(state: TaskState, target: Target) -> Score:
        plan = state.metadata.get("subtask")
        if plan is None:
            return Score(value={"subtask_created": "N", "assignee_valid": "N", "parent_linked": "N"})
        return Score(value={key: letters[state.epoch - 1] for key, letters in plan.items()},
                     explanation="delegation protocol")

    return score


def campaign(samples: list[Sample], **options: Any) -> Task:
    return Task(dataset=samples, solver=scripted_agent(), scorer=[*(_check_scorer(n) for n in SCORERS), subtask()],
                token_limit=10_000, name=options.pop("name"), **options)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--format", choices=("eval", "json"), required=True)
    args = parser.parse_args()
    model = get_model("mockllm/model", custom_outputs=_outputs)
    common: dict[str, Any] = {"model": model, "log_dir": args.out, "log_format": args.format, "display": "none",
                              "max_samples": 1, "max_tasks": 1}
    eval(campaign(CAMPAIGN, name="campaign"), epochs=EPOCHS, fail_on_error=False, **common)
    # fail_on_error stops the run at the first sample error: the samples after it never run.
    aborted = [CAMPAIGN[2], CAMPAIGN[0], CAMPAIGN[1]]
    _SEEN.clear()
    eval(campaign(aborted, name="aborted"), epochs=EPOCHS, fail_on_error=True, **common)


if __name__ == "__main__":
    main()
