"""An Inspect AI eval of one contract case, ``read-company-goals`` (examples/contract.yml), as a worker runs it.

    inspect eval examples/inspect/read_company_goals.py --model <your model> --log-dir logs --epochs 2
    testops-evidence cell --case read-company-goals --inspect-log logs --out cell-results/read-company-goals.json

Each scorer is named after a check of the case (``goals_fetched`` -> ``goals-fetched``), so the adapter
maps them without configuration; the sample id is the case key. Every epoch must pass for a check to pass.

The rehearsal (``testops-evidence rehearse``) runs this file with ``python3 read_company_goals.py LOG_DIR``
when inspect-ai is installed (``bash scripts/setup.sh`` installs it for the tests), else it uses the log
shipped in ``logs/``. Run that way it needs no model and no network: the agent is Inspect's ``mockllm``
answering from the sample, which stands in for your real agent.
"""

from __future__ import annotations

import sys
from typing import Any

from inspect_ai import Task, eval, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import generate
from inspect_ai.tool import ToolChoice, ToolInfo

GOALS = "Ship the agent protocol v2; keep support response under 4 hours"


@scorer(metrics=[accuracy()])
def goals_fetched() -> Any:
    async def score(state: Any, _target: Target) -> Score:
        answer = state.output.completion
        return Score(value="C" if "get_company_goals" in answer else "I", answer=answer)

    return score


@scorer(metrics=[accuracy()])
def answer_grounded() -> Any:
    async def score(state: Any, target: Target) -> Score:
        ok = target.text in state.output.completion
        return Score(value="C" if ok else "I", explanation="cites the goals" if ok else "does not cite the goals")

    return score


@task
def read_company_goals() -> Task:
    return Task(
        dataset=[Sample(id="read-company-goals", input="What are the company's goals this quarter?", target=GOALS)],
        solver=generate(),
        scorer=[goals_fetched(), answer_grounded()],
    )


def _scripted_agent(_messages: list[ChatMessage], _tools: list[ToolInfo], _choice: ToolChoice,
                    _config: GenerateConfig) -> ModelOutput:
    output = ModelOutput.from_content(model="mockllm/model", content=f"(called get_company_goals) {GOALS}")
    output.usage = ModelUsage(input_tokens=180, output_tokens=42, total_tokens=222)  # mockllm counts none itself
    return output


if __name__ == "__main__":
    model = get_model("mockllm/model", custom_outputs=_scripted_agent)
    logs = eval(read_company_goals(), model=model, log_dir=sys.argv[1], epochs=2, display="none")
    sys.exit(0 if logs and logs[0].status == "success" else 1)
